"""Every import in the tree resolves for a static tool (basedpyright), as an editor's go-to-definition needs.

basedpyright reports unresolved modules under reportMissingImports and unknown imported names under
reportAttributeAccessIssue, which also covers attribute access in general (types are not checked here): keep the
first kind whole and, of the second, the unknown-import-symbol messages. Exit 1 with one line per problem.
"""

import json
import subprocess
import sys

proc = subprocess.run(["basedpyright", "--outputjson"], capture_output=True, text=True)
try:
    report = json.loads(proc.stdout)
except ValueError:
    print(f"error: basedpyright gave no report: {proc.stderr.strip()[-500:]}", file=sys.stderr)
    sys.exit(1)
problems = [
    d
    for d in report.get("generalDiagnostics", [])
    if d.get("rule") == "reportMissingImports" or "unknown import symbol" in d.get("message", "")
]
for d in problems:
    line = d.get("range", {}).get("start", {}).get("line", 0) + 1
    print(f"{d['file']}:{line}: {d['message'].splitlines()[0]}")
print(f"imports: {report.get('summary', {}).get('filesAnalyzed', '?')} files, {len(problems)} unresolved")
sys.exit(1 if problems else 0)
