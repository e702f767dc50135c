"""The analyze command's readable form: the same numbers as --json, laid out for a terminal."""

from __future__ import annotations


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
    s = report["summary"]
    itl = s["itl_ms"]
    figures = [
        ("TTFT", _num(s["ttft_ms"], "ms")),
        ("ITL p50 / p90 / p99", "n/a" if itl is None else f"{itl['p50']:.3f} / {itl['p90']:.3f} / {itl['p99']:.3f} ms"),
        ("decode tokens/s", _num(s["decode_tokens_per_s"], "")),
        ("GPU busy", _num(s["gpu_busy_pct"], "%")),
        ("prefill / decode steps", f"{s['prefill_steps']} / {s['decode_steps']}"),
        ("kernels per decode step", _num(s["kernels_per_decode_step"], "")),
        ("launches per decode step", _num(s["launches_per_decode_step"], "")),
        ("GPU idle per decode step", _num(s["gpu_idle_per_decode_step_us"], "us")),
    ]
    lines.append("")
    lines += [f"{name:<26}{value}" for name, value in figures]
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


def _num(value, unit: str) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.3f} {unit}".rstrip()
