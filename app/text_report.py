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


def render_ranks_text(report: dict) -> str:
    """The readable form of a multi-rank run: one line per rank, the cross-rank figures, warnings, findings."""
    run = report["run"]
    lines = [
        f"run      {run['ranks']} rank(s), {run['aligned_steps']} aligned step(s) (by {run.get('alignment', '?')})",
        f"clock    {run.get('clock_note', '')}",
        "",
        f"{'rank':>4} {'file':<40} {'steps':>6} {'ITL p50 ms':>11} {'busy %':>8}",
    ]
    for r in report["ranks"]:
        s = r["summary"]
        itl, busy = (s.get("itl_ms") or {}).get("p50"), s.get("gpu_busy_pct")
        lines.append(
            f"{r['rank']:>4} {str(r.get('file', ''))[:40]:<40} {len(r['steps']):>6} "
            f"{_opt(itl, ''):>11} {_opt(busy, ''):>8}"
        )
    step = run.get("step_time_ms") or {}
    skew = run.get("skew_us") or {}
    lines += [
        "",
        f"{'step time (slowest rank)':<26}p50 {_opt(step.get('p50'), 'ms')}, p90 {_opt(step.get('p90'), 'ms')}",
        f"{'skew (' + run.get('skew_basis', '') + ')':<26}p50 {_opt(skew.get('p50'), 'us')}, "
        f"p90 {_opt(skew.get('p90'), 'us')}",
        f"{'communication':<26}{_opt(run.get('comm_pct'), '%')}",
        f"{'exposed communication':<26}{_opt(run.get('exposed_comm_pct'), '%')}",
        f"{'slowest rank':<26}{'n/a' if run.get('slowest_rank') is None else run['slowest_rank']}",
    ]
    lines += [f"warning  {w}" for w in run.get("warnings", [])]
    if run.get("findings"):
        lines.append("")
        lines += [f"[{f['severity']}] {f['title']}: {f['detail']}" for f in run["findings"]]
    return "\n".join(lines) + "\n"


def _opt(value: float | None, unit: str) -> str:
    return "n/a" if value is None else _num(float(value), unit)
