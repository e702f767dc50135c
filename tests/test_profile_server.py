"""profile-server (collectors/live_server.py, app/cli/profile_server.py) against a tiny fake HTTP server in this file:
the workload plan, and every error path a user meets (unreachable, not vLLM, no profiler, no files, a file still
being written, two captures mixed, a slow stop, Ctrl-C), each one `error:` line, and /stop_profile always sent once
/start_profile succeeded. The real server's test is tests/test_profile_server_live.py."""

from __future__ import annotations

import gzip
import json
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from stepscope.app.cli.main import main
from stepscope.collectors.errors import CollectorError
from stepscope.collectors.live_server import (
    SPREAD_GAP_S,
    CaptureChild,
    PlannedRequest,
    ServerInfo,
    Workload,
    parse_range,
    plan_requests,
    profile_server,
    send_completion,
)
from tests.vllm_server import free_port

ROOT = Path(__file__).resolve().parents[1]


class FakeServer:
    """An HTTP server on loopback that answers as told: `owner` of its model (vllm or not), `start` status,
    `on_stop(trace_dir)` writing files at /stop_profile, `stop_delay_s`, `completion_status`, `chunk_delay_s`."""

    def __init__(self, trace_dir: Path, **behaviour) -> None:
        self.trace_dir = trace_dir
        self.owner = behaviour.get("owner", "vllm")
        self.start_status = behaviour.get("start", 200)
        self.on_stop = behaviour.get("on_stop", lambda d: None)
        self.stop_delay_s = behaviour.get("stop_delay_s", 0.0)
        self.completion_status = behaviour.get("completion_status", 200)
        self.chunk_delay_s = behaviour.get("chunk_delay_s", 0.0)
        self.calls: list[str] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                fake.calls.append(f"GET {self.path}")
                if self.path == "/v1/models":
                    model = {"id": "fake", "owned_by": fake.owner, "max_model_len": 128}
                    self._send(200, {"object": "list", "data": [model]})
                elif self.path == "/version":
                    self._send(200, {"version": "0.0-fake"})
                else:
                    self._send(404, {"detail": "Not Found"})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                fake.calls.append(f"POST {self.path}")
                if self.path == "/start_profile":
                    self._send(fake.start_status, {})
                elif self.path == "/stop_profile":
                    time.sleep(fake.stop_delay_s)
                    fake.on_stop(fake.trace_dir)
                    self._send(200, {})
                elif self.path == "/v1/completions":
                    self._complete(body)

            def _complete(self, body: dict) -> None:
                if fake.completion_status != 200:
                    self._send(fake.completion_status, {"error": "refused"})
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for _ in range(body["max_tokens"]):
                    time.sleep(fake.chunk_delay_s)
                    self.wfile.write(b'data: {"id":"c","choices":[{"text":" w"}]}\n\n')
                    self.wfile.flush()
                usage = {"prompt_tokens": len(body["prompt"]), "completion_tokens": body["max_tokens"]}
                self.wfile.write(f"data: {json.dumps({'id': 'c', 'choices': [], 'usage': usage})}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.handle_error = lambda request, address: None  # a client that left (Ctrl-C): not the test's news
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> FakeServer:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _write_trace(name: str, complete: bool = True):
    def write(folder: Path) -> None:
        data = gzip.compress(json.dumps({"traceEvents": []}).encode())
        (folder / name).write_bytes(data if complete else data[: len(data) // 2])

    return write


def _cli(capsys, *args: str) -> tuple[int, str]:
    code = main(["profile-server", *args])
    return code, capsys.readouterr().err


def _one_error_line(err: str) -> str:
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and not [line for line in err.splitlines() if "Traceback" in line]
    return errors[0]


# --- the plan ----------------------------------------------------------------------------------------------------


def test_the_plan_is_the_same_for_the_same_seed_and_fits_the_server():
    workload = Workload(requests=40, prompt_tokens=(16, 256), output_tokens=(8, 32), seed=7)
    plan = plan_requests(workload, 1024)
    assert plan == plan_requests(workload, 1024)
    assert plan != plan_requests(Workload(requests=40, seed=8), 1024)
    assert all(16 <= len(r.prompt_ids) <= 256 and 8 <= r.max_tokens <= 32 for r in plan)
    assert len({len(r.prompt_ids) for r in plan}) > 10  # drawn, not one size
    assert {r.at_s for r in plan} == {0.0}
    assert len({r.prompt_ids[:4] for r in plan}) == len(plan)  # no two prompts share a prefix (no prefix cache hit)
    assert all(8 <= t < 508 for r in plan for t in r.prompt_ids)
    small = plan_requests(Workload(requests=40, prompt_tokens=(200, 300), output_tokens=(50, 80), seed=7), 96)
    assert all(len(r.prompt_ids) + r.max_tokens <= 96 and r.max_tokens <= 48 for r in small)
    spread = plan_requests(Workload(requests=3, arrival="spread"), 1024)
    assert [r.at_s for r in spread] == [0.0, SPREAD_GAP_S, 2 * SPREAD_GAP_S]


@pytest.mark.parametrize("text", ["0:5", "9:3", "a:b", "1:2:3", ""])
def test_a_bad_range_is_refused(text):
    with pytest.raises(CollectorError, match="give A:B"):
        parse_range(text, "--prompt-tokens")
    assert parse_range("4", "--x") == (4, 4)


def test_the_client_figures_of_a_streamed_completion(tmp_path):
    with FakeServer(tmp_path, chunk_delay_s=0.01) as fake:
        info = ServerInfo(fake.url, "fake", 128, None)
        result = send_completion(info, PlannedRequest(0.0, (8, 9, 10), 5), time.monotonic(), 30)
    assert result.error is None and result.output_tokens == 5
    assert 5 <= result.ttft_ms < result.e2e_ms
    assert 5 <= result.itl_ms["p50"] <= result.itl_ms["p90"] < 500


# --- errors: one line each, the profiler never left on ------------------------------------------------------------


def test_nothing_listening_exits_2_with_one_line(capsys, tmp_path):
    code, err = _cli(capsys, f"http://127.0.0.1:{free_port()}", "--trace-dir", str(tmp_path), "--requests", "2")
    assert code == 2 and "cannot reach" in _one_error_line(err)


def test_only_http_urls(capsys, tmp_path):
    code, err = _cli(capsys, "file:///etc/passwd", "--trace-dir", str(tmp_path), "--requests", "2")
    assert code == 2 and "not an http(s) URL" in _one_error_line(err)


def test_a_server_that_is_not_vllm_is_refused_before_profiling(capsys, tmp_path):
    with FakeServer(tmp_path, owner="sglang") as fake:
        code, err = _cli(capsys, fake.url, "--trace-dir", str(tmp_path), "--requests", "2")
    assert code == 2 and "is not a vLLM server" in _one_error_line(err)
    assert not [c for c in fake.calls if "profile" in c]


def test_a_server_without_profiler_names_the_flag(capsys, tmp_path):
    with FakeServer(tmp_path, start=404) as fake:
        code, err = _cli(capsys, fake.url, "--trace-dir", str(tmp_path), "--requests", "2")
    line = _one_error_line(err)
    assert code == 2 and "answered 404" in line and "--profiler-config" in line and '"torch_profiler_dir"' in line
    assert "POST /stop_profile" not in fake.calls and "POST /v1/completions" not in fake.calls


def test_no_new_file_after_the_stop_asks_whether_the_folder_is_the_servers(capsys, tmp_path):
    (tmp_path / "rank0.1.pt.trace.json.gz").write_bytes(gzip.compress(b"{}"))  # an older capture: not this one's
    with FakeServer(tmp_path) as fake:
        code, err = _cli(capsys, fake.url, "--trace-dir", str(tmp_path), "--requests", "2", "--file-wait", "0.5")
    assert code == 2 and "no new trace file" in _one_error_line(err) and "torch_profiler_dir" in err
    assert fake.calls.count("POST /stop_profile") == 1 and fake.calls.count("POST /v1/completions") == 2


def test_a_file_still_being_written_is_named(capsys, tmp_path):
    with FakeServer(tmp_path, on_stop=_write_trace("rank0.5.pt.trace.json.gz", complete=False)) as fake:
        code, err = _cli(capsys, fake.url, "--trace-dir", str(tmp_path), "--duration", "0.2", "--file-wait", "0.5")
    assert code == 2 and "rank0.5.pt.trace.json.gz" in _one_error_line(err) and "still being written" in err


def test_two_captures_mixed_are_refused(capsys, tmp_path):
    def two(folder: Path) -> None:
        _write_trace("rank0.5.pt.trace.json.gz")(folder)
        _write_trace("rank0.6.pt.trace.json.gz")(folder)

    with FakeServer(tmp_path, on_stop=two) as fake:
        code, err = _cli(capsys, fake.url, "--trace-dir", str(tmp_path), "--duration", "0.1")
    assert code == 2 and "two captures mixed" in _one_error_line(err)


def test_a_slow_stop_is_a_timeout_named_with_its_flag(capsys, tmp_path):
    with FakeServer(tmp_path, stop_delay_s=3) as fake:
        code, err = _cli(capsys, fake.url, "--trace-dir", str(tmp_path), "--duration", "0.1", "--stop-timeout", "1")
    line = _one_error_line(err)
    assert code == 2 and "did not answer within 1 s" in line and "--stop-timeout" in line


def test_failed_requests_are_counted_not_fatal_and_the_files_found(tmp_path):
    with FakeServer(tmp_path, completion_status=500, on_stop=_write_trace("rank0.9.pt.trace.json.gz")) as fake:
        info = ServerInfo(fake.url, "fake", 128, None)
        capture = profile_server(info, tmp_path, Workload(requests=3), file_wait_s=2)
    assert [p.name for p in capture.files] == ["rank0.9.pt.trace.json.gz"]
    assert len(capture.clients) == 3 and all(c.error and "500" in c.error for c in capture.clients)
    assert capture.record()["requests_failed"] == 3
    assert fake.calls.count("POST /stop_profile") == 1


def test_ctrl_c_still_stops_the_profiler(tmp_path):
    """The Run page's Stop (CaptureChild.stop: SIGINT to the child's session): the CLI stops the profiler, exits
    130, and the page shows its one line; also when the app was started from a script's background job, whose
    children inherit SIGINT ignored (the child is started so here, as CI's runner may start it anyway)."""
    argv = [sys.executable, "-m", "app.cli", "profile-server", "URL", "--trace-dir", str(tmp_path)]
    with FakeServer(tmp_path, chunk_delay_s=0.5) as fake:
        argv[4] = fake.url
        before = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            child = CaptureChild([*argv, "--requests", "2", "--output-tokens", "60:60"], tmp_path / "log", cwd=ROOT)
        finally:
            signal.signal(signal.SIGINT, before)
        deadline = time.monotonic() + 60
        while "POST /v1/completions" not in fake.calls and time.monotonic() < deadline:
            time.sleep(0.1)
        assert child.returncode() is None and child.failure() is None
        child.stop()
        child.process.wait(timeout=60)
    assert child.returncode() == 130 and child.failure() == "interrupted"
    assert fake.calls.count("POST /stop_profile") == 1
    assert any(line == "progress: profiler started" for line in child.lines())


def test_the_live_server_tab_runs_the_capture_in_a_child_and_shows_its_one_line(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("STEPSCOPE_RUNS_DIR", str(tmp_path / "runs"))
    at = AppTest.from_string(
        "from stepscope.app.live_server_panel import render\n\nrender()\n", default_timeout=60
    ).run()
    at.text_input[0].set_value(f"http://127.0.0.1:{free_port()}")
    at.text_input[1].set_value(str(tmp_path))
    at.button[0].click().run()
    deadline = time.monotonic() + 60
    while not at.error and time.monotonic() < deadline:
        time.sleep(0.5)
        at.run()
    assert len(at.error) == 1 and "Capture failed: cannot reach" in at.error[0].value
