"""The analyze command's readable form: the same numbers as --json, laid out for a terminal.

Every metric of the registry (analysis.metrics), one line each, read from the JSON contract's summary."""

from __future__ import annotations

import math

from analysis.metrics import METRICS


def render_text(report: dict) -> str:
    seg = report["segmentation"]
    lines = [
        f"format   {report['format']}",
        f"device   {report['device'] or 'unknown'}",
        f"events   {report['events']:,}",
        f"steps    found by {seg['method']} (confidence {seg['confidence']:.2f}), "
        f"{report['requests']} request(s), {len(report['steps'])} step(s)",
    ]
    lines += [f"warning  {w}" for w in seg["warnings"]]
    summary = report["summary"]
    lines.append("")
    lines += [f"{m.label:<26}{_num(m.value(summary), m.unit)}" for m in METRICS]
    if report["steps"]:
        lines += [
            "",
            f"{'step':>5} {'kind':<8} {'req':>3} {'idx':>4} {'span us':>10} {'kernels':>8} "
            f"{'launches':>8} {'busy us':>10} {'idle us':>10}",
        ]
        for i, st in enumerate(report["steps"][:40]):
            lines.append(
                f"{i:>5} {st['kind']:<8} {st['request']:>3} {st['index']:>4} {st['end_us'] - st['start_us']:>10.1f} "
                f"{st['kernels']:>8} {st['launches']:>8} {st['gpu_busy_us']:>10.1f} {st['gpu_idle_us']:>10.1f}"
            )
        if len(report["steps"]) > 40:
            lines.append(f"  ... {len(report['steps']) - 40} more (use --json for all)")
    if report["findings"]:
        lines.append("")
        lines += [f"[{f['severity']}] {f['title']}: {f['detail']}" for f in report["findings"]]
    return "\n".join(lines) + "\n"


def _num(value: float, unit: str) -> str:
    if math.isnan(value):
        return "n/a"
    if not unit:
        return f"{value:,.3f}".rstrip("0").rstrip(".")  # counts print as counts, medians with their decimals
    return f"{value:,.3f} {unit}"
