"""The analyze command's readable form: the same numbers as --json, laid out for a terminal.

Every metric of the registry (analysis.metrics), one line each, read from the JSON contract's summary. Text from the
trace (names, devices, warnings) goes through safe_text.plain: a right-to-left override in a device name cannot turn
the rest of a terminal line around, and a file name that is not UTF-8 cannot fail the write."""

from __future__ import annotations

import math

from ..analysis.metrics import METRICS, format_bytes, format_value
from .safe_text import plain


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
    lines += composition_lines(report)
    summary = report["summary"]
    lines.append("")
    lines += [f"{m.label:<26}{_num(m.value(summary), m.unit)}" for m in METRICS]
    if report["steps"]:
        lines += [
            "",
            f"{'step':>5} {'kind':<8} {'req':>3} {'idx':>4} {'span us':>10} {'kernels':>8} "
            f"{'launches':>8} {'busy us':>10} {'idle us':>10} {'lead us':>10} {'tail us':>10}",
        ]
        for i, st in enumerate(report["steps"][:40]):
            lines.append(
                f"{i:>5} {st['kind']:<8} {st['request']:>3} {st['index']:>4} {st['end_us'] - st['start_us']:>10.1f} "
                f"{st['kernels']:>8} {st['launches']:>8} {st['gpu_busy_us']:>10.1f} {st['gpu_idle_us']:>10.1f} "
                f"{st.get('gpu_lead_us', 0):>10.1f} {st.get('gpu_tail_us', 0):>10.1f}"
            )
        if len(report["steps"]) > 40:
            lines.append(f"  ... {len(report['steps']) - 40} more (use --json for all)")
    anatomy = summary.get("anatomy")
    if anatomy:
        lines += anatomy_lines(anatomy)
    lines += memory_lines(summary.get("memory"))
    if report["findings"]:
        lines.append("")
        lines += [f"[{f['severity']}] {f['title']}: {f['detail']}{_cost(f)}" for f in report["findings"]]
    return plain("\n".join(lines) + "\n")  # a name's bidi controls and undecodable bytes printed as escapes


def composition_lines(report: dict) -> list[str]:
    """One line on what the batches held, when a step carried more than one sequence or was not a plain prefill
    or decode (mixed, verify, draft); nothing otherwise."""
    steps, summary = report["steps"], report["summary"]
    kinds = {k: summary.get(f"{k}_steps") or 0 for k in ("mixed", "verify", "draft")}
    sequences = [s["sequences"] for s in steps if s.get("kind") == "decode" and s.get("sequences") is not None]
    batched = bool(sequences) and max(sequences) > 1
    if not batched and not any(kinds.values()):
        return []
    parts = [f"{n} {k}" for k, n in kinds.items() if n]
    if sequences:
        parts.append(f"{sorted(sequences)[len(sequences) // 2]} sequences per decode step (median)")
    spec = summary.get("speculative")
    if spec and spec.get("itl_ms_range"):
        r = spec["itl_ms_range"]
        parts.append(f"ITL per emitted token {r['min']:.2f}-{r['max']:.2f} ms (acceptance unknown)")
    elif spec and spec.get("itl_ms_per_token"):
        parts.append(f"ITL per emitted token {spec['itl_ms_per_token']['p50']:.2f} ms")
    return [f"batches  {', '.join(parts)}"]


def anatomy_lines(anatomy: dict) -> list[str]:
    """The median decode step by category, its layers and the per-category roofline."""
    unit = anatomy.get("unit", "kernels")
    cats = anatomy.get("categories") or {}
    if anatomy.get("step") is None:
        return ["", "inside a step: no step found"]
    kind = anatomy.get("step_kind")
    role = anatomy.get("step_role") or f"step {anatomy['step']} ({kind})"
    lines = ["", f"inside {role}"]
    total = sum(c["time_us"] for c in cats.values()) or 1.0
    lines.append(f"{'category':<15}{unit:>9}{'time us':>12}{'share':>8}")
    for name, c in sorted(cats.items(), key=lambda kv: -kv[1]["time_us"]):
        lines.append(f"{name:<15}{c['kernels']:>9}{c['time_us']:>12.1f}{100 * c['time_us'] / total:>7.1f}%")
    layers = anatomy.get("layers")
    if layers:
        lu = anatomy.get("layer_us") or {}
        lines.append(
            f"layers   {layers} x {anatomy.get('kernels_per_layer')} {unit}; per layer p50 {lu.get('p50', 0):.1f} us "
            f"(min {lu.get('min', 0):.1f}, max {lu.get('max', 0):.1f}, first {lu.get('first', 0):.1f}, "
            f"last {lu.get('last', 0):.1f}); head {anatomy.get('head_us') or 0:.1f} us, "
            f"tail {anatomy.get('tail_us') or 0:.1f} us"
        )
    else:
        lines.append("layers   not counted")
    lines.append(f"         {anatomy.get('evidence', '')}")
    roof = anatomy.get("roofline") or {}
    if roof.get("status") == "ok":
        lines.append(
            f"per-category roofline ({roof['model']} on {roof['hardware']}, {roof['memory_gb_s']:.0f} GB/s, "
            f"context {roof['context']}, batch {roof['batch']}):"
        )
        for r in roof["categories"]:
            pct = "n/a" if r["pct_of_roofline"] is None else f"{r['pct_of_roofline']:.0f}%"
            lines.append(
                f"  {r['category']:<12} {r['time_us']:>10.1f} us for {r['bytes'] / 1e6:>10.1f} MB "
                f"(floor {r['floor_us']:.1f} us): {pct} of roofline"
            )
        lines.append(f"  {'overhead':<12} {roof['overhead_total_us']:>10.1f} us (neither gemm nor attention)")
    elif roof:
        lines.append(f"per-category roofline: {roof.get('status')}")
    lines += [f"note     {n}" for n in anatomy.get("notes") or []]
    return lines


def memory_lines(memory: dict | None) -> list[str]:
    """The model device's memory: peaks, KV growth against the model, capacity, per phase, other devices."""
    if not memory:
        return []

    def size(key: str, missing: str = "n/a") -> str:
        value = memory.get(key)
        return format_bytes(value) if isinstance(value, int | float) else missing

    capacity = memory.get("kv_tokens_capacity")
    lines = [
        "",
        f"memory   {memory['device']}: peak allocated {size('peak_allocated_bytes')}, "
        f"peak reserved {size('peak_reserved_bytes', 'none')}, device {size('device_memory_bytes', 'size unknown')}",
        f"KV       per decode step: measured {size('kv_growth_bytes_per_token')}, expected "
        f"{size('expected_kv_bytes_per_token', 'n/a (needs the model)')}; weights "
        f"{size('expected_weights_bytes', 'n/a (need the model)')}; tokens of KV that fit per sequence: "
        f"{'n/a' if capacity is None else f'{capacity:,}'}",
    ]
    for kind, phase in (memory.get("phases") or {}).items():
        peak = phase.get("peak_allocated_bytes")
        reserved = phase.get("peak_reserved_bytes")
        lines.append(
            f"         {kind:<8} peak allocated {format_bytes(peak) if peak is not None else 'n/a'}, "
            f"peak reserved {format_bytes(reserved) if reserved is not None else 'none'}"
        )
    for device in memory.get("devices") or []:
        peak = device.get("peak_allocated_bytes")
        shown = format_bytes(peak) if peak is not None else "n/a"
        lines.append(f"         also {device['device']}: peak allocated {shown}")
    lines.append(f"         {memory.get('basis', '')}")
    lines += [f"note     {n}" for n in memory.get("notes") or []]
    return lines


def _num(value: float, unit: str) -> str:
    if math.isnan(value):
        return "n/a"
    if unit == "B":
        return format_bytes(value)
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
    return plain("\n".join(lines) + "\n")


def _opt(value: float | None, unit: str) -> str:
    return "n/a" if value is None else _num(float(value), unit)


def _cost(finding: dict) -> str:
    """ " (costs 8.37 ms, 44% of the steps' time)" from the finding's cost_us and cost_pct, "" without one."""
    cost, pct = finding.get("cost_us"), finding.get("cost_pct")
    if not cost:
        return ""
    share = f", {pct:.0f}% of the steps' time" if pct is not None else ""
    return f" (costs {format_value(cost, 'us')}{share})"
