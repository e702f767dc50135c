"""The analyze command's readable form: the same numbers as --json, laid out for a terminal.

Every metric of the registry (analysis.metrics), one line each, read from the JSON contract's summary. Text from the
trace (names, devices, warnings) goes through safe_text.plain: a right-to-left override in a device name cannot turn
the rest of a terminal line around, and a file name that is not UTF-8 cannot fail the write."""

from __future__ import annotations

from stepscope.analysis.metrics import METRICS, card_text, format_bytes, format_value
from stepscope.analysis.number_format import MISSING, format_count
from stepscope.analysis.report import saving_text
from .safe_text import plain

STEP_HEADS = ("span", "kernels", "launches", "busy", "idle", "lead", "tail")


def shown_metric(m, on_gpu: bool, has_memory: bool) -> bool:
    """Whether a registry metric is worth a line: no launch figures on a CPU trace (it launches nothing), no memory
    figures without memory events."""
    if not on_gpu and m.key.startswith("launches_"):
        return False
    return has_memory or m.field != "memory"


def render_text(report: dict) -> str:
    seg = report["segmentation"]
    lines = [
        f"format   {report['format']}",
        f"device   {report['device'] or ('GPU not named in the trace' if report.get('on_gpu', True) else 'CPU')}",
        f"events   {format_count(report['events'])}",
        f"steps    found by {seg['method']} (confidence {seg['confidence']:.2f}), "
        f"{_requests(report['requests'])} request(s), {len(report['steps'])} step(s)",
    ]
    lines += [f"warning  {w}" for w in seg["warnings"]]
    lines += composition_lines(report)
    summary = report["summary"]
    lines.append("")
    on_gpu = report.get("on_gpu", True)
    shown = [m for m in METRICS if shown_metric(m, on_gpu, summary.get("memory") is not None)]
    width = max(len(m.label_for(on_gpu)) for m in shown) + 2
    lines += [f"{m.label_for(on_gpu):<{width}}{card_text(m, summary)}" for m in shown]  # "unknown", ranges
    if report["steps"]:
        lines += ["", f"{'step':>5} {'kind':<8} {'req':>3} {'idx':>4} " + " ".join(f"{h:>10}" for h in STEP_HEADS)]
        for i, st in enumerate(report["steps"][:40]):
            cells = (
                format_value(st["end_us"] - st["start_us"], "us"),
                format_count(st["kernels"]),
                format_count(st["launches"]),
                *(
                    format_value(st.get(k, 0), "us")
                    for k in ("gpu_busy_us", "gpu_idle_us", "gpu_lead_us", "gpu_tail_us")
                ),
            )
            request = "?" if st["request"] is None else st["request"]
            lines.append(f"{i:>5} {st['kind']:<8} {request:>3} {st['index']:>4} " + " ".join(f"{c:>10}" for c in cells))
        if len(report["steps"]) > 40:
            lines.append(f"  ... {len(report['steps']) - 40} more (use --json for all)")
    lines += request_lines(report)
    anatomy = summary.get("anatomy")
    if anatomy:
        lines += anatomy_lines(anatomy)
    lines += memory_lines(summary.get("memory"))
    lines += window_lines(report.get("window"))
    if report["findings"]:
        lines.append("")
        lines += [f"[{f['severity']}] {f['title']}: {f['detail']}{_cost(f)}" for f in report["findings"]]
    return plain("\n".join(lines) + "\n")  # a name's bidi controls and undecodable bytes printed as escapes


def _requests(count) -> str:
    return "unknown" if count is None else str(count)


REQUEST_HEADS = ("arrival", "queue", "TTFT", "ITL p50", "e2e", "prompt", "output")


def request_lines(report: dict, limit: int = 20) -> list[str]:
    """A short table of the requests (issue 38) when the trace holds more than one or says when one arrived: its steps,
    queueing, TTFT (from its arrival, or `*` from its first step), ITL and end to end; `-` where the trace does not
    say."""
    rows = report.get("request_list") or []
    if len(rows) < 2 and not any(r.get("arrival_us") is not None for r in rows):
        return []
    first = min((r["arrival_us"] for r in rows if r.get("arrival_us") is not None), default=None)
    lines = ["", f"{'req':>4} {'steps':>9} " + " ".join(f"{h:>9}" for h in REQUEST_HEADS)]
    for r in rows[:limit]:
        steps = f"{r['first_step']}-{r['last_step'] if r['last_step'] is not None else '?'}"
        if r["first_step"] is None:
            steps = "queued"
        ttft = _ms(r["ttft_ms"]) + ("*" if r.get("ttft_from") == "first_step" else "")
        cells = (
            _ms(r["arrival_us"] / 1000 - first / 1000)
            if r.get("arrival_us") is not None and first is not None
            else MISSING,
            _ms(r["queue_ms"]),
            ttft,
            _ms((r.get("itl_ms") or {}).get("p50")),
            _ms(r["e2e_ms"]),
            MISSING if r["prompt_tokens"] is None else str(r["prompt_tokens"]),
            MISSING if r["output_tokens"] is None else str(r["output_tokens"]),
        )
        lines.append(f"{r['request']:>4} {steps:>9} " + " ".join(f"{c:>9}" for c in cells))
    if len(rows) > limit:
        lines.append(f"  ... {len(rows) - limit} more (use --json for all)")
    return lines


def _ms(value) -> str:
    return MISSING if value is None else format_value(value, "ms")


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
        span = f"{format_value(r['min'], 'ms')} to {format_value(r['max'], 'ms')}"
        parts.append(f"ITL per emitted token {span} (acceptance unknown)")
    elif spec and spec.get("itl_ms_per_token"):
        parts.append(f"ITL per emitted token {format_value(spec['itl_ms_per_token']['p50'], 'ms')}")
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
    lines.append(f"{'category':<15}{unit:>9}{'time':>12}{'share':>8}")
    for name, c in sorted(cats.items(), key=lambda kv: -kv[1]["time_us"]):
        share = format_value(100 * c["time_us"] / total, "%")
        lines.append(f"{name:<15}{format_count(c['kernels']):>9}{format_value(c['time_us'], 'us'):>12}{share:>8}")
    layers = anatomy.get("layers")
    if layers:
        lu = anatomy.get("layer_us") or {}

        def us(value) -> str:
            return format_value(value or 0, "us")

        lines.append(
            f"layers   {layers} x {anatomy.get('kernels_per_layer')} {unit}; per layer p50 {us(lu.get('p50'))} "
            f"(min {us(lu.get('min'))}, max {us(lu.get('max'))}, first {us(lu.get('first'))}, "
            f"last {us(lu.get('last'))}); head {us(anatomy.get('head_us'))}, tail {us(anatomy.get('tail_us'))}"
        )
    else:
        lines.append("layers   not counted")
    lines.append(f"         {anatomy.get('evidence', '')}")
    roof = anatomy.get("roofline") or {}
    if roof.get("status") == "ok":
        lines.append(
            f"per-category roofline ({roof['model']} on {roof['hardware']}, "
            f"{format_value(roof['memory_gb_s'], 'GB/s')}, context {roof['context']}, batch {roof['batch']}):"
        )
        for r in roof["categories"]:
            lines.append(
                f"  {r['category']:<12} {format_value(r['time_us'], 'us'):>10} for {format_value(r['bytes'], 'B'):>10} "
                f"(floor {format_value(r['floor_us'], 'us')}): {format_value(r['pct_of_roofline'], '%')} of roofline"
            )
        lines.append(
            f"  {'overhead':<12} {format_value(roof['overhead_total_us'], 'us'):>10} (neither gemm nor attention)"
        )
    elif roof:
        lines.append(f"per-category roofline: {roof.get('status')}")
    lines += [f"note     {n}" for n in anatomy.get("notes") or []]
    return lines


WINDOW_ROWS = 20  # kernels listed for a window (--json has them all)


def window_lines(window: dict | None) -> list[str]:
    """`analyze --window A:B`: the window's wall, busy and idle time and its heaviest kernels."""
    if not window:
        return []
    unit = window.get("unit") or "kernels"
    kernels = window.get("kernels") or []
    lines = [
        "",
        f"window   {window['start_ms']:g} to {window['end_ms']:g} ms: wall {format_value(window['wall_us'], 'us')}, "
        f"busy {format_value(window['busy_us'], 'us')}, idle {format_value(window['idle_us'], 'us')}, "
        f"{format_count(sum(k['count'] for k in kernels))} {unit}",
        f"{'count':>9}{'time':>12}{'share':>8}  name",
    ]
    for k in kernels[:WINDOW_ROWS]:
        time, share = format_value(k["total_us"], "us"), format_value(k["share_pct"], "%")
        lines.append(f"{format_count(k['count']):>9}{time:>12}{share:>8}  {k['short_name']}")
    if len(kernels) > WINDOW_ROWS:
        lines.append(f"  ... {len(kernels) - WINDOW_ROWS} more (use --json for all)")
    return lines


def memory_lines(memory: dict | None) -> list[str]:
    """The model device's memory: peaks, KV growth against the model, capacity, per phase, other devices."""
    if not memory:
        return []

    def size(key: str, missing: str = MISSING) -> str:
        value = memory.get(key)
        return format_bytes(value) if isinstance(value, int | float) else missing

    capacity = memory.get("kv_tokens_capacity")
    lines = [
        "",
        f"memory   {memory['device']}: peak allocated {size('peak_allocated_bytes')}, "
        f"peak reserved {size('peak_reserved_bytes', '— (no reserve)')}, device "
        f"{size('device_memory_bytes', '— (size unknown)')}",
        f"KV       per decode step: measured {size('kv_growth_bytes_per_token')}, expected "
        f"{size('expected_kv_bytes_per_token', '— (needs the model)')}; weights "
        f"{size('expected_weights_bytes', '— (needs the model)')}; tokens of KV that fit per sequence: "
        f"{format_count(capacity)}",
    ]
    for kind, phase in (memory.get("phases") or {}).items():
        peak = phase.get("peak_allocated_bytes")
        reserved = phase.get("peak_reserved_bytes")
        lines.append(
            f"         {kind:<8} peak allocated {format_bytes(peak) if peak is not None else MISSING}, "
            f"peak reserved {format_bytes(reserved) if reserved is not None else MISSING}"
        )
    for device in memory.get("devices") or []:
        peak = device.get("peak_allocated_bytes")
        shown = format_bytes(peak) if peak is not None else MISSING
        lines.append(f"         also {device['device']}: peak allocated {shown}")
    lines.append(f"         {memory.get('basis', '')}")
    lines += [f"note     {n}" for n in memory.get("notes") or []]
    return lines


def render_ranks_text(report: dict) -> str:
    """The readable form of a multi-rank run: one line per rank, the cross-rank figures, warnings, findings."""
    run = report["run"]
    lines = [
        f"run      {run['ranks']} rank(s), {run['aligned_steps']} aligned step(s) (by {run.get('alignment', '?')})",
        *_collective_lines(run),
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
        f"{'slowest rank':<26}{MISSING if run.get('slowest_rank') is None else run['slowest_rank']}",
    ]
    lines += [f"warning  {w}" for w in run.get("warnings", [])]
    if run.get("findings"):
        lines.append("")
        lines += [f"[{f['severity']}] {f['title']}: {f['detail']}" for f in run["findings"]]
    return plain("\n".join(lines) + "\n")


def _collective_lines(run: dict) -> list[str]:
    """The clock (on one host: as the collectives' ends checked it) and, per collective kind, the arrival skew and
    transfer (analysis/rank_collectives.py)."""
    collectives = run.get("collectives") or {}
    checked = collectives.get("clock_note") if run.get("same_clock") or collectives.get("clock_checked") else None
    lines = [f"clock    {checked or run.get('clock_note', '')}"]
    for k in collectives.get("by_kind", []):
        skew, transfer = k["arrival_skew_us"], k["transfer_us"]
        lines.append(
            f"{k['kind']:<14}{k['count']:>6} matched: arrival skew p50 {_opt(skew['p50'], 'us')}, "
            f"p90 {_opt(skew['p90'], 'us')}; transfer p50 {_opt(transfer['p50'], 'us')}"
        )
    return lines


def _opt(value: float | None, unit: str) -> str:
    return format_value(value, unit)


def _cost(finding: dict) -> str:
    """ " (could save up to 8.37 ms (44% of the steps' time))", "" for a finding with nothing to win."""
    text = saving_text(finding)
    return f" ({text})" if text else ""
