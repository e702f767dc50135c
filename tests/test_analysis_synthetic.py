"""Exact answers on SYNTHETIC traces whose every number is known by construction (tests/synthetic_traces.py).

Per forward: a 2 us embedding lookup, five (4 us launch, 10 us kernel) pairs, a D2H copy of the token
(2 us launch + 1 us copy, with a stream sync), then 30 us of host work: a 105 us period per token,
51 us of it GPU busy.
"""

from __future__ import annotations

import pytest

from stepscope.analysis import AnalysisOptions, analyze
from stepscope.parsers import parse_trace_bytes
from tests.synthetic_traces import doc, synthetic_generation


def _analyze(events, **options):
    import json

    return analyze(parse_trace_bytes(json.dumps(doc(events)).encode()), AnalysisOptions(**options))


def test_steps_kernels_launches_busy_and_idle():
    result = _analyze(synthetic_generation(decode_steps=6))
    steps = result.steps
    assert result.segmentation.method == "embedding-lookup"
    assert list(steps["kind"]) == ["prefill"] + ["decode"] * 6
    assert list(steps["tokens"]) == [16] + [1] * 6
    assert (steps["kernels"] == 5).all()
    assert (steps["launches"] == 6).all()  # five kernel launches and one memcpyAsync
    assert (steps["d2h_copies"] == 1).all() and (steps["syncs"] == 1).all()
    assert (steps["gpu_busy_ns"] == 51_000).all()
    # every step but the last spans start to next start (105 us); the last ends with its token
    spans = (steps["end_ns"] - steps["start_ns"]).tolist()
    assert spans == [105_000] * 6 + [75_000]
    # busy + idle = span for every step, the prefill's 6 us before the trace's first kernel included
    # (DESIGN.md, 2026-12-01: that time used to be counted as neither)
    assert steps["gpu_idle_ns"].tolist() == [54_000] * 6 + [24_000]
    assert ((steps["gpu_busy_ns"] + steps["gpu_idle_ns"]) == (steps["end_ns"] - steps["start_ns"])).all()
    # lead: 2 us embedding lookup, then the 4 us launch call before the first kernel runs; tail: the 30 us of
    # host work after the token's copy (the last step ends with its token)
    assert steps["gpu_lead_ns"].tolist() == [6_000] * 7
    assert steps["lead_host_ns"].tolist() == [2_000] * 7
    assert steps["gpu_tail_ns"].tolist() == [30_000] * 6 + [0]
    assert steps["launch_host_ns"].tolist() == [22_000] * 7


def test_summary_ttft_itl_and_rates():
    s = _analyze(synthetic_generation(decode_steps=6)).summary
    assert s.prefill_steps == 1 and s.decode_steps == 6
    assert s.ttft_ms == pytest.approx(0.075)
    assert s.itl_ms == pytest.approx({"p50": 0.105, "p90": 0.105, "p99": 0.105, "mean": 0.105, "max": 0.105})
    assert s.decode_tokens_per_s == pytest.approx(1 / 105e-6)
    assert s.kernels_per_decode_step == 5 and s.launches_per_decode_step == 6
    assert s.gpu_idle_per_decode_step_us == pytest.approx(54.0)
    assert s.gpu_busy_pct == pytest.approx(100 * 7 * 51 / (6 * 105 + 75))  # over the steps' whole span


def test_gaps_are_placed_and_caused():
    result = _analyze(synthetic_generation(decode_steps=3))
    gaps = result.gaps
    # inside a step, 4 us waits for each next kernel's launch (host-bound)
    assert set(gaps.loc[gaps["dur_ns"] == 4_000, "cause"]) == {"launch"}
    # after the token's D2H copy and stream sync the GPU waits 30 us of host work + the next launch
    assert set(gaps.loc[gaps["dur_ns"] == 36_000, "cause"]) == {"sync"}
    assert (gaps["placement"] == "within step").all()
    # all idle time of the steps, less the 6 us before the first kernel (not a gap: nothing before it)
    assert gaps["dur_ns"].sum() == 3 * 54_000 + 24_000 - 6_000


def test_gap_threshold_hides_short_gaps():
    result = _analyze(synthetic_generation(decode_steps=3), gap_threshold_ns=5_000)
    assert (result.gaps["dur_ns"] >= 5_000).all() and len(result.gaps) > 0


def test_findings_name_host_bound_decode_sync_and_launch_overhead():
    result = _analyze(synthetic_generation(decode_steps=6))
    ids = {f.id: f for f in result.findings}
    assert {"host-bound-decode", "sync-every-step", "launch-overhead", "decode-dominated"} <= set(ids)
    host = ids["host-bound-decode"]
    assert host.evidence["idle_share"] == pytest.approx(54 / 105)
    assert "51%" in host.title
    launch = ids["launch-overhead"]
    assert launch.evidence["launches"] == 6


def test_markers_give_the_same_steps_as_inference():
    with_markers = _analyze(synthetic_generation(decode_steps=5, with_markers=True))
    inferred = _analyze(synthetic_generation(decode_steps=5, with_markers=False))
    assert with_markers.segmentation.method == "stepscope-markers"
    cols = ["kind", "start_ns", "end_ns", "kernels", "launches", "gpu_busy_ns"]
    assert with_markers.steps[cols].equals(inferred.steps[cols])


def test_two_generate_calls_are_two_requests():
    first = synthetic_generation(decode_steps=3)
    second = synthetic_generation(decode_steps=2)
    shift = 10_000.0
    for e in second:
        e["ts"] += shift
        if "correlation" in e.get("args", {}):
            e["args"]["correlation"] += 1000
    result = _analyze(first + second)
    steps = result.steps
    assert steps["request"].tolist() == [0] * 4 + [1] * 3
    assert steps["kind"].tolist() == ["prefill", "decode", "decode", "decode", "prefill", "decode", "decode"]
    assert result.summary.ttft_ms_by_request == {0: pytest.approx(0.075), 1: pytest.approx(0.075)}
    assert result.summary.itl_ms["p50"] == pytest.approx(0.105)  # no ITL across requests


def test_first_step_outlier_is_left_out_and_said():
    events = synthetic_generation(decode_steps=8)
    # make the first decode step's host pause 2 ms (a compile or warm-up stall)
    first_decode = sorted(e["ts"] for e in events if e["name"] == "aten::embedding")[1]
    for e in events:
        if e["ts"] >= first_decode - 1:
            e["ts"] += 2000.0
    result = _analyze(events)
    assert result.summary.itl_outliers == 1
    assert result.summary.itl_ms["p99"] == pytest.approx(0.105)
    assert any(f.id == "itl-outliers" for f in result.findings)


def test_cpu_only_trace_uses_host_ops_as_kernels():
    events = []
    t = 0.0
    for index in range(4):
        seq = 8 if index == 0 else 1
        events.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::embedding",
                "pid": 1,
                "tid": 1,
                "ts": t,
                "dur": 5,
                "args": {"Input Dims": [[100, 8], [1, seq]]},
            }
        )
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": t + 10, "dur": 20})
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": t + 12, "dur": 15})
        t += 100.0
    result = _analyze(events)
    steps = result.steps
    assert steps["kind"].tolist() == ["prefill", "decode", "decode", "decode"]
    assert (steps["kernels"] == 2).all()  # embedding and addmm are leaves; linear holds addmm
    assert (steps["launches"] == 0).all()
    # busy means some op runs: the 5 us embedding and the 20 us linear (which holds the addmm)
    assert steps["gpu_busy_ns"].tolist()[:3] == [25_000] * 3
    assert result.summary.on_gpu is False
    assert any(f.id == "host-overhead" for f in result.findings)


def test_cuda_graph_replay_kernels_belong_to_the_launching_step():
    events = []
    t = 0.0
    corr = 1
    for index in range(4):
        seq = 4 if index == 0 else 1
        events.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::embedding",
                "pid": 1,
                "tid": 1,
                "ts": t,
                "dur": 2,
                "args": {"Input Dims": [[100, 8], [1, seq]]},
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaGraphLaunch",
                "pid": 1,
                "tid": 1,
                "ts": t + 3,
                "dur": 5,
                "args": {"correlation": corr},
            }
        )
        # the replayed kernels run after the host has moved on, all sharing the launch's correlation
        for k in range(10):
            events.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": f"k{k}",
                    "pid": 0,
                    "tid": 7,
                    "ts": t + 50 + 8 * k,
                    "dur": 8,
                    "args": {"device": 0, "stream": 7, "correlation": corr},
                }
            )
        corr += 1
        t += 200.0
    result = _analyze(events)
    steps = result.steps
    assert (steps["kernels"] == 10).all() and (steps["launches"] == 1).all()
    assert (steps["graph_launches"] == 1).all()
    assert (steps["gpu_busy_ns"] == 80_000).all()


def test_training_trace_has_no_steps_but_busy_figures():
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::embedding", "pid": 1, "tid": 1, "ts": 0, "dur": 2},
        {"ph": "X", "cat": "cpu_op", "name": "EmbeddingBackward0", "pid": 1, "tid": 1, "ts": 10, "dur": 2},
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k",
            "pid": 0,
            "tid": 7,
            "ts": 5,
            "dur": 10,
            "args": {"device": 0, "stream": 7, "correlation": 1},
        },
    ]
    result = _analyze(events)
    assert result.segmentation.method == "none" and result.steps.empty
    assert result.summary.gpu_busy_pct == pytest.approx(100.0)


def test_user_regex_comes_first():
    events = synthetic_generation(decode_steps=2)
    starts = sorted(e["ts"] for e in events if e["name"] == "aten::embedding")
    for i, s in enumerate(starts):
        events.append(
            {"ph": "X", "cat": "user_annotation", "name": f"my_step_{i}", "pid": 100, "tid": 100, "ts": s, "dur": 50}
        )
    result = _analyze(events, step_regex=r"^my_step_\d+$")
    assert result.segmentation.method == "user-regex"
    assert result.steps["kind"].tolist() == ["prefill", "decode", "decode"]
    assert result.segmentation.warnings


def test_repeating_kernel_sequence_is_the_last_resort():
    events = synthetic_generation(decode_steps=8, kernels_per_step=10, d2h_each_step=False)
    events = [e for e in events if e["name"] != "aten::embedding"]  # e.g. a compiled model: no host lookup
    second_forward = 1000 + 10 * 14 + 30  # every forward takes 10 x 14 us + 30 us of host work
    for e in events:  # the prefill takes 300 us longer, as more tokens would
        if e["ts"] >= second_forward:
            e["ts"] += 300.0
    result = _analyze(events)
    assert result.segmentation.method == "kernel-pattern"
    assert result.segmentation.confidence < 0.5
    steps = result.steps
    assert len(steps) == 9 and (steps["kernels"] == 10).all()
    assert steps["kind"].tolist() == ["prefill"] + ["decode"] * 8
    assert any("kernel_0" in w for w in result.segmentation.warnings)


def test_a_few_repeated_forwards_are_not_generation():
    events = synthetic_generation(decode_steps=3, kernels_per_step=10, d2h_each_step=False)
    events = [e for e in events if e["name"] != "aten::embedding"]
    assert _analyze(events).segmentation.method == "none"


def _graph_decode_trace(pieces_per_forward: int, eager_every_forward: bool, steps: int = 6) -> list[dict]:
    """SYNTHETIC: an eager prefill (host embedding) then forwards replayed as CUDA graphs.

    With eager_every_forward each forward has its own embedding and `pieces_per_forward` graph launches
    with no token handoff between them (piecewise graphs); otherwise each decode step is one graph launch
    followed by a stream sync that hands the token to the host (the collectors' cuda-graph mode)."""
    events, t, corr = [], 0.0, 1
    for index in range(steps):
        if index == 0 or eager_every_forward:
            seq = 8 if index == 0 else 1
            events.append(
                {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": "aten::embedding",
                    "pid": 1,
                    "tid": 1,
                    "ts": t,
                    "dur": 2,
                    "args": {"Input Dims": [[100, 8], [2, seq]]},
                }
            )
            t += 5
        for _ in range(pieces_per_forward if (index or eager_every_forward) else 0):
            events.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaGraphLaunch",
                    "pid": 1,
                    "tid": 1,
                    "ts": t,
                    "dur": 4,
                    "args": {"correlation": corr},
                }
            )
            events += [
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": f"k{k}",
                    "pid": 0,
                    "tid": 7,
                    "ts": t + 5 + 3 * k,
                    "dur": 3,
                    "args": {"device": 0, "stream": 7, "correlation": corr},
                }
                for k in range(4)
            ]
            corr += 1
            t += 20
        if index == 0:  # the eager prefill's own kernels
            events.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    "pid": 1,
                    "tid": 1,
                    "ts": t,
                    "dur": 4,
                    "args": {"correlation": corr},
                }
            )
            events.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": "prefill_gemm",
                    "pid": 0,
                    "tid": 7,
                    "ts": t + 5,
                    "dur": 30,
                    "args": {"device": 0, "stream": 7, "correlation": corr},
                }
            )
            corr += 1
            t += 40
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaStreamSynchronize",
                "pid": 1,
                "tid": 1,
                "ts": t,
                "dur": 3,
                "args": {"correlation": corr},
            }
        )
        corr += 1
        t += 50
    return events


def test_graph_replayed_decode_steps_without_host_embedding_are_found():
    result = _analyze(_graph_decode_trace(pieces_per_forward=1, eager_every_forward=False))
    steps = result.steps
    assert steps["kind"].tolist() == ["prefill"] + ["decode"] * 5
    assert steps["batch"].tolist() == [2] * 6 and steps["tokens"].tolist() == [16] + [2] * 5
    assert (steps["graph_launches"].iloc[1:] == 1).all() and (steps["kernels"].iloc[1:] == 4).all()
    assert any("graph" in w or "compiled" in w for w in result.segmentation.warnings)


def test_graph_pieces_inside_eager_forwards_stay_in_them():
    result = _analyze(_graph_decode_trace(pieces_per_forward=3, eager_every_forward=True))
    steps = result.steps
    assert steps["kind"].tolist() == ["prefill"] + ["decode"] * 5
    assert (steps["graph_launches"] == 3).all()


def test_a_gap_before_work_that_was_already_queued_is_not_blamed_on_the_host():
    events = [
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": 0,
            "dur": 2,
            "args": {"correlation": 1},
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": 3,
            "dur": 2,
            "args": {"correlation": 2},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "a",
            "pid": 0,
            "tid": 7,
            "ts": 10,
            "dur": 10,
            "args": {"device": 0, "stream": 7, "correlation": 1},
        },
        # queued at ts 3, yet it starts 50 us after "a" ends: the GPU waited on something other than the host
        {
            "ph": "X",
            "cat": "kernel",
            "name": "b",
            "pid": 0,
            "tid": 8,
            "ts": 70,
            "dur": 10,
            "args": {"device": 0, "stream": 8, "correlation": 2},
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": 100,
            "dur": 2,
            "args": {"correlation": 3},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "c",
            "pid": 0,
            "tid": 7,
            "ts": 105,
            "dur": 10,
            "args": {"device": 0, "stream": 7, "correlation": 3},
        },
    ]
    gaps = _analyze(events).gaps
    assert gaps[["dur_ns", "cause"]].values.tolist() == [[50_000, "other"], [25_000, "launch"]]
