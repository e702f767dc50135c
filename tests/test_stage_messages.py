"""Issue 43, item 4: while a trace opens, the page and the CLI's progress line say which stage runs (reading,
cutting N events into steps, measuring, anatomy, drawing) and what each stage before it took."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
from pathlib import Path

from stepscope.app.cli.read_progress import ReadProgress
from stepscope.app.stage_timing import StageLog, StageTimer

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_traces" / "cpu_tiny-llama_eager" / "trace.json.gz"


def test_the_log_says_what_runs_and_what_each_stage_before_it_took():
    now = [10.0]
    log = StageLog(clock=lambda: now[0])
    log("read")
    assert log.message() == "Reading the trace…"
    now[0] = 18.1
    log("segment 1234567")
    assert log.message() == "Cutting 1,234,567 events into steps… (read 8.1 s)"
    now[0] = 18.145
    log("anatomy")
    now[0] = 20.0
    log("draw")
    assert log.message() == (
        "Drawing the figures… (read 8.1 s, segment 45 ms, anatomy 1.9 s)"
    )  # under 0.1 s in ms, else in tenths of a second
    log.finish()
    assert log.message() == "read 8.1 s, segment 45 ms, anatomy 1.9 s, draw 0 ms"
    assert log.elapsed() == 10.0


def test_the_benchmark_log_keeps_one_analysis_stage(tmp_path, monkeypatch):
    """bench/browser_open_bench.py reads one "analysis" stage: the analysis's own stages are not split in it."""
    target = tmp_path / "stages.jsonl"
    monkeypatch.setenv("STEPSCOPE_TIMING_LOG", str(target))
    timer = StageTimer({"read": "parse", "segment": "analysis", "measure": "analysis", "anatomy": "analysis"})
    for name in ("read", "segment 5", "measure", "anatomy", "model", "report"):
        timer.stage(name)
    timer.done()
    names = [line.split('"stage": "')[1].split('"')[0] for line in target.read_text().splitlines()]
    assert names == ["parse", "analysis", "model", "report"]


def test_analyze_tells_its_stages_in_order_with_the_events_it_cuts():
    import stepscope
    from stepscope.analysis import analyze

    trace = stepscope.load(SAMPLE)
    told: list[str] = []
    analyze(trace.timeline, progress=told.append)
    assert told == [f"segment {len(trace.timeline.events)}", "measure", "anatomy"]


def test_the_terminal_line_shows_each_stage_and_is_cleared_before_the_answer():
    stream = io.StringIO()
    shown = ReadProgress("trace.json", stream)
    shown.stage("read")
    shown.stage("segment 31")
    shown.done()
    text = stream.getvalue()
    assert "Cutting 31 events into steps… (read " in text
    assert text.endswith("\r\033[K")  # the line is gone before the answer is written


def test_the_cli_shows_the_stages_on_a_terminal_only(tmp_path):
    """On a terminal (a pty) the stages appear on stderr; through a pipe stderr stays empty (scripts, CI)."""
    env = dict(os.environ, STEPSCOPE_CACHE_DIR=str(tmp_path / "cache"))  # made now, not served from the cache
    command = [sys.executable, "-m", "app.cli", "analyze", str(SAMPLE), "--json"]
    leader, follower = pty.openpty()
    try:
        result = subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=follower, timeout=300)
        os.close(follower)
        terminal = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the pty's other end is closed
                break
            if not chunk:
                break
            terminal += chunk
    finally:
        os.close(leader)
    assert result.returncode == 0 and result.stdout.startswith(b"{")
    text = terminal.decode()
    assert "Cutting 31," in text and "events into steps" in text and "Step anatomy" in text
    assert text.endswith("\r\033[K")
    piped = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, timeout=300)
    assert piped.returncode == 0 and piped.stderr == b""


def test_the_page_says_drawing_once_and_only_for_the_trace_just_opened():
    from types import SimpleNamespace

    from stepscope.app.cache import OPEN_LOG_KEY, open_log_of

    now = [0.0]
    log = StageLog(clock=lambda: now[0])
    log("read")
    now[0] = 5.0
    opened, other = SimpleNamespace(analysis=object()), SimpleNamespace(analysis=object())
    state = {OPEN_LOG_KEY: (opened.analysis, log)}
    assert open_log_of(dict(state), other) is None  # another trace's open says nothing here
    assert open_log_of(state, opened) is log
    assert open_log_of(state, opened) is None  # once: a rerun draws from the cache
    quick = StageLog(clock=lambda: 0.0)
    assert open_log_of({OPEN_LOG_KEY: (opened.analysis, quick)}, opened) is None  # a quick open shows no stages
