"""The truth of a vLLM capture, from vLLM itself: what its scheduler gave each engine step (the truth plugin's log,
tests/captures/vllm_truth_plugin.py), the spans the plugin put around each step and its sampling (taken out of the
worker's trace here), vLLM's own arrival time of each request, and the requests as the client sent them and the API
answered them (`usage`). Nothing here is computed by Stepscope.

Kinds are physical: a sequence decodes in a step when it is given one position after its whole prompt is cached
(computed >= prompt length); any other sequence is prefilling (a prompt chunk, or a preempted request recomputing
its cache). A step is `decode` when all its sequences decode, `prefill` when all prefill, `mixed` when both, and
`empty` when the scheduler gave it nothing (vLLM still calls execute_model, annotated context_0(0)_generation_0(0)).
Times are microseconds on the trace's clock: the markers' own, and wall-clock times (vLLM's arrival_time, the
client's) as `wall_us - baseTimeNanoseconds / 1000`, the trace clock's relation to the wall clock (the markers'
wall-clock times agree with it to within a millisecond: `clock_check_us` in the truth says by how much).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from tests.captures.vllm_truth_plugin import SAMPLE_PREFIX, TRUTH_PREFIX

KINDS = ("prefill", "decode", "mixed", "empty")


def take_markers(doc: dict) -> tuple[dict[int, tuple[float, float]], dict[int, tuple[float, float]]]:
    """Remove the plugin's spans from a worker trace (in place): its record_function spans and the python frames of
    its wrapper functions, the wrapped frames re-parented to the wrapper's parent. Returns (step spans, sampling
    spans) by step number: {n: (ts_us, dur_us)}."""
    steps: dict[int, tuple[float, float]] = {}
    samples: dict[int, tuple[float, float]] = {}
    kept, plugin_ids, parent_of = [], set(), {}
    for event in doc.get("traceEvents", []):
        name = str(event.get("name", ""))
        args = event.get("args") or {}
        if name.startswith(SAMPLE_PREFIX) or name.startswith(TRUTH_PREFIX):
            if event.get("ph") == "X" and event.get("cat") == "user_annotation":
                table, prefix = (samples, SAMPLE_PREFIX) if name.startswith(SAMPLE_PREFIX) else (steps, TRUTH_PREFIX)
                table[int(name[len(prefix) :])] = (float(event["ts"]), float(event["dur"]))
            continue
        if event.get("cat") == "python_function" and name.startswith("vllm_truth_plugin.py"):
            plugin_ids.add(args.get("Python id"))
            parent_of[args.get("Python id")] = args.get("Python parent id")
            continue
        kept.append(event)
    for event in kept:
        args = event.get("args")
        if isinstance(args, dict) and args.get("Python parent id") in plugin_ids:
            parent = args["Python parent id"]
            while parent in plugin_ids:
                parent = parent_of.get(parent)
            args["Python parent id"] = parent
    doc["traceEvents"] = kept
    return steps, samples


def read_logs(prefix: Path) -> tuple[dict[int, dict], dict[str, dict]]:
    """(step records by n, request records by vLLM request id) from every process's log of the plugin."""
    steps: dict[int, dict] = {}
    requests: dict[str, dict] = {}
    for path in sorted(prefix.parent.glob(f"{prefix.name}.*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if record["what"] == "step":
                steps[record["n"]] = record
            elif record["what"] == "request":
                requests[record["request"]] = record
    return steps, requests


def capture_truth(
    name: str,
    how: dict,
    spans: tuple[dict, dict],
    logs: tuple[dict[int, dict], dict[str, dict]],
    clients: list[Any],
    base_us: float,
    files: dict,
) -> dict:
    """The truth record of one capture (see the module's docstring)."""
    step_spans, sample_spans = spans
    step_log, request_log = logs
    ids = _client_request_ids(clients, request_log)
    requests = [_request(i, c, request_log.get(ids[i]), base_us) for i, c in enumerate(clients)]
    index = {rid: i for i, rid in enumerate(ids) if rid is not None}
    prompt = {rid: request_log[rid]["prompt_tokens"] for rid in ids if rid in request_log}
    steps = []
    for n in sorted(step_spans):
        record = step_log[n]
        ts, dur = step_spans[n]
        sample = sample_spans.get(n)
        steps.append(_step(len(steps), n, record, ts, dur, sample, index, prompt))
    _request_figures(requests, steps)
    clock = [step_spans[n][0] - (step_log[n]["wall_ns"] / 1000 - base_us) for n in step_spans]
    counts = Counter(s["kind"] for s in steps)
    in_trace = sorted({q["request"] for s in steps for q in s["sequences"]})
    return {
        "capture": name,
        "how": how,
        "files": files,
        "requests_sent": len(clients),
        "requests_in_trace": len(in_trace),
        "steps_recorded": len(steps),
        "forwards_recorded": sum(s["kind"] != "empty" for s in steps),
        "counts": {k: counts.get(k, 0) for k in KINDS},
        "clock_check_us": {"min": min(clock), "max": max(clock)} if clock else None,
        "requests": requests,
        "steps": steps,
    }


def _client_request_ids(clients: list[Any], request_log: dict[str, dict]) -> list[str | None]:
    """vLLM's request id of each client request: the engine's id starts with the id the API answered with."""
    ids: list[str | None] = []
    for client in clients:
        answer = client.response_id or ""
        found = [rid for rid in request_log if answer and rid.startswith(answer + "-")]
        ids.append(found[0] if len(found) == 1 else None)
    return ids


def _request(i: int, client: Any, logged: dict | None, base_us: float) -> dict:
    usage = client.usage or {}
    return {
        "request": i,
        "vllm_request_id": logged["request"] if logged else None,
        "prompt_tokens": usage.get("prompt_tokens"),
        "output_tokens": usage.get("completion_tokens"),
        "arrival_us": logged["arrival_wall_s"] * 1e6 - base_us if logged else None,
        "client_sent_us": client.sent_wall_ns / 1000 - base_us,
        "client_first_chunk_us": client.chunk_wall_ns[0] / 1000 - base_us if client.chunk_wall_ns else None,
        "client_done_us": client.done_wall_ns / 1000 - base_us,
    }


def _step(i: int, n: int, record: dict, ts: float, dur: float, sample, index: dict, prompt: dict) -> dict:
    sequences = []
    for seq in record["sequences"]:
        rid = seq["request"]
        length = prompt.get(rid, seq.get("prompt"))
        decoding = seq["query"] == 1 and length is not None and seq["computed"] >= length
        sequences.append(
            {
                "request": index.get(rid, -1),  # -1: a request the client did not send (none here)
                "query": seq["query"],
                "computed": seq["computed"],
                "phase": "decode" if decoding else "prefill",
                "completes_prompt": (not decoding) and length is not None and seq["computed"] + seq["query"] >= length,
                "resumed": seq["resumed"],
            }
        )
    prefill = [s for s in sequences if s["phase"] == "prefill"]
    decode = [s for s in sequences if s["phase"] == "decode"]
    kind = "mixed" if prefill and decode else "prefill" if prefill else "decode" if decode else "empty"
    return {
        "index": i,
        "n": n,
        "ts_us": ts,
        "dur_us": dur,
        "sample_end_us": sample[0] + sample[1] if sample else None,  # the step's tokens are drawn by then
        "kind": kind,
        "tokens": record["total_tokens"],
        "sequences": sequences,
        "sequence_count": len(sequences),
        "prefill_tokens": sum(s["query"] for s in prefill),
        "decode_sequences": len(decode),
        "finished_before": len(record["finished"]),
        "preempted_before": len(record["preempted"]),
    }


def _request_figures(requests: list[dict], steps: list[dict]) -> None:
    """Per request, from the steps the trace holds: its first and last step, the step that completed its prompt
    (its first token), its output tokens in the trace, and the times the engine's steps give."""
    for request in requests:
        mine = [s for s in steps if any(q["request"] == request["request"] for q in s["sequences"])]
        own = [next(q for q in s["sequences"] if q["request"] == request["request"]) for s in mine]
        first_token = next((s for s, q in zip(mine, own, strict=True) if q["completes_prompt"]), None)
        emitted = [s for s, q in zip(mine, own, strict=True) if q["phase"] == "decode" or q["completes_prompt"]]
        request.update(
            steps=[s["index"] for s in mine],
            first_step=mine[0]["index"] if mine else None,
            last_step=mine[-1]["index"] if mine else None,
            first_token_step=first_token["index"] if first_token else None,
            tokens_in_trace=len(emitted),
            queue_us=mine[0]["ts_us"] - request["arrival_us"] if mine and request["arrival_us"] is not None else None,
            ttft_us=(
                first_token["sample_end_us"] - request["arrival_us"]
                if first_token and first_token["sample_end_us"] and request["arrival_us"] is not None
                else None
            ),
        )


def align(steps: list[dict], truth: dict) -> list[dict | None]:
    """The truth step of each step an analysis found: the engine step whose execute_model span holds the found
    step's first work (its start plus its lead before any kernel or op: steps that tile the time line begin where the
    step before ended, before the engine's call), or begins within 2 ms after it (a span found around the engine's
    call starts just before it); None for a found step no engine step explains."""
    out = []
    for step in steps:
        x = step["start_us"] + (step.get("gpu_lead_us") or 0.0)
        hit = [t for t in truth["steps"] if t["ts_us"] <= x <= t["ts_us"] + t["dur_us"]]
        hit = hit or [t for t in truth["steps"] if x < t["ts_us"] <= x + 2000]
        out.append(hit[0] if hit else None)
    return out


def score(report: dict, truth: dict) -> dict:
    """How an analysis's steps and requests compare with a capture's truth: forwards missed or split, steps with a
    wrong phase (a kind other than the truth's and not "unknown"), forwards of known kind, sequences stated and
    exact, and the request count against the requests the trace holds."""
    steps = report["steps"]
    matched = align(steps, truth)
    forwards = [t for t in truth["steps"] if t["kind"] != "empty"]
    found = [t["index"] for t in matched if t is not None]
    pairs = [(s, t) for s, t in zip(steps, matched, strict=True) if t is not None and t["kind"] != "empty"]
    return {
        "forwards": len(forwards),
        "missed": [t["index"] for t in forwards if t["index"] not in found],
        "split": len(found) - len(set(found)),
        "unexplained": sum(t is None for t in matched),
        "wrong": [(t["index"], s["kind"], t["kind"]) for s, t in pairs if s["kind"] not in (t["kind"], "unknown")],
        "known": sum(s["kind"] != "unknown" for s, _ in pairs),
        "sequences_stated": sum(s["sequences"] is not None for s, _ in pairs),
        "sequences_wrong": [t["index"] for s, t in pairs if s["sequences"] not in (None, t["sequence_count"])],
        "composition_wrong": [t["index"] for s, t in pairs if s["kind"] == t["kind"] and not _same_composition(s, t)],
        "requests": report["requests"],
        "requests_truth": truth["requests_in_trace"],
    }


def _same_composition(step: dict, truth: dict) -> bool:
    """Whether every count the step states equals the truth's (a count it leaves null says nothing)."""
    stated = (("tokens", "tokens"), ("prefill_tokens", "prefill_tokens"), ("decode_sequences", "decode_sequences"))
    return all(step[key] is None or step[key] == truth[field] for key, field in stated)
