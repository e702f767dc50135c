"""Save `analyze T --json --no-cache` for every bench/real/sample trace, or compare against a saved run.

Speed work on the analysis must not change a single byte of its output; this records a baseline before the
change and checks it after:

    python bench/analysis_identity.py save /tmp/ident_before
    python bench/analysis_identity.py check /tmp/ident_before

Inputs: the bench traces (/tmp/big_gpu.json, /tmp/big_cpu.json, /tmp/big_stack.json, when present), every trace file in
tests/data/real/ (hta_sampled_2rank as one folder input) and every folder in sample_traces/; and any other traces
named in STEPSCOPE_IDENTITY_EXTRA (paths separated by ':', e.g. bench/make_big_serving_trace.py's), first.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH_TRACES = [Path("/tmp/big_gpu.json"), Path("/tmp/big_cpu.json"), Path("/tmp/big_stack.json")]
TRACE_SUFFIXES = (".json", ".json.gz", ".pftrace", ".sqlite")
# The CLI with the CPU roofline's calibration fixed: it is measured on the spot (a copy and a matmul), so CPU
# traces' roofline numbers change from run to run; the analysis under test does not depend on them.
CLI = """
import sys
from stepscope.analysis.roofline import cpu_calibration as c
c.measure_memory_bandwidth = lambda repeats=5: 16e9
c.measure_matmul_throughput = lambda repeats=3: 100e9
from stepscope.app.cli.main import main
sys.argv = ["app.cli", *sys.argv[1:]]
sys.exit(main())
"""


def inputs() -> list[Path]:
    """Every input the check covers, in a fixed order."""
    extra = [Path(p) for p in os.environ.get("STEPSCOPE_IDENTITY_EXTRA", "").split(":") if p]
    found = [p for p in [*extra, *BENCH_TRACES] if p.exists()]
    real = ROOT / "tests/data/real"
    for p in sorted(real.iterdir()):
        if p.name == "hta_sampled_2rank" or (p.is_file() and p.name.endswith(TRACE_SUFFIXES)):
            found.append(p)
    found += sorted(p for p in (ROOT / "sample_traces").iterdir() if p.is_dir())
    return found


def run_one(path: Path) -> bytes:
    """The CLI's stdout, stderr and exit status for one input, as one byte string."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-c", CLI, "analyze", str(path), "--json", "--no-cache"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=600,
    )
    return b"rc=%d\n--stdout--\n%s\n--stderr--\n%s" % (proc.returncode, proc.stdout, proc.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["save", "check"])
    parser.add_argument("folder", type=Path)
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    failures = 0
    for path in inputs():
        out = run_one(path)
        saved = args.folder / (path.name + ".out")
        if args.mode == "save":
            saved.write_bytes(out)
            print(f"saved {path}")
        elif not saved.exists():
            print(f"MISSING baseline for {path}")
            failures += 1
        elif saved.read_bytes() == out:
            print(f"same    {path}")
        else:
            (args.folder / (path.name + ".new")).write_bytes(out)
            print(f"DIFFERS {path} (new output beside the baseline as .new)")
            failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
