"""SYNTHETIC Kineto traces shaped like a vLLM V1 tensor-parallel worker, used only by tests.

What it reproduces (the structure of a real rank-0 trace, issue 11): no step annotations; with_stack
python spans nested six deep (thread run > busy loop > execute_method > worker execute_model >
runner execute_model > _model_forward) around an `nn.Module: LlamaForCausalLM_0` span per forward;
an eager prefill launching every kernel itself; decode forwards replaying piecewise CUDA graphs,
one `cudaGraphLaunch` per layer plus one for the head; one collective kernel per layer; sampling
kernels, a device-to-host copy and a stream sync after each forward; a trailing execute_model with
nothing scheduled; several ranks' processes in one file. Kernels carry grid/block args, no shapes.

`serving_trace` returns the events and a `Truth` the tests compare against, computed here while the
events are laid out, not read back from them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.synthetic_traces import kernel, launch

LAYERS = 80
DECODE_KERNELS_PER_LAYER = 17  # replayed by one graph launch, one of them the all-reduce
HEAD_GRAPH_KERNELS = 15
PREFILL_KERNELS_PER_LAYER = 14
PREFILL_HEAD_KERNELS = 10
SAMPLER_KERNELS = 3
PYTHON_STACK = (
    "threading.py(1012): run",
    "vllm/v1/executor/multiproc_executor.py(520): worker_busy_loop",
    "vllm/worker/worker_base.py(610): execute_method",
    "vllm/v1/worker/gpu_worker.py(330): execute_model",
    "vllm/v1/worker/gpu_model_runner.py(1280): execute_model",
    "vllm/v1/worker/gpu_model_runner.py(1220): _model_forward",
)
MODULE = "nn.Module: LlamaForCausalLM_0"


@dataclass
class Truth:
    kinds: list[str] = field(default_factory=list)  # per forward span, in order (rank 0)
    starts_us: list[float] = field(default_factory=list)  # the worker execute_model spans' starts
    kernels: list[int] = field(default_factory=list)  # kernels each forward launched (graph replays included)
    graph_launches: list[int] = field(default_factory=list)


def _py(name: str, ts: float, dur: float, pid: int) -> dict:
    return {
        "ph": "X",
        "cat": "python_function",
        "name": name,
        "pid": pid,
        "tid": pid,
        "ts": ts,
        "dur": dur,
        "args": {"Python id": 1},
    }


def _op(name: str, ts: float, dur: float, pid: int) -> dict:
    return {
        "ph": "X",
        "cat": "cpu_op",
        "name": name,
        "pid": pid,
        "tid": pid,
        "ts": ts,
        "dur": dur,
        "args": {"External id": 1},
    }


class _Rank:
    def __init__(self, rank: int, prompt_tokens: int, api: str = "cuda", full_graph: bool = False) -> None:
        self.api = api
        self.full_graph = full_graph
        self.rank = rank
        self.pid = 1000 + rank
        self.prompt = prompt_tokens
        self.events: list[dict] = []
        self.corr = 1 + rank * 10_000_000
        self.gpu_free = 0.0

    def _kernels(self, host_ts: float, names_durs_grids: list[tuple[str, float, int]], launch_name: str) -> None:
        corr = self.corr
        self.corr += 1
        self.events.append(launch(host_ts, 4.0, corr, name=launch_name, tid=self.pid) | {"pid": self.pid})
        t = max(self.gpu_free, host_ts + 3.0)
        for name, dur, grid in names_durs_grids:
            k = kernel(name, t, dur, corr, stream=7, device=self.rank)
            k["args"] |= {"grid": [grid, 1, 1], "block": [256, 1, 1]}
            self.events.append(k)
            t += dur + 0.5
        self.gpu_free = t

    def _group(self, t: float, names: list[tuple[str, float, int]], eager: bool, graphs: int) -> tuple[float, int]:
        """Kernels replayed by one graph launch, or (an eager decode, an odd batch size) launched one by one."""
        if not eager:
            self._kernels(t, names, f"{self.api}GraphLaunch")
            return t + 6.0, graphs + 1
        for item in names:
            self._kernels(t, [item], f"{self.api}LaunchKernel")
            t += 5.0
        return t, graphs

    def forward(self, t: float, kind: str, truth: Truth | None) -> float:
        """One execute_model call from t; returns where the host is when it returns. Kind "eager-decode" is a
        decode forward run without graphs."""
        eager = kind == "eager-decode"
        kind = "decode" if eager else kind
        starts = [t + 2.0 * i for i in range(len(PYTHON_STACK) - 2)]
        runner_start = starts[-1] + 2.0
        t = runner_start + 40.0  # input preparation
        kernels = launches = 0
        graph_kernels: list[tuple[str, float, int]] = []
        forward_start = t
        t += 5.0
        if kind == "empty":
            t = runner_start + 30.0
        else:
            self.events.append(_op("Torch-Compiled Region: 0/0", t, 1.0, self.pid))
            for _layer in range(LAYERS):
                if kind == "prefill":
                    for k in range(PREFILL_KERNELS_PER_LAYER):
                        name = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL" if k == 7 else f"prefill_layer_kernel_{k}"
                        self._kernels(t, [(name, 78.0, 2 * self.prompt)], f"{self.api}LaunchKernel")
                        t += 5.0
                        kernels += 1
                elif self.full_graph:  # one graph for the whole forward, launched after the layers are laid out
                    graph_kernels += [
                        ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL" if k == 8 else f"decode_layer_kernel_{k}", 12.7, 8)
                        for k in range(DECODE_KERNELS_PER_LAYER)
                    ]
                    kernels += DECODE_KERNELS_PER_LAYER
                else:
                    names = [
                        ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL" if k == 8 else f"decode_layer_kernel_{k}", 12.7, 8)
                        for k in range(DECODE_KERNELS_PER_LAYER)
                    ]
                    t, launches = self._group(t, names, eager, launches)
                    kernels += DECODE_KERNELS_PER_LAYER
            if kind == "prefill":
                for k in range(PREFILL_HEAD_KERNELS):
                    self._kernels(t, [(f"head_kernel_{k}", 60.0, 2 * self.prompt)], f"{self.api}LaunchKernel")
                    t += 5.0
                    kernels += 1
            else:
                head = [(f"head_kernel_{k}", 12.0, 8) for k in range(HEAD_GRAPH_KERNELS)]
                t, launches = self._group(t, graph_kernels + head, eager, launches)
                kernels += HEAD_GRAPH_KERNELS
            self.events.append(_py(MODULE, forward_start, t - forward_start, self.pid))
            self.events.append(_py(PYTHON_STACK[-1], forward_start - 2.0, t - forward_start + 4.0, self.pid))
            t += 5.0
            # sampling: a few kernels, the sampled ids copied to the host, the host waits for them
            for k in range(SAMPLER_KERNELS):
                self._kernels(t, [(f"sampler_kernel_{k}", 8.0, 1)], f"{self.api}LaunchKernel")
                t += 5.0
                kernels += 1
            copy_corr = self.corr
            self.corr += 1
            copy_call = launch(t, 3.0, copy_corr, name=f"{self.api}MemcpyAsync", tid=self.pid)
            self.events.append(copy_call | {"pid": self.pid})
            copy_ts = max(self.gpu_free, t + 2.0)
            self.events.append(
                {
                    "ph": "X",
                    "cat": "gpu_memcpy",
                    "name": "Memcpy DtoH (Device -> Pinned)",
                    "pid": self.rank,
                    "tid": 7,
                    "ts": copy_ts,
                    "dur": 2.0,
                    "args": {"device": self.rank, "stream": 7, "correlation": copy_corr},
                }
            )
            self.gpu_free = copy_ts + 2.0
            self.events.append(
                _op(f"{self.api}StreamSynchronize", t + 3.0, self.gpu_free - t - 1.0, self.pid)
                | {"cat": "cuda_runtime"}
            )
            t = self.gpu_free + 3.0
        end = t + 20.0
        for depth, name in enumerate(PYTHON_STACK[2:-1]):
            self.events.append(_py(name, starts[depth], end + 10.0 - 2.0 * depth - starts[depth], self.pid))
        if truth is not None:
            truth.kinds.append(kind)
            truth.starts_us.append(starts[1])
            truth.kernels.append(kernels)
            truth.graph_launches.append(launches)
        return end + 10.0


def serving_trace(
    decode_steps: int = 9,
    prompt_tokens: int = 1049,
    ranks: int = 2,
    late_ranks_skip: int = 2,
    scheduler_us: float = 300.0,
    api: str = "cuda",
    full_graph: bool = False,
    device_name: str = "Synthetic GPU",
    eager_decodes: tuple[int, ...] = (),
) -> tuple[dict, Truth]:
    """A Kineto document of `ranks` worker processes running 1 prefill, `decode_steps` decodes and one empty
    execute_model. Ranks after the first start being profiled `late_ranks_skip` forwards late. `api` "hip"
    names the launches as ROCm does; `full_graph` replays each decode forward as one graph instead of one
    per layer; the decode forwards numbered in `eager_decodes` (1 = the first decode) run without graphs."""
    truth = Truth()
    events: list[dict] = []
    plan = ["prefill"] + ["eager-decode" if i + 1 in eager_decodes else "decode" for i in range(decode_steps)]
    plan.append("empty")
    for rank in range(ranks):
        r = _Rank(rank, prompt_tokens, api, full_graph)
        t = 10_000.0
        begin = t
        for i, kind in enumerate(plan):
            recorded = rank == 0 or i >= late_ranks_skip
            before = len(r.events)
            t = r.forward(t, kind, truth if rank == 0 else None)
            if not recorded:
                del r.events[before:]
            t += scheduler_us
        for depth, name in enumerate(PYTHON_STACK[:2]):
            r.events.append(_py(name, begin - 100.0 + 10 * depth, t - begin + 200.0 - 20 * depth, r.pid))
        events += r.events
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": i, "name": device_name} for i in range(ranks)],
        "traceEvents": events,
    }
    return doc, truth
