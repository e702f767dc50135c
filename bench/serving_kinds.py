"""How well the analysis reads served runs: on each vLLM capture and its twins, the share of forwards of known kind,
the steps of a wrong phase, sequences per step, and the request count, against the capture's truth.

Variants of each capture (tests/captures/vllm.py `make_twins` derives the last three from the worker's trace):
as captured with the API server's file beside it (when there is one), the worker's file alone, the worker without
vLLM's step annotations (with and without the API server's file), without annotations or python frames (a profile
without stacks), and both of the last with record_shapes' inputs stripped (vLLM's default profile records no shapes;
few captures were made so, so every capture stands for that setup too: those totals are over all captures).
Captures: tests/data/captures/vllm (shipped) and any folders given.

    python bench/serving_kinds.py [CAPTURE_DIR ...]
"""

from __future__ import annotations

import gzip
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stepscope.analysis.front_door import NO_CACHE, open_folder  # noqa: E402
from tests.captures.vllm import make_twins  # noqa: E402
from tests.captures.vllm_truth import score  # noqa: E402

VARIANTS = (
    ("annotated + front end", "as is", True),
    ("annotated", "as is", False),
    ("no annotations + front end", "no annotations", True),
    ("no annotations", "no annotations", False),
    ("no annotations, no python", "no python", False),
    ("no annotations, shapes stripped", "no shapes", False),
    ("no annotations, shapes stripped, no python", "no shapes, no python", False),
)
STRIPPED = ("no shapes", "no shapes, no python")  # every capture shapes-off: its totals are over all captures


def variant_report(capture: Path, variant: str, front_end: bool) -> dict:
    worker = next(p for p in capture.glob("*.pt.trace.json*") if ".async_llm." not in p.name)
    fronts = [p for p in capture.glob("*.pt.trace.json*") if ".async_llm." in p.name]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        doc = json.loads(gzip.decompress(worker.read_bytes()))
        if variant != "as is":
            doc = make_twins(doc, python=variant.endswith("no python"), shapes=variant not in STRIPPED)
        (folder / worker.name.removesuffix(".gz")).write_text(json.dumps(doc))
        for p in fronts if front_end else []:
            (folder / p.name).write_bytes(p.read_bytes())
        opened = open_folder(folder, cache=NO_CACHE)
        return opened.report


def main(argv: list[str]) -> int:
    captures = [Path(a) for a in argv] or sorted(p for p in (ROOT / "tests/data/captures/vllm").iterdir() if p.is_dir())
    totals: dict[str, list[int]] = {}
    print(f"{'capture':<26} {'variant':<42} {'known':>7} {'wrong':>5} {'seq':>7} {'requests':>9}")
    for capture in captures:
        truth = json.loads(capture.with_name(capture.name + ".truth.json").read_text())
        has_front = any(".async_llm." in p.name for p in capture.iterdir())
        shapes = truth["how"]["server"]["record_shapes"]
        for label, variant, front_end in VARIANTS:
            if front_end and not has_front:
                continue
            s = score(variant_report(capture, variant, front_end), truth)
            key = label if variant in STRIPPED else f"{label}, shapes {'on' if shapes else 'off'}"
            known, total = totals.setdefault(key, [0, 0]), s["forwards"]
            known[0] += s["known"]
            known[1] += total
            requests = f"{s['requests']}/{s['requests_truth']}"
            seq = f"{s['sequences_stated'] - len(s['sequences_wrong'])}/{total}"
            bad = len(s["wrong"]) + len(s["missed"]) + s["split"]
            print(f"{capture.name:<26} {label:<42} {s['known']:>3}/{total:<3} {bad:>5} {seq:>7} {requests:>9}")
    print()
    for key, (known, total) in totals.items():
        print(f"{key:<48} {100 * known / max(total, 1):5.1f}% of {total} forwards of known kind")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
