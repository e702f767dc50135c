"""Builders for SYNTHETIC Kineto-style traces used only by tests (never shipped as samples).

Each builder returns plain Python data shaped like torch.profiler output, so
tests can state exactly what the right answer is.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path


def kernel(name: str, ts: float, dur: float, corr: int, stream: int = 7, device: int = 0) -> dict:
    return {
        "ph": "X",
        "cat": "kernel",
        "name": name,
        "pid": device,
        "tid": stream,
        "ts": ts,
        "dur": dur,
        "args": {"device": device, "stream": stream, "correlation": corr},
    }


def launch(ts: float, dur: float, corr: int, name: str = "cudaLaunchKernel", tid: int = 100) -> dict:
    return {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": name,
        "pid": 100,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": {"correlation": corr},
    }


def cpu_op(name: str, ts: float, dur: float, dims=None, tid: int = 100) -> dict:
    args = {"External id": 1}
    if dims is not None:
        args["Input Dims"] = dims
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 100, "tid": tid, "ts": ts, "dur": dur, "args": args}


def annotation(name: str, ts: float, dur: float, tid: int = 100) -> dict:
    return {"ph": "X", "cat": "user_annotation", "name": name, "pid": 100, "tid": tid, "ts": ts, "dur": dur}


def memcpy_d2h(ts: float, dur: float, corr: int) -> dict:
    return {
        "ph": "X",
        "cat": "gpu_memcpy",
        "name": "Memcpy DtoH (Device -> Pinned)",
        "pid": 0,
        "tid": 7,
        "ts": ts,
        "dur": dur,
        "args": {"device": 0, "stream": 7, "correlation": corr},
    }


def doc(events: list[dict]) -> dict:
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "Synthetic GPU"}], "traceEvents": events}


def write(path: Path, events_or_doc: list | dict, gz: bool = False) -> Path:
    """Write a list of events wrapped in a document (or a ready document) as JSON, gzipped if asked."""
    data = json.dumps(events_or_doc if isinstance(events_or_doc, dict) else doc(events_or_doc)).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def synthetic_generation(
    decode_steps: int = 6,
    kernels_per_step: int = 5,
    kernel_us: float = 10.0,
    launch_us: float = 4.0,
    host_gap_us: float = 30.0,
    prompt_tokens: int = 16,
    with_markers: bool = False,
    d2h_each_step: bool = True,
) -> list[dict]:
    """A host-bound eager generation: per forward an aten::embedding, launches, kernels that run as
    soon as launched, a D2H copy of the next token, then host_gap_us of Python before the next forward."""
    from stepscope.contracts.markers import format_marker

    events: list[dict] = []
    t = 1000.0
    corr = 1
    for index in range(decode_steps + 1):
        seq = prompt_tokens if index == 0 else 1
        kind = "prefill" if index == 0 else "decode"
        step_start = t
        events.append(cpu_op("aten::embedding", t, 2.0, dims=[[32000, 64], [1, seq], [], [], []]))
        t += 2.0
        for k in range(kernels_per_step):
            events.append(launch(t, launch_us, corr))
            events.append(kernel(f"kernel_{k}", t + launch_us, kernel_us, corr))
            t += launch_us + kernel_us
            corr += 1
        if d2h_each_step:
            events.append(launch(t, 2.0, corr, name="cudaMemcpyAsync"))
            events.append(memcpy_d2h(t + 2.0, 1.0, corr))
            events.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaStreamSynchronize",
                    "pid": 100,
                    "tid": 100,
                    "ts": t + 2.0,
                    "dur": 1.5,
                    "args": {"correlation": corr + 100000},
                }
            )
            corr += 1
            t += 3.0
        if with_markers:
            events.append(annotation(format_marker(kind, 0, index, seq, 1), step_start, t - step_start))
        t += host_gap_us
    return events


def many_tiny_requests(requests: int = 3000, decode_steps: int = 1) -> list[dict]:
    """SYNTHETIC: `requests` one-token-prompt requests back to back, each a prefill and `decode_steps` decode
    forwards with Stepscope markers and one kernel per forward (the shape that made analysis quadratic)."""
    from stepscope.contracts.markers import format_marker

    events: list[dict] = []
    t, corr = 1000.0, 1
    for request in range(requests):
        for index in range(decode_steps + 1):
            kind = "prefill" if index == 0 else "decode"
            events.append(annotation(format_marker(kind, request, index, 1, 1), t, 8.0))
            events.append(launch(t + 1.0, 2.0, corr))
            events.append(kernel("k", t + 3.0, 4.0, corr))
            corr += 1
            t += 10.0
        t += 5.0
    return events


def graph_generation(
    steps: int = 4, kernels: int = 30, kernel_us: float = 20.0, latency_us: float = 50.0, prepare_us: float = 300.0
) -> list[dict]:
    """SYNTHETIC CUDA-graph decode (issue 43): per step (marked) a host `prepare_inputs` op of prepare_us, then one
    cudaGraphLaunch whose `kernels` kernels (all with the launch's correlation id, as CUPTI writes a graph's) start
    latency_us after the call and run back to back; a D2H copy of the token ends the step."""
    from stepscope.contracts.markers import format_marker

    events: list[dict] = []
    t, corr = 1000.0, 1
    for index in range(steps):
        start = t
        events.append(cpu_op("prepare_inputs", t, prepare_us))
        t += prepare_us
        events.append(launch(t, 10.0, corr, name="cudaGraphLaunch"))
        k0 = t + latency_us
        for k in range(kernels):
            events.append(kernel(f"graph_kernel_{k % 3}", k0 + k * kernel_us, kernel_us, corr))
        corr += 1
        t = k0 + kernels * kernel_us
        events.append(launch(t, 2.0, corr, name="cudaMemcpyAsync"))
        events.append(memcpy_d2h(t + 2.0, 1.0, corr))
        corr += 1
        t += 3.0
        kind = "prefill" if index == 0 else "decode"
        events.append(annotation(format_marker(kind, 0, index, 16 if index == 0 else 1, 1), start, t - start))
        t += 20.0
    return events
