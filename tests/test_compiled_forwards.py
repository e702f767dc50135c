"""Fully compiled forwards, found from their compiled regions: on a SYNTHETIC GPU trace built here (the real CPU
capture is in tests/test_captures.py). Each forward is one `Torch-Compiled Region` call launching its kernels, the
generate loop's glue between forwards launches more kernels than a forward does (so no span holds most of the
work), and the host takes each token with a device-to-host copy and a sync."""

from __future__ import annotations

import pytest

from stepscope.analysis import analyze
from stepscope.parsers import load_trace
from tests.synthetic_traces import cpu_op, kernel, launch, memcpy_d2h, write

FORWARDS = 6
REGION_KERNELS = 3
GLUE_KERNELS = 5


def _synthetic_compiled(graph_breaks: int = 1) -> tuple[list[dict], list[tuple[float, float]]]:
    """SYNTHETIC: the events, and each forward's (start, end) in us as laid out."""
    events, truth = [], []
    t, corr = 1000.0, 1
    for _ in range(FORWARDS):
        start = t
        for piece in range(graph_breaks):
            region_start = t
            t += 2.0
            for _ in range(REGION_KERNELS):
                events.append(launch(t, 3.0, corr))
                events.append(kernel("triton_poi_fused_add_mul_0", t + 3.0, 6.0, corr))
                t, corr = t + 4.0, corr + 1
            events.append(cpu_op(f"Torch-Compiled Region: 0/{piece}", region_start, t - region_start))
            t += 1.0
        truth.append((start, t))
        for k in range(GLUE_KERNELS):  # logits processing and stopping criteria on the device
            events.append(cpu_op(f"aten::glue_{k}", t, 5.0))
            events.append(launch(t + 1.0, 3.0, corr))
            events.append(kernel("vectorized_elementwise_kernel", t + 4.0, 2.0, corr))
            t, corr = t + 6.0, corr + 1
        events.append(cpu_op("aten::argmax", t, 4.0))
        events.append(launch(t + 4.0, 2.0, corr, name="cudaMemcpyAsync"))
        events.append(memcpy_d2h(t + 6.0, 1.0, corr))
        events.append(launch(t + 7.0, 2.0, corr + 10_000, name="cudaStreamSynchronize"))
        t, corr = t + 30.0, corr + 1
    return events, truth


@pytest.mark.parametrize("graph_breaks", [1, 2])
def test_compiled_gpu_forwards_are_found_without_an_embedding(tmp_path, graph_breaks):
    events, truth = _synthetic_compiled(graph_breaks)
    result = analyze(load_trace(write(tmp_path / "synthetic_compiled.json", events)))
    steps = result.steps
    assert result.segmentation.method == "compiled-regions"
    assert steps["kind"].tolist() == ["prefill"] + ["decode"] * (FORWARDS - 1)
    for (start, end), s, e in zip(truth, steps["start_ns"], steps["end_ns"], strict=True):
        assert s <= (start + end) / 2 * 1000 < e
    assert (steps["kernels"] >= graph_breaks * REGION_KERNELS).all()
    assert f"{graph_breaks} at most per forward" in result.segmentation.evidence[0]
