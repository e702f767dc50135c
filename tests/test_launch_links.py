"""Issue 43: follow a launch to its kernels and a kernel to its launch, by the trace's own correlation ids
(analysis/launch_links.py), through the API (launch_of, kernels_of, gpu_lead) and the Perfetto export's flows.
SYNTHETIC graph traces built here state the right answer; the real traces' answers are checked against the
events' own correlation column."""

from __future__ import annotations

import numpy as np
import pytest

import stepscope
import tests.synthetic_traces as st
from stepscope.analysis.launch_links import cover_line, launch_link
from stepscope.exporters.perfetto_trace import perfetto_trace_bytes

REAL = "tests/data/real"


@pytest.fixture(scope="module")
def graph_trace(tmp_path_factory):
    path = st.write(tmp_path_factory.mktemp("graph") / "synthetic_graph.json", st.graph_generation())
    return stepscope.load(path)


def _row(trace, name: str, nth: int = 0) -> int:
    found = trace.find(name, case_sensitive=True)
    return int(found["row"].iloc[nth])


def test_a_graph_launch_covers_its_kernels(graph_trace) -> None:
    row = _row(graph_trace, "cudaGraphLaunch", 1)
    kernels = graph_trace.kernels_of(row)
    attrs = kernels.attrs
    assert attrs["graph"] and attrs["count"] == 30 == len(kernels)
    assert attrs["span_us"] == pytest.approx(30 * 20.0) and attrs["busy_us"] == pytest.approx(600.0)
    assert attrs["latency_us"] == pytest.approx(50.0)
    assert set(kernels["name"]) == {"graph_kernel_0", "graph_kernel_1", "graph_kernel_2"}
    # the graph of step 1, not step 0's or 2's: its kernels start after its own call
    assert kernels["start_ms"].min() > attrs["call_start_ms"]
    launch = launch_link(graph_trace.timeline, row)
    assert cover_line(launch) == "covers 30 kernels, 600 us"


def test_a_kernel_links_back_to_its_launch(graph_trace) -> None:
    row = _row(graph_trace, "cudaGraphLaunch", 2)
    some_kernel = int(graph_trace.kernels_of(row)["row"].iloc[17])
    link = graph_trace.launch_of(some_kernel)
    assert link["call_row"] == row and link["call_name"] == "cudaGraphLaunch"
    assert link["latency_us"] == pytest.approx(50.0)
    copy = _row(graph_trace, "Memcpy DtoH", 0)
    back = graph_trace.launch_of(copy)
    assert back["call_name"] == "cudaMemcpyAsync" and back["count"] == 1 and not back["graph"]
    assert back["latency_us"] == pytest.approx(2.0)


def test_events_without_a_link_say_so(graph_trace) -> None:
    assert graph_trace.launch_of(_row(graph_trace, "prepare_inputs")) is None  # a host op launches nothing itself
    assert graph_trace.kernels_of(_row(graph_trace, "prepare_inputs")).empty
    with pytest.raises(ValueError, match="no event"):
        graph_trace.launch_of(10**9)


def test_the_gpu_lead_names_the_host_span_before_the_first_kernel(graph_trace) -> None:
    lead = graph_trace.gpu_lead(2)
    assert lead["lead_us"] == pytest.approx(300.0 + 50.0)  # host prepare, then the launch latency
    assert lead["first_name"] == "graph_kernel_0"
    assert lead["launch"]["call_name"] == "cudaGraphLaunch" and lead["launch"]["count"] == 30
    assert lead["host_name"] == "prepare_inputs" and lead["host_dur_us"] == pytest.approx(300.0)
    with pytest.raises(ValueError, match="no step"):
        graph_trace.gpu_lead(99)


def test_the_perfetto_export_draws_the_same_links(graph_trace) -> None:
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace

    trace = Trace.FromString(perfetto_trace_bytes(graph_trace.timeline, graph_trace.analysis))
    starts = [list(p.track_event.flow_ids) for p in trace.packet if p.HasField("track_event")]
    ends = [i for p in trace.packet if p.HasField("track_event") for i in p.track_event.terminating_flow_ids]
    rows = graph_trace.kernels_of(_row(graph_trace, "cudaGraphLaunch", 0))["row"].to_numpy()
    assert sorted(rows + 1) in [sorted(s) for s in starts]  # the launch starts one flow per kernel it replays
    assert set(rows + 1) <= set(ends) and len(ends) == len(set(ends))  # each kernel ends its own, once


@pytest.mark.parametrize(
    "name",
    [
        "tracelens_vllm_gptoss_decode_fullgraph_rocm.json.gz",
        "hta_training_cudagraph_a100.json.gz",
        "kineto_tiny_sync_h100.json",
        "tracelens_hf_qwen1.5-0.5b_forward_h100.json.gz",
    ],
)
def test_real_traces_links_agree_with_their_correlation_column(name) -> None:
    trace = stepscope.load(f"{REAL}/{name}")
    ev = trace.timeline.events
    kind = ev["kind"].astype(str).to_numpy()
    corr = ev["correlation"].to_numpy()
    calls = np.flatnonzero(np.isin(kind, ("runtime", "driver")) & (corr >= 0))
    gpu = np.isin(kind, ("kernel", "memcpy", "memset"))
    checked = 0
    for row in calls[:: max(1, len(calls) // 40)]:
        work = trace.kernels_of(int(row))
        expected = np.flatnonzero(gpu & (corr == corr[row]))
        if (corr[calls] == corr[row]).sum() == 1:  # a unique id: every event with it is this call's
            assert sorted(work["row"]) == expected.tolist()
            checked += 1
        for r in work["row"].head(3):
            assert trace.launch_of(int(r))["call_row"] == row
            assert trace.launch_of(int(r))["latency_us"] >= 0
    assert checked


def test_a_real_graph_launch_replays_its_graph() -> None:
    trace = stepscope.load(f"{REAL}/tracelens_vllm_gptoss_decode_fullgraph_rocm.json.gz")
    work = trace.kernels_of(_row(trace, "hipGraphLaunch"))
    ev = trace.timeline.events
    corr = int(ev["correlation"].iat[int(work["row"].iloc[0])])
    on_gpu = ev["kind"].astype(str).isin(["kernel", "memcpy", "memset"]).to_numpy()
    assert work.attrs["graph"] and len(work) == int((on_gpu & (ev["correlation"].to_numpy() == corr)).sum()) > 100
    assert work.attrs["span_us"] > 1000
    lead = trace.gpu_lead(0)
    assert lead["lead_us"] == pytest.approx(trace.steps["gpu_lead_ns"].iloc[0] / 1e3)
    assert lead["first_start_ms"] == pytest.approx(lead["launch"]["start_ms"])
