"""SYNTHETIC Kineto traces shaped like the collectors' GPU captures, used only by tests (never shipped).

What they reproduce of a torch.profiler CUDA trace of a generation (the shape bench/gpu_capture.py
will bring back from a GPU): per forward a host ``stepscope.*`` marker and its ``gpu_user_annotation``
copy on the GPU timeline (the same name: a checker must count the host one only); eager forwards launch
every kernel from a cpu_op, through cudaLaunchKernel or one of its variants (cudaLaunchKernelExC,
cuLaunchKernel), each launch tied to its kernel by a correlation id and an ac2g flow pair; a
cuda-graph decode step is one cudaGraphLaunch whose kernels all share its correlation, one flow end
each; after each forward the token's copy to the host (cudaMemcpyAsync + a memcpy, not a kernel
launch). Metadata and instant events sit among them. ``early_kernels`` puts kernels before the
first host op, as a CUPTI start-up or clock problem would.

``gpu_capture`` returns the events and a ``Truth`` counted while laying them out, not read back.
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.synthetic_traces import annotation, cpu_op, kernel, launch, memcpy_d2h

LAUNCH_NAMES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel")


@dataclass
class Truth:
    kernels: int = 0
    graph_launches: int = 0
    launch_calls: int = 0
    prefill_markers: int = 0
    decode_markers: int = 0
    kernels_before_host: int = 0


def _flow(phase: str, corr: int, ts: float, on_gpu: bool) -> dict:
    event = {
        "ph": phase,
        "id": corr,
        "pid": 0 if on_gpu else 100,
        "tid": 7 if on_gpu else 100,
        "ts": ts,
        "cat": "ac2g",
        "name": "ac2g",
    }
    if phase == "f":
        event["bp"] = "e"
    return event


def _gpu_annotation(name: str, ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": "gpu_user_annotation", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur}


class _Layout:
    def __init__(self) -> None:
        self.events: list[dict] = [
            {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}},
            {"ph": "M", "name": "thread_name", "pid": 100, "tid": 100, "args": {"name": "python"}},
        ]
        self.truth = Truth()
        self.t = 1000.0
        self.corr = 1

    def eager_kernels(self, count: int) -> None:
        for k in range(count):
            name = LAUNCH_NAMES[k % len(LAUNCH_NAMES)]
            self.events.append(cpu_op("aten::mm", self.t, 6.0))
            self.events.append(launch(self.t + 1.0, 3.0, self.corr, name=name))
            self.events.append(_flow("s", self.corr, self.t + 1.0, on_gpu=False))
            self.events.append(kernel(f"gemm_{k}", self.t + 4.0, 5.0, self.corr))
            self.events.append(_flow("f", self.corr, self.t + 4.0, on_gpu=True))
            self.truth.kernels += 1
            self.truth.launch_calls += 1
            self.corr += 1
            self.t += 10.0

    def graph_replay(self, kernels: int) -> None:
        self.events.append(launch(self.t, 5.0, self.corr, name="cudaGraphLaunch"))
        self.events.append(_flow("s", self.corr, self.t, on_gpu=False))
        for k in range(kernels):
            ts = self.t + 6.0 + 4.0 * k
            self.events.append(kernel(f"graph_kernel_{k}", ts, 3.0, self.corr))
            self.events.append(_flow("f", self.corr, ts, on_gpu=True))
        self.truth.kernels += kernels
        self.truth.graph_launches += 1
        self.corr += 1
        self.t += 6.0 + 4.0 * kernels

    def token_to_host(self) -> None:
        self.events.append(launch(self.t, 2.0, self.corr, name="cudaMemcpyAsync"))
        self.events.append(memcpy_d2h(self.t + 2.0, 1.0, self.corr))
        self.events.append(
            {
                "ph": "i",
                "s": "t",
                "name": "[memory]",
                "pid": 100,
                "tid": 100,
                "ts": self.t,
                "cat": "cpu_instant_event",
                "args": {"Bytes": 8},
            }
        )
        self.corr += 1
        self.t += 20.0


def gpu_capture(
    decode_steps: int = 5,
    kernels_per_forward: int = 7,
    graph: bool = False,
    markers: bool = True,
    early_kernels: int = 0,
) -> tuple[list[dict], Truth]:
    """A prefill and ``decode_steps`` decode forwards at batch 1, eager or with graph-replayed decode steps."""
    from stepscope.contracts.markers import format_marker

    layout = _Layout()
    for k in range(early_kernels):  # timed before any host event: t starts at 1000
        layout.events.append(kernel(f"early_{k}", 10.0 + k, 1.0, 90_000 + k))
        layout.truth.kernels += 1
        layout.truth.kernels_before_host += 1
    for index in range(decode_steps + 1):
        kind = "prefill" if index == 0 else "decode"
        start = layout.t
        if graph and index > 0:
            layout.graph_replay(kernels_per_forward)
        else:
            layout.eager_kernels(kernels_per_forward)
        if markers:
            name = format_marker(kind, 0, index, 16 if index == 0 else 1, 1)
            layout.events.append(annotation(name, start, layout.t - start))
            layout.events.append(_gpu_annotation(name, start + 3.0, layout.t - start))
            setattr(layout.truth, f"{kind}_markers", getattr(layout.truth, f"{kind}_markers") + 1)
        layout.token_to_host()
    return layout.events, layout.truth


def run_record(mode: str, device_type: str = "cuda", decode_markers: int = 5, markers: bool = True) -> dict:
    """A run.json for a synthetic capture: the fields the checker reads (device, mode, expected markers)."""
    expected = {"prefill": 1, "decode": decode_markers} if markers else {"prefill": 0, "decode": 0}
    return {
        "schema": "stepscope.run/1",
        "spec": {"mode": mode, "batch": 1},
        "device": "Synthetic GPU",
        "device_type": device_type,
        "markers": expected,
        "trace": "trace.json.gz",
        "dry_run": False,
    }
