"""The project's size ceilings (the developers' guide): no product module over 600 lines, no function over 100.

Product code is every tracked .py file outside tests/, bench/ and .ci/. A module's lines are `wc -l`'s; a
function's run from its `def` (decorators not counted) to its last line. Exit 1 with one line per breach.
"""

import ast
import subprocess
import sys

MAX_MODULE_LINES, MAX_FUNCTION_LINES = 600, 100
files = subprocess.run(["git", "ls-files", "*.py"], capture_output=True, text=True, check=True).stdout.split()
product = [f for f in files if not f.startswith(("tests/", "bench/", ".ci/"))]
breaches = []
for path in product:
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    lines = text.count("\n")
    if lines > MAX_MODULE_LINES:
        breaches.append(f"{path}: {lines} lines (ceiling {MAX_MODULE_LINES})")
    for node in ast.walk(ast.parse(text, path)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = node.end_lineno - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                breaches.append(f"{path}:{node.lineno}: {node.name} is {length} lines (ceiling {MAX_FUNCTION_LINES})")
for breach in breaches:
    print(breach)
print(f"sizes: {len(product)} product modules, {len(breaches)} over a ceiling")
sys.exit(1 if breaches else 0)
