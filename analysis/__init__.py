"""Timeline -> steps, gaps, summary, findings. No Streamlit, Plotly or torch here."""

from __future__ import annotations

import numpy as np
import pandas as pd
from stepscope.analysis.activity import busy_union, derive_activity
from stepscope.analysis.findings import make_findings
from stepscope.analysis.gaps import find_gaps
from stepscope.analysis.kernel_names import short_names
from stepscope.analysis.model import Analysis, Finding, Segmentation
from stepscope.analysis.options import AnalysisOptions
from stepscope.analysis.sanity import check_analysis
from stepscope.analysis.step_finding import find_steps
from stepscope.analysis.steps import measure_steps
from stepscope.analysis.summary import inter_token_latency_ns, outlier_mask, summarize
from stepscope.parsers.timeline import GPU_KINDS, HOST_LAUNCH_KINDS, Timeline

__all__ = ["Analysis", "AnalysisOptions", "Finding", "Segmentation", "analyze"]


def analyze(timeline: Timeline, options: AnalysisOptions | None = None) -> Analysis:
    options = options or AnalysisOptions()
    bounds, segmentation = find_steps(timeline, options.step_regex)
    if "process" in bounds.attrs:  # several ranks in one file: measure the one whose steps were found
        timeline = one_process(timeline, bounds.attrs["process"])
    act = derive_activity(timeline)
    devices = np.unique(act.busy_device)
    busy_by_device = {
        int(d): busy_union(act.busy_start[act.busy_device == d], act.busy_end[act.busy_device == d]) for d in devices
    }
    busy_all = busy_union(act.busy_start, act.busy_end)
    steps, work_step = measure_steps(bounds, act, busy_all)
    itl = inter_token_latency_ns(steps)
    outliers = outlier_mask(steps, itl, options.outlier_factor)
    gaps = find_gaps(act, busy_by_device, steps, options.gap_threshold_ns)
    summary = summarize(steps, act, busy_all, itl, outliers)
    findings = make_findings(steps, gaps, summary, outliers, options)
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
    )
    if options.anatomy:
        from stepscope.analysis.anatomy import with_anatomy  # imports analysis.model, like this module

        result = with_anatomy(timeline, result, rules=options.category_rules)
    return check_analysis(result)


def one_process(timeline: Timeline, pid: int) -> Timeline:
    """The host events of one process and the device work on the devices it launched on."""
    ev = timeline.events
    host = ev["pid"].to_numpy() == pid
    gpu = ev["kind"].isin(GPU_KINDS).to_numpy()
    own_corr = ev["correlation"].to_numpy()[host & ev["kind"].isin(HOST_LAUNCH_KINDS).to_numpy()]
    launched = gpu & np.isin(ev["correlation"].to_numpy(), own_corr[own_corr >= 0])
    devices = np.unique(ev["device"].to_numpy()[launched])
    keep = host | (gpu & np.isin(ev["device"].to_numpy(), devices))
    return Timeline(events=ev[keep], meta=timeline.meta)


def _top_kernels(act, steps: pd.DataFrame, work_step: np.ndarray, top: int = 10) -> pd.DataFrame:
    """The heaviest kernels of each phase, with their share of that phase's kernel time."""
    kernel = act.work_is_kernel
    phase = np.full(len(work_step), "outside steps", dtype=object)
    placed = work_step >= 0
    if len(steps):
        phase[placed] = steps["kind"].to_numpy()[work_step[placed]]
    frame = pd.DataFrame(
        {
            "phase": phase[kernel],
            "name": np.asarray(act.work_name)[kernel],
            "dur": (act.work_end - act.work_start)[kernel],
        }
    )
    if frame.empty:
        return pd.DataFrame(columns=["phase", "short", "name", "count", "total_ns", "share_pct"])
    grouped = frame.groupby(["phase", "name"], observed=True, sort=False)["dur"].agg(["count", "sum"]).reset_index()
    grouped = grouped.rename(columns={"sum": "total_ns"})
    grouped["share_pct"] = 100.0 * grouped["total_ns"] / grouped.groupby("phase")["total_ns"].transform("sum")
    grouped = grouped.sort_values(["phase", "total_ns"], ascending=[True, False])
    grouped = grouped.groupby("phase", sort=False).head(top).reset_index(drop=True)
    grouped.insert(1, "short", short_names(grouped["name"].astype(str)).astype(str))  # readable, <= 80 chars
    return grouped
