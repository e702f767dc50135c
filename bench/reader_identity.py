"""Is `analyze X --json --no-cache` byte for byte the same in another checkout (main before a change) and this one?

For every sample (sample_traces/), real trace (tests/data/real, hta_sampled_2rank as one folder) and capture
(tests/data/captures), and any trace named with --extra (the big tiled ones: bench/make_big_serving_trace.py), runs
the command in both checkouts, one after the other, and compares stdout and the exit status. Prints one line per
input and a last line `N same, M different`; exits 1 when any differs.

    python bench/reader_identity.py --before /work/wt/base [--extra bench/out/big-serving.json ...]

The CPU roofline's calibration is fixed in both (it is measured on the spot otherwise, so CPU traces' roofline
figures change from run to run; the reading under test does not depend on them). The checkout before runs with
STEPSCOPE_JSON_SCANNER=off (its compiled scanner reads what msgspec reads, its tests say; this way it builds nothing).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = """
import sys
from stepscope.analysis.roofline import cpu_calibration as c
c.measure_memory_bandwidth = lambda repeats=5: 16e9
c.measure_matmul_throughput = lambda repeats=3: 100e9
from stepscope.app.cli.main import main
sys.argv = ["app.cli", *sys.argv[1:]]
sys.exit(main())
"""


def inputs(extra: list[str]) -> list[Path]:
    real = ROOT / "tests" / "data" / "real"
    out = [Path(p) for p in extra]
    out += sorted(p for p in (ROOT / "sample_traces").iterdir() if p.is_dir())
    out += sorted(p for p in real.iterdir() if p.name.endswith((".json", ".json.gz")))
    out += sorted(p for p in real.iterdir() if p.is_dir() and p.name != "LICENSES")
    out += sorted((ROOT / "tests" / "data" / "captures").glob("*.json.gz"))
    return out


def answer(checkout: Path, trace: Path, env: dict) -> tuple[int, bytes]:
    done = subprocess.run(
        [sys.executable, "-c", CLI, "analyze", str(trace.resolve()), "--json", "--no-cache"],
        cwd=checkout,
        env=env,
        capture_output=True,
        timeout=1800,
        check=False,
    )
    return done.returncode, done.stdout


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", required=True, help="the checkout to compare with (main before the change)")
    p.add_argument("--extra", nargs="*", default=[], help="more traces (the big tiled ones)")
    p.add_argument("--only-extra", action="store_true", help="only the traces given with --extra")
    args = p.parse_args(argv)
    same = different = 0
    with tempfile.TemporaryDirectory(prefix="stepscope-identity-") as cache:
        env = {**os.environ, "STEPSCOPE_CACHE_DIR": cache}
        for trace in [Path(t) for t in args.extra] if args.only_extra else inputs(args.extra):
            before = answer(Path(args.before), trace, {**env, "STEPSCOPE_JSON_SCANNER": "off"})
            after = answer(ROOT, trace, env)
            ok = before == after and before[0] == 0
            same, different = same + ok, different + (not ok)
            word = "same" if ok else "DIFFERENT"
            print(f"{word}  rc {before[0]}/{after[0]}  {len(after[1]):>9} B  {trace}", flush=True)
    print(f"{same} same, {different} different")
    return 0 if different == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
