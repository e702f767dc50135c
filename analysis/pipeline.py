"""analyze(): Timeline -> steps, gaps, summary, findings, anatomy, in that order."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace

import numpy as np
import pandas as pd

from stepscope.parsers.timeline import GPU_KINDS, HOST_LAUNCH_KINDS, Timeline
from .activity import busy_union, derive_activity
from .capture_figures import capture_figures, gpu_mostly_idle
from .composition import with_batch_figures
from .event_rows import isin_ints, kind_mask
from .findings import make_findings
from .gaps import find_gaps
from .host_calls import long_host_call
from .host_work import host_work
from .kernel_names import short_names
from .memory import with_memory
from .model import Analysis
from .model_proposal import propose_model
from .options import AnalysisOptions
from .request_figures import request_table, served_itl_ns, served_warnings, with_request_figures
from .sanity import check_analysis
from .serving import follow_served
from .serving.front_end import FrontEnd
from .serving_findings import serving_findings
from .step_figures import typed_batch, with_batch_source
from .step_finding import find_steps
from .steps import measure_steps
from .summary import inter_token_latency_ns, outlier_mask, summarize
from .trace_facts import trace_facts


def analyze(
    timeline: Timeline,
    options: AnalysisOptions | None = None,
    front_end: FrontEnd | None = None,
    progress: Callable[[str], None] | None = None,
) -> Analysis:
    """`front_end`: a served run's API server trace read beside this worker's (analysis.serving.front_end).
    `progress` is told each stage as it starts ("segment N", "measure", "anatomy"), so that a page or a terminal
    can say which part of a long analysis runs and how long each took (the front door's Progress)."""
    options = options or AnalysisOptions()
    notify = progress or _silent
    notify(f"segment {len(timeline.events)}")
    if not (options.anatomy and _host_only(timeline.events)):
        return _analyze(timeline, options, None, front_end, notify)
    # A CPU trace's anatomy starts with its host ops' nesting and categories, which read only the events: a
    # worker thread computes them while this one finds the steps (numpy's sorts and searches release the GIL).
    # Leaving the block waits for the worker, whatever happens; its exception, if any, is raised by result().
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="stepscope-host-work") as pool:
        host = pool.submit(host_work, timeline.events, options.category_rules)
        return _analyze(timeline, options, host, front_end, notify)


def _silent(stage: str) -> None:
    """No progress wanted."""


def _analyze(
    timeline: Timeline,
    options: AnalysisOptions,
    host: Future | None,
    front_end: FrontEnd | None,
    notify: Callable[[str], None] = _silent,
) -> Analysis:
    """analyze()'s stages in order; `host`: host_work() of the timeline's events, computing in a worker."""
    bounds, segmentation = find_steps(timeline, options.step_regex)
    bounds, segmentation, served = follow_served(bounds, segmentation, front_end)
    notify("measure")
    bounds, typed = typed_batch(bounds, options.batch)  # a batch the user typed, where the trace says none
    if "process" in bounds.attrs:  # several ranks in one file: measure the one whose steps were found
        timeline = one_process(timeline, bounds.attrs["process"])
        host = None  # it holds the ops of every process: the anatomy reads the kept process's own
    act = derive_activity(timeline)
    if len(act.busy_device) and (act.busy_device == act.busy_device[0]).all():  # a CPU trace, most GPU traces
        devices = np.unique(act.busy_device[:1])  # np.unique of the whole column, without hashing every item
        busy_by_device = {int(devices[0]): busy_union(act.busy_start, act.busy_end)}
    else:
        devices = np.unique(act.busy_device)
        busy_by_device = {
            int(d): busy_union(act.busy_start[act.busy_device == d], act.busy_end[act.busy_device == d])
            for d in devices
        }
    # one device (or a CPU trace): its busy blocks are the union over all devices, not merged a second time
    busy_all = next(iter(busy_by_device.values())) if len(devices) == 1 else busy_union(act.busy_start, act.busy_end)
    steps, work_step = measure_steps(bounds, act, busy_all)
    itl = served_itl_ns(steps, served) if served is not None else inter_token_latency_ns(steps)
    outliers = outlier_mask(steps, itl, options.outlier_factor)
    gaps = find_gaps(act, busy_by_device, steps, options.gap_threshold_ns)
    summary = summarize(steps, act, busy_all, itl, outliers)
    summary, segmentation = with_batch_figures(summary, segmentation, steps, bounds.attrs.get("request_steps"))
    summary, segmentation = with_batch_source(summary, segmentation, steps, typed)
    summary = replace(summary, capture=capture_figures(act, busy_all))
    requests = request_table(steps, summary, served)
    summary = with_request_figures(summary, requests, steps, itl, outliers, served)
    if warned := served_warnings(summary, steps, served):
        segmentation = replace(segmentation, warnings=(*segmentation.warnings, *warned))
    findings = make_findings(steps, gaps, summary, outliers, options) + long_host_call(act, busy_all, steps)
    findings += gpu_mostly_idle(summary.capture, bool(len(steps)), summary.on_gpu, act.first_ts)
    findings = with_serving(findings, serving_findings(steps, requests.rows, itl, outliers))
    steps = steps.assign(itl_ns=itl, outlier=outliers)
    result = Analysis(
        steps=steps,
        gaps=gaps,
        summary=summary,
        findings=tuple(findings),
        segmentation=segmentation,
        top_kernels=_top_kernels(act, steps, work_step),
        busy_intervals=busy_by_device,
        time_origin_ns=act.first_ts,
        facts=trace_facts(timeline),
        requests=requests,
    )
    if options.anatomy:
        from .anatomy import with_anatomy  # imports analysis.model, like this module

        notify("anatomy")
        host_ops = host.result() if host is not None else None
        result = with_anatomy(timeline, result, rules=options.category_rules, activity=act, host=host_ops)
        result = replace(result, model_proposal=propose_model(timeline, result))  # reads the anatomy's layers
    result = with_memory(timeline, result)  # per-step memory and summary.memory, when the trace has memory events
    return check_analysis(result)


def with_serving(findings: list, served: list) -> list:
    """The findings with a served run's (analysis.serving_findings); prefill-decode interference says what
    batching-cost says, per decode token and priced for the requests, so batching-cost gives way to it."""
    if any(f.id == "prefill-decode-interference" for f in served):
        findings = [f for f in findings if f.id != "batching-cost"]
    return findings + served


def _host_only(events: pd.DataFrame) -> bool:
    """Whether the events hold host ops and no kind of device work (a CPU trace), read from the kind column's
    categories without a pass over the rows; a plain column or an unused GPU kind answers False."""
    kind = events["kind"]
    if not isinstance(kind.dtype, pd.CategoricalDtype):
        return False
    kinds = set(kind.cat.categories)
    return "cpu_op" in kinds and not kinds.intersection(GPU_KINDS)


def one_process(timeline: Timeline, pid: int) -> Timeline:
    """The host events of one process and the device work on the devices it launched on."""
    ev = timeline.events
    host = ev["pid"].to_numpy() == pid
    gpu = kind_mask(ev, GPU_KINDS)
    own_corr = ev["correlation"].to_numpy()[host & kind_mask(ev, HOST_LAUNCH_KINDS)]
    launched = gpu & isin_ints(ev["correlation"].to_numpy(), own_corr[own_corr >= 0])
    devices = np.unique(ev["device"].to_numpy()[launched])
    keep = host | (gpu & np.isin(ev["device"].to_numpy(), devices))
    return Timeline(events=ev[keep], meta=timeline.meta, memory=timeline.memory)


def _top_kernels(act, steps: pd.DataFrame, work_step: np.ndarray, top: int = 10) -> pd.DataFrame:
    """The heaviest kernels of each phase, with their share of that phase's kernel time.

    Grouped on the name's categorical codes and the phase's index, not on strings: a GPU trace has a
    million kernels but a few hundred names, and turning every code into its string costs more than the rest
    of this function. Only the winners are turned into names. Order as a stable sort by (phase name, time
    descending) of the groups in order of first occurrence; names missing (code -1) are left out."""
    empty = pd.DataFrame(columns=["phase", "short", "name", "count", "total_ns", "share_pct"])
    kernel = act.work_is_kernel
    names = act.work_name  # categorical from every reader; anything else is coded here
    if not isinstance(names, pd.Categorical):
        names = pd.Categorical(np.asarray(names, dtype=object))
    code = np.asarray(names.codes)[kernel]
    if len(code) == 0:
        return empty
    labels, phase = _phases(steps, work_step)
    phase, dur = phase[kernel], (act.work_end - act.work_start)[kernel]
    named = code >= 0
    n_names = max(len(names.categories), 1)
    key = phase[named] * n_names + code[named]  # dense: phases x names, a few thousand at most
    n_keys = len(labels) * n_names
    count = np.bincount(key, minlength=n_keys).astype(np.int64)
    groups = np.flatnonzero(count)
    if len(groups) == 0:
        return empty
    total = np.zeros(n_keys, dtype=np.int64)
    np.add.at(total, key, dur[named])  # int64 sums, exact
    first = np.full(n_keys, len(key), dtype=np.int64)
    np.minimum.at(first, key, np.arange(len(key)))  # first occurrence: the order a groupby keeps
    count, total, first = count[groups], total[groups], first[groups]
    group_phase = groups // n_names
    phase_total = np.zeros(len(labels), dtype=np.int64)
    np.add.at(phase_total, group_phase, total)
    with np.errstate(invalid="ignore", divide="ignore"):  # a phase of zero-length kernels: NaN, as pandas gives
        share = 100.0 * total / phase_total[group_phase]
    order = np.lexsort((first, -total, group_phase))  # labels are sorted: phase index order is name order
    order = order[_rank_within(group_phase[order]) < top]
    category_names = np.asarray(names.categories, dtype=object)
    grouped = pd.DataFrame(
        {
            "phase": labels[group_phase[order]],
            "name": category_names[(groups % n_names)[order]],
            "count": count[order],
            "total_ns": total[order],
            "share_pct": share[order],
        }
    )
    grouped.insert(1, "short", short_names(grouped["name"].astype(str)).astype(str))  # readable, <= 80 chars
    return grouped


def _phases(steps: pd.DataFrame, work_step: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted phase names, each work item's index into them): its step's kind, else "outside steps"."""
    kinds = steps["kind"].to_numpy(dtype=object) if len(steps) else np.array([], dtype=object)
    labels = np.unique(np.append(kinds, "outside steps").astype(object))
    outside = int(np.searchsorted(labels, "outside steps"))
    step_phase = np.searchsorted(labels, kinds).astype(np.int64)
    placed = work_step >= 0
    phase = np.full(len(work_step), outside, dtype=np.int64)
    phase[placed] = step_phase[work_step[placed]]
    return labels, phase


def _rank_within(sorted_group: np.ndarray) -> np.ndarray:
    """0, 1, 2 ... within each run of equal values of a sorted array."""
    return np.arange(len(sorted_group)) - np.searchsorted(sorted_group, sorted_group, side="left")
