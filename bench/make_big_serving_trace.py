"""Build a big serving trace (issue 27) by tiling a real vLLM serving trace end to end, written as a stream.

What it builds, by default: tests/data/real/tracelens_vllm_gptoss_mixed_piecewise_rocm.json.gz (a real vLLM V1
worker trace from AMD-AGI/TraceLens, MIT, see tests/data/real/PROVENANCE.md: gpt-oss on ROCm, one mixed
prefill+decode step of 46 sequences replayed as 25 piecewise hipGraphLaunch calls, `with_stack` and
`record_shapes`, 19,289 events, 4.5 MB of JSON, 308 ms) tiled 240 times into one consistent Kineto JSON of
4,629,121 events and about 1.1 GB (1.09 GB). Each copy starts the source's span plus 1 ms after the one before
it (times shifted in integer nanoseconds, so each copy's times are the source's exactly); every id that links
events (flow `id`, `correlation`, `External id`, `Python id`, `Python parent id`, `Ev Idx`, `Record function id`)
is raised by one common stride per copy, so links stay unique and inside their copy; the "M" metadata events and
the document's other keys are written once. `--target-gb G` picks the number of copies for a file of about G GB
instead (the 6 GB trace: `--target-gb 6`, 1,327 copies, 25.6M events).

The truth of the step count: the source has 1 step (Stepscope reads it from its one vLLM `execute_context_...`
annotation, and the trace holds nothing else a step could be made of), so the tiled trace has `copies` steps.

How it differs from the issue's judged trace (a vLLM V1 worker trace of an 80-layer Llama on an H100, piecewise
CUDA graphs, `with_stack`, no annotations, ~180k events and 42 MB a copy, 1 prefill + 9 decodes a copy, tiled 30
times: 1.27 GB, 4.6M events, 300 steps): that trace is not available here. This one has about the same events and
bytes in all (4.6M, 1.1 GB; 235 bytes an event against 276) and the same mix (mostly python_function events from
`with_stack`, cpu_ops, runtime calls, graph-replayed kernels, flows), but 240 long mixed steps (one per 19k events)
instead of 300 prefill and decode steps (one per 15k), found from vLLM's step annotations rather than from the
trace's structure, on AMD (hipGraphLaunch) rather than NVIDIA, with 413 kernels a step rather than thousands.

The generator holds only the source: each event is turned once into JSON text with holes for its time and ids,
and every copy is written by filling the holes, a few MB at a time.

    python bench/make_big_serving_trace.py OUT.json [--copies 240 | --target-gb 6] [--source TRACE.json.gz]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "tests" / "data" / "real" / "tracelens_vllm_gptoss_mixed_piecewise_rocm.json.gz"
COPIES = 240
GAP_NS = 1_000_000  # between one copy's last event and the next copy's first
ID_ARGS = ("correlation", "External id", "external id", "Python id", "Python parent id", "Ev Idx", "Record function id")
_TS_HOLE, _ID_HOLE = "\x00ts\x00", "\x00id\x00"
_FLUSH_BYTES = 8 << 20


def _ns(value) -> int:
    """A Kineto time in us (written with at most 3 decimals) as integer ns, exactly as written."""
    if isinstance(value, int):
        return value * 1000
    return int((Decimal(repr(float(value))) * 1000).to_integral_value())


def _us_text(ns: int) -> str:
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    return f"{sign}{ns // 1000}.{ns % 1000:03d}"


class _Template:
    """One event's JSON text cut where its time and its linking ids go: filled in per copy."""

    __slots__ = ("ids", "parts", "ts_ns")

    def __init__(self, event: dict) -> None:
        event = dict(event)
        self.ts_ns = None
        self.ids: list[int] = []
        if "ts" in event and isinstance(event["ts"], int | float):
            self.ts_ns = _ns(event["ts"])
            event["ts"] = _TS_HOLE
        if isinstance(event.get("id"), int):
            self.ids.append(event["id"])
            event["id"] = _ID_HOLE
        args = event.get("args")
        if isinstance(args, dict) and any(isinstance(args.get(k), int) for k in ID_ARGS):
            args = event["args"] = dict(args)
            for key in ID_ARGS:
                if isinstance(args.get(key), int):
                    self.ids.append(args[key])
                    args[key] = _ID_HOLE
        text = json.dumps(event)
        # the holes in the order they appear in the text: ts first in Kineto's key order, but find them to be sure
        self.parts: list[str] = []
        order: list[str] = []
        rest = text
        while True:
            hits = [(rest.find(f'"{h}"'), h) for h in (json.dumps(_TS_HOLE)[1:-1], json.dumps(_ID_HOLE)[1:-1])]
            hits = [(i, h) for i, h in hits if i >= 0]
            if not hits:
                break
            at, hole = min(hits)
            self.parts.append(rest[:at])
            order.append("ts" if hole == json.dumps(_TS_HOLE)[1:-1] else "id")
            rest = rest[at + len(hole) + 2 :]
        self.parts.append(rest)
        ids = iter(self.ids)
        self.ids = [next(ids) if kind == "id" else -1 for kind in order]  # -1 marks the ts hole

    def text(self, shift_ns: int, stride: int) -> str:
        if len(self.parts) == 1:
            return self.parts[0]
        out = [self.parts[0]]
        for value, part in zip(self.ids, self.parts[1:], strict=True):
            out.append(_us_text(self.ts_ns + shift_ns) if value == -1 else str(value + stride))
            out.append(part)
        return "".join(out)


def load_source(source: Path) -> dict:
    with gzip.open(source, "rt") if source.suffix == ".gz" else open(source) as fh:
        return json.load(fh)


def plan(doc: dict) -> tuple[list[dict], list[dict], int, int]:
    """(metadata events, timed events, the time shift between copies in ns, the id stride)."""
    events = doc["traceEvents"]
    meta = [e for e in events if e.get("ph") == "M"]
    timed = [e for e in events if e.get("ph") != "M"]
    stamped = [e for e in timed if isinstance(e.get("ts"), int | float)]
    start = min(_ns(e["ts"]) for e in stamped)
    end = max(_ns(e["ts"]) + round(float(e.get("dur") or 0) * 1000) for e in stamped)
    ids = [e["id"] for e in events if isinstance(e.get("id"), int)]
    ids += [v for e in events if isinstance(e.get("args"), dict) for k, v in e["args"].items() if k in ID_ARGS]
    stride = 1 + max([v for v in ids if isinstance(v, int)], default=0)
    return meta, timed, end - start + GAP_NS, stride


def copies_for(target_bytes: int, source: Path) -> int:
    """How many copies make a file of about `target_bytes`."""
    doc = load_source(source)
    _, timed, _, _ = plan(doc)
    per_copy = sum(len(_Template(e).text(0, 0)) + 2 for e in timed)
    return max(1, round(target_bytes / per_copy))


def build(out: Path, copies: int = COPIES, source: Path = SOURCE) -> dict:
    """Write the tiled trace to `out` (through a temporary name, renamed when whole); what was written."""
    doc = load_source(source)
    meta, timed, shift, stride = plan(doc)
    templates = [_Template(e) for e in timed]
    head = {k: v for k, v in doc.items() if k != "traceEvents"}
    tmp = out.with_name(f".{out.name}.partial")
    count = 0
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write("{\n")
            for key, value in head.items():
                fh.write(f"  {json.dumps(key)}: {json.dumps(value)},\n")
            fh.write('  "traceEvents": [\n')
            buffer: list[str] = [json.dumps(e) for e in meta]
            count, size, written = len(meta), 0, False
            for copy in range(copies):
                dt, did = copy * shift, copy * stride
                for template in templates:
                    text = template.text(dt, did)
                    buffer.append(text)
                    size += len(text)
                count += len(templates)
                if size >= _FLUSH_BYTES or copy == copies - 1:
                    fh.write((",\n" if written else "") + ",\n".join(buffer))
                    buffer, size, written = [], 0, True
            fh.write("\n  ]\n}\n")
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()
    return {"events": count, "copies": copies, "bytes": out.stat().st_size, "source": str(source)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--copies", type=int, default=None, help=f"copies of the source (default {COPIES})")
    parser.add_argument("--target-gb", type=float, default=None, help="as many copies as make about this many GB")
    parser.add_argument("--source", type=Path, default=SOURCE)
    args = parser.parse_args(argv)
    copies = args.copies or COPIES
    if args.target_gb is not None:
        copies = copies_for(int(args.target_gb * 1e9), args.source)
    info = build(args.out, copies, args.source)
    print(f"{info['events']:,} events, {info['copies']} copies, {info['bytes'] / 1e9:.2f} GB -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
