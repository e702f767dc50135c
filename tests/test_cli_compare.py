"""`compare` and `report` on the command line: formats, the gate's exit status on a real regression, errors.

The regression is real: the shipped CPU samples of one tiny Llama, eager and torch.compile. With compile as
the baseline A and eager as B, ITL gets worse; the expected outcome is derived from `analyze --json` of each
trace, run separately, not from the compare code.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.conftest import ROOT

EAGER = ROOT / "sample_traces" / "cpu_tiny-llama_eager" / "trace.json.gz"
COMPILE = ROOT / "sample_traces" / "cpu_tiny-llama_compile" / "trace.json.gz"


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=180
    )


@pytest.fixture(scope="module")
def itl_p50():
    if not (EAGER.exists() and COMPILE.exists()):
        pytest.skip("sample traces are not here")
    out = {}
    for name, path in (("eager", EAGER), ("compile", COMPILE)):
        result = run_cli("analyze", path, "--json")
        assert result.returncode == 0, result.stderr
        out[name] = json.loads(result.stdout)["summary"]["itl_ms"]["p50"]
    return out


def test_gate_fails_on_a_real_regression(itl_p50):
    assert itl_p50["eager"] / itl_p50["compile"] > 1.05  # the premise, from analyze alone
    result = run_cli("compare", COMPILE, EAGER, "--gate", "itl_p50_ms<=1.05x", "--gate", "decode_steps>=1")
    assert result.returncode == 1, result.stderr
    failed = [line for line in result.stderr.splitlines() if line.startswith("gate failed:")]
    assert len(failed) == 1 and "itl_p50_ms<=1.05x" in failed[0]
    assert f"B/A = {itl_p50['eager'] / itl_p50['compile']:.3f}x" in failed[0]
    assert "Traceback" not in result.stderr


def test_gate_passes_the_other_way_and_without_gates(itl_p50):
    assert itl_p50["compile"] / itl_p50["eager"] <= 1.05
    result = run_cli("compare", EAGER, COMPILE, "--gate", "itl_p50_ms<=1.05x", "--gate", "ttft_ms<=1000")
    assert result.returncode == 0, result.stderr
    assert "ok itl_p50_ms<=1.05x" in result.stdout and "gate failed" not in result.stderr
    assert run_cli("compare", COMPILE, EAGER).returncode == 0  # no gate: a comparison never fails


def test_json_form_follows_the_contract(itl_p50):
    result = run_cli("compare", COMPILE, EAGER, "--json", "--gate", "itl_p50_ms<=1.05x")
    assert result.returncode == 1
    out = json.loads(result.stdout)
    assert {"a", "b", "metrics", "sentence", "gates"} <= set(out)
    assert out["a"]["itl_ms"]["p50"] == pytest.approx(itl_p50["compile"])  # the analyze contract's summary
    assert out["b"]["itl_ms"]["p50"] == pytest.approx(itl_p50["eager"])
    row = next(m for m in out["metrics"] if m["key"] == "itl_p50_ms")
    assert row["ratio"] == pytest.approx(itl_p50["eager"] / itl_p50["compile"])
    assert row["delta"] == pytest.approx(itl_p50["eager"] - itl_p50["compile"])
    assert row["better"] == "lower" and row["unit"] == "ms"
    assert out["gates"] == [{"expr": "itl_p50_ms<=1.05x", "ok": False, "detail": out["gates"][0]["detail"]}]
    same = json.loads(run_cli("compare", COMPILE, EAGER, "--format", "json").stdout)
    assert same["metrics"] == out["metrics"]


def test_markdown_form_is_a_table():
    result = run_cli("compare", EAGER, COMPILE, "--format", "markdown")
    assert result.returncode == 0
    rows = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| metric | A | B |") and any(r.startswith("| ITL p50 |") for r in rows)
    # the sentence names the switch from the folder names, and leads with the figure that moved most
    assert "torch.compile raised decode tokens/s" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--gate", "itl_p50_ms<=+1.05x"), "a ratio bound has no sign"),
        (("--gate", "itl_p5_ms<=1.05x"), "unknown metric"),
        (("--gate", "itl_p50_ms"), "bad gate"),
        (("--json", "--format", "markdown"), "disagree"),
    ],
)
def test_bad_gate_or_options_exit_2_with_one_line(args, message):
    result = run_cli("compare", EAGER, COMPILE, *args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0]


def test_unreadable_trace_exits_2(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    for args in (
        ("compare", bad, EAGER),
        ("compare", EAGER, tmp_path / "missing.json"),
        ("report", bad, "-o", tmp_path / "r.html"),
    ):
        result = run_cli(*args)
        assert result.returncode == 2, args
        assert result.stderr.startswith("error:") and "Traceback" not in result.stderr


def test_report_command_writes_one_file(tmp_path):
    out = tmp_path / "report.html"
    result = run_cli("report", EAGER, "--vs", COMPILE, "-o", out)
    assert result.returncode == 0, result.stderr
    assert out.stat().st_size <= 3_000_000 and f"wrote {out}" in result.stdout  # a comparison's bound
    html = out.read_text()
    assert "Stepscope comparison" in html and "cpu_tiny-llama_eager" in html
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]
    missing_dir = run_cli("report", EAGER, "-o", tmp_path / "nope" / "r.html")
    assert missing_dir.returncode == 2 and missing_dir.stderr.startswith("error: cannot write")


def test_app_command_serves_the_app(tmp_path):
    import socket
    import time
    import urllib.request

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "app", "--headless", "--port", str(port), "--logdir", str(tmp_path / "r")],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as response:
                    assert response.status == 200
                    break
            except OSError:
                assert server.poll() is None, server.stdout.read().decode(errors="replace")[-2000:]
                time.sleep(0.5)
        else:
            pytest.fail("the app did not start within 60 s")
    finally:  # the whole session: whatever the command started must not outlive the test
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=30)


@pytest.mark.parametrize(
    "args",
    [("analyz", "x"), ("compare", "only-one"), ("compare", "a", "b", "--format", "yaml"), ("report", "t"), ()],
)
def test_usage_errors_are_one_line_and_exit_2(args):
    result = run_cli(*args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr


def test_help_lists_every_subcommand_and_compare_lists_the_metrics():
    from stepscope.analysis.metrics import METRICS

    top = run_cli("--help")
    assert top.returncode == 0
    for command in ("analyze", "compare", "report", "export", "roofline", "run", "sweep", "batch", "app"):
        assert command in top.stdout
    compare_help = " ".join(run_cli("compare", "--help").stdout.split())
    assert all(m.key in compare_help for m in METRICS)


def test_run_passes_its_options_to_the_collector():
    result = run_cli("run", "--help")
    assert result.returncode == 0 and "--new-tokens" in result.stdout and "--mode" in result.stdout


def test_missing_collect_extra_is_one_line(monkeypatch, capsys):
    from stepscope.app.cli import run
    from stepscope.app.cli.main import main

    def no_torch(args):
        raise ModuleNotFoundError("No module named 'torch'", name="torch")

    monkeypatch.setattr(run, "run_collector", no_torch)
    assert main(["run", "--device", "cpu"]) == 2
    assert capsys.readouterr().err.strip() == "error: `run` needs torch: pip install 'stepscope[collect]'"


def test_a_reader_that_leaves_early_gets_no_traceback(tmp_path):
    """`analyze --json | head -c 1` on a trace whose JSON is far larger than a pipe's buffer."""
    from tests.synthetic_traces import write
    from tests.test_report_html import synthetic_steps

    trace = write(tmp_path / "many_steps.json", synthetic_steps(3_000))  # SYNTHETIC: ~0.5 MB of steps in the JSON
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "analyze", str(trace), "--json"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout.read(1) == b"{"
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141 and "Traceback" not in stderr, stderr


def test_memory_deltas_in_the_json_markdown_and_a_gate():
    """Two real captures (tests/data/captures): outputs dropped (A) vs kept (B). The peak each trace holds comes
    from `analyze --json` of each, run separately; compare's memory rows, markdown and gate follow it."""
    captures = ROOT / "tests" / "data" / "captures"
    a, b = captures / "memory_fp32_b1_two_requests.json.gz", captures / "memory_fp32_b1_two_requests_kept.json.gz"
    reports = [json.loads(run_cli("analyze", p, "--json").stdout) for p in (a, b)]
    peaks = [r["summary"]["memory"]["peak_allocated_bytes"] for r in reports]
    assert peaks[1] > peaks[0]  # the premise: B keeps the first request's cache while running the second
    rows = {m["key"]: m for m in json.loads(run_cli("compare", a, b, "--json").stdout)["metrics"]}
    peak = rows["memory_peak_allocated_bytes"]
    assert (peak["a"], peak["b"], peak["delta"]) == (*peaks, peaks[1] - peaks[0])
    assert (peak["unit"], peak["better"]) == ("B", "lower")
    assert rows["kv_growth_bytes_per_token"]["ratio"] == pytest.approx(1.0, abs=0.05)
    markdown = run_cli("compare", a, b, "--format", "markdown").stdout
    assert "| peak memory allocated |" in markdown and "KiB" in markdown
    gate = run_cli("compare", a, b, "--gate", "memory_peak_allocated_bytes<=1.05x")
    assert gate.returncode == 1 and "memory_peak_allocated_bytes<=1.05x" in gate.stderr
