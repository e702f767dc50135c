"""What an analysis result depends on, as one key: a cached answer is served only for exactly the same inputs.

The key is built from whole objects, never from a list of the options that matter: every field of the options
dataclass (so a field added tomorrow is in the key the day it is added), the model's shape, the read limits, the
run.json beside the trace, this machine's measured figures when they feed the answer, the parser and result format
versions, and a stamp of every source file of the package (derived from the folders, not a hand list). A value
that cannot be written as plain data makes the result uncacheable (NotKeyableError), never cached under a wrong key.

Standard library only: the command line's warm path builds the key before numpy or pandas is imported.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import os
from pathlib import Path
from typing import Any

RESULT_VERSION = 2  # bump whenever the answer changes for the same inputs without a source change (never needed
# while the source stamp covers every file; kept so an entry format change can still retire old entries)
PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # the repository in a checkout, site-packages/stepscope installed


class NotKeyableError(TypeError):
    """A value the key cannot hold exactly (an object without a plain-data form): the result is not cached."""


def key_material(value: Any) -> Any:
    """Plain JSON data standing for `value` exactly: dataclasses field by field (with their type's name), tuples
    and lists as lists, compiled patterns by their text and flags, paths as strings. NotKeyableError otherwise."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, enum.Enum):
        return [type(value).__name__, key_material(value.value)]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: key_material(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"__type__": type(value).__qualname__, **fields}
    if isinstance(value, list | tuple):
        return [key_material(v) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise NotKeyableError("a mapping with keys other than strings")
        return {k: key_material(v) for k, v in sorted(value.items())}
    pattern, flags = getattr(value, "pattern", None), getattr(value, "flags", None)
    if isinstance(pattern, str) and hasattr(value, "search"):  # re.Pattern, re2's patterns
        return {"__pattern__": pattern, "flags": flags if isinstance(flags, int) else None}
    raise NotKeyableError(f"{type(value).__name__} has no plain-data form for the cache key")


def package_folders() -> list[Path]:
    """Every folder of Python sources that makes up the package: its subpackages (folders with an __init__.py
    beside this one's parent) and stepscope/ itself."""
    return sorted(p for p in PACKAGE_ROOT.iterdir() if (p / "__init__.py").is_file() and p.name != "tests")


def source_stamp() -> str:
    """A short hash of (path, size, mtime) of every .py file of the package: any edit anywhere retires every
    cached answer; a change outside analysis costs a recomputation, never an old answer. About 250 stats through
    os.walk (a millisecond; pathlib's rglob took 4 ms, paid several times by each cold command)."""
    root = str(PACKAGE_ROOT)
    rows = []
    for folder in package_folders():
        for top, subfolders, files in os.walk(folder):  # symbolic links to folders are not followed
            subfolders.sort()
            for name in sorted(files):
                if not name.endswith(".py"):
                    continue
                path = os.path.join(top, name)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                rows.append(f"{path[len(root) + 1 :]}:{st.st_size}:{st.st_mtime_ns}")
    from stepscope.trace_cache.keys import hash_text

    return hash_text("\n".join(rows))[-16:]


def result_key(**parts: Any) -> str:
    """The key of one answer from named parts (options, model, limits, sidecar, machine, command, ...), each turned
    into key material; NotKeyableError when one cannot be."""
    from stepscope.trace_cache.keys import PARSER_VERSION, hash_text

    material = {name: key_material(value) for name, value in sorted(parts.items())}
    material["versions"] = [PARSER_VERSION, RESULT_VERSION, source_stamp()]
    return hash_text(json.dumps(material, sort_keys=True, separators=(",", ":")))[-32:]
