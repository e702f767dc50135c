"""A vLLM general plugin that records what the engine itself did, for the truth files of the vLLM captures.

Loaded by vLLM in every one of its processes (entry point group `vllm.general_plugins`; tests/vllm_server.py puts a
dist-info naming it on PYTHONPATH) when `CAPTURE_TRUTH_LOG` names a file prefix; does nothing otherwise. It
imports nothing of the project: it runs inside vLLM's own virtual environment.

- Worker.execute_model: each call is logged (the scheduler's output: per request its scheduled tokens, computed
  tokens, whether it is new or resumed, the output tokens so far; the requests finished and preempted) and runs
  inside `record_function("capture_truth#<n>")`, so the call has a span on the profiler's clock; the
  Worker.sample_tokens call after it (where the step's tokens are drawn) inside `capture_truth_sample#<n>`. The
  capture script takes those spans out of the trace and writes their times into the truth (tests/captures/vllm.py):
  the shipped trace holds nothing the capture added.
- Scheduler.add_request: each request's id, arrival time (vLLM's own `arrival_time`, wall clock) and prompt length.

Each process appends JSON lines to `<prefix>.<pid>.jsonl`, flushed per line (the server is killed at the end).
"""

from __future__ import annotations

import json
import os
import threading
import time

TRUTH_PREFIX = "capture_truth#"
SAMPLE_PREFIX = "capture_truth_sample#"
_lock = threading.Lock()
_patched = False


def register() -> None:
    """vLLM's plugin hook: patch once per process, only when asked to."""
    global _patched
    prefix = os.environ.get("CAPTURE_TRUTH_LOG")
    if not prefix or _patched:
        return
    _patched = True
    log = _Log(f"{prefix}.{os.getpid()}.jsonl")
    _patch_worker(log)
    _patch_scheduler(log)


class _Log:
    def __init__(self, path: str) -> None:
        self.path = path
        self.count = 0

    def write(self, record: dict) -> None:
        with _lock, open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")

    def next_n(self) -> int:
        with _lock:
            self.count += 1
            return self.count - 1


def _patch_worker(log: _Log) -> None:
    from vllm.v1.worker import gpu_worker  # pyright: ignore[reportMissingImports]  (runs in vLLM's own environment)

    inner = gpu_worker.Worker.execute_model

    def execute_model(self, scheduler_output, *args, **kwargs):
        import torch

        n = log.next_n()
        record = {"what": "step", "n": n, "pid": os.getpid(), "wall_ns": time.time_ns()}
        record.update(_scheduled(scheduler_output))
        log.write(record)
        with torch.profiler.record_function(f"{TRUTH_PREFIX}{n}"):
            return inner(self, scheduler_output, *args, **kwargs)

    gpu_worker.Worker.execute_model = execute_model
    sample = gpu_worker.Worker.sample_tokens

    def sample_tokens(self, *args, **kwargs):
        import torch

        n = log.count - 1  # the step whose tokens these are: sample_tokens follows its execute_model
        with torch.profiler.record_function(f"{SAMPLE_PREFIX}{n}"):
            return sample(self, *args, **kwargs)

    gpu_worker.Worker.sample_tokens = sample_tokens


def _scheduled(out) -> dict:
    """Per scheduled request what the scheduler decided for this step (vLLM's own SchedulerOutput)."""
    seqs = []
    for new in out.scheduled_new_reqs:
        prompt = len(new.prompt_token_ids) if new.prompt_token_ids is not None else None
        seqs.append(
            {
                "request": new.req_id,
                "new": True,
                "resumed": False,
                "computed": int(new.num_computed_tokens),
                "output_tokens": 0,
                "prompt": prompt,
            }
        )
    cached = out.scheduled_cached_reqs
    resumed = set(cached.resumed_req_ids)
    for i, req_id in enumerate(cached.req_ids):
        seqs.append(
            {
                "request": req_id,
                "new": False,
                "resumed": req_id in resumed,
                "computed": int(cached.num_computed_tokens[i]),
                "output_tokens": int(cached.num_output_tokens[i]),
                "prompt": None,
            }
        )
    for seq in seqs:
        seq["query"] = int(out.num_scheduled_tokens.get(seq["request"], 0))
    return {
        "total_tokens": int(out.total_num_scheduled_tokens),
        "sequences": seqs,
        "finished": sorted(out.finished_req_ids),
        "preempted": sorted(out.preempted_req_ids or ()),
    }


def _patch_scheduler(log: _Log) -> None:
    from vllm.v1.core.sched import scheduler  # pyright: ignore[reportMissingImports]

    inner = scheduler.Scheduler.add_request

    def add_request(self, request) -> None:
        log.write(
            {
                "what": "request",
                "pid": os.getpid(),
                "request": request.request_id,
                "arrival_wall_s": float(request.arrival_time),
                "prompt_tokens": int(request.num_prompt_tokens),
                "logged_wall_ns": time.time_ns(),
            }
        )
        return inner(self, request)

    scheduler.Scheduler.add_request = add_request
