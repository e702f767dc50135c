"""The Kineto / Chrome-trace JSON reader (docs/DESIGN.md, "The Kineto reader"): fields.py is the one table of what is
read; reader.py the entry points; columns.py the column builder; pieces.py, two_processes.py, channel.py,
file_pieces.py and join.py a big file read in pieces by two processes. Imported module by module, when used: a big
file's decoding starts before numpy is loaded."""
