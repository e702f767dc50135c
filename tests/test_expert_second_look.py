"""What an expert sees first, round 2 (issue 44): no guessed number shown as a fact, findings ranked by what they
save, speculative decoding read as such, a Compare without a verdict on an unlike pair, a trace without steps that
still says something, and the one formatter everywhere.

Truth comes from the traces' own files and the captures' own runs (tests/data/captures/*.truth.json,
tests/synthetic_idle_nsys.py's rows), never from Stepscope's output.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from stepscope.analysis import AnalysisOptions, analyze
from stepscope.analysis.compare import METRIC_COLUMNS, _sentence, compare
from stepscope.analysis.metrics import card_metrics
from stepscope.analysis.report import contract
from stepscope.parsers import load_trace
from tests.conftest import REAL_TRACES, ROOT, real_trace
from tests.synthetic_idle_nsys import write_idle_capture

CAPTURES = ROOT / "tests" / "data" / "captures"
SAMPLES = ROOT / "sample_traces"
VERIFY_ONLY = CAPTURES / "speculative_verify_only.json.gz"
NO_SHAPES = CAPTURES / "two_requests_stack.json.gz"  # host forwards, no record_shapes: the batch is not in it
REAL = sorted(p.name for p in REAL_TRACES.glob("*.json*")) if REAL_TRACES.is_dir() else []
DESCRIPTIVE = ("decode-dominated", "prefill-dominated", "verify-dominated", "category-dominant", "speculative-decoding")
SEVERITY = {"critical": 0, "warn": 1, "info": 2}
VERDICT_WORDS = re.compile(r"\b(faster|slower|speed-?up|cut|raised|mostly|better|worse|unchanged)\b", re.I)


def card_text(m, summary) -> str:
    from stepscope.analysis.metrics import card_text as text  # issue 44's: "unknown", ranges

    return text(m, summary)


def _report(path: Path, options: AnalysisOptions | None = None) -> dict:
    timeline = load_trace(path)
    return contract(timeline, analyze(timeline, options))


# --- 1. no guessed number shown as a fact ----------------------------------------------------------------------


def test_a_trace_that_does_not_say_its_batch_has_no_per_token_figures():
    """Without input shapes or engine annotations the batch is unknown: tokens per step, tokens/s and decode
    tokens/s are null, a warning names what is unknown and what would make it known, the cards say "unknown"."""
    report = _report(NO_SHAPES)
    s = report["summary"]
    assert all(step["sequences"] is None for step in report["steps"])  # the trace does not tell
    assert s["tokens_per_step"] is None and s["tokens_per_s"] is None and s["decode_tokens_per_s"] is None
    assert s["batch_source"] is None and s["itl_ms"] is not None  # ITL is a fact; a rate per token is not
    (warning,) = [w for w in report["segmentation"]["warnings"] if "batch" in w]
    assert "unknown" in warning and "record_shapes=True" in warning and "--batch" in warning
    cards = {label: card_text(m, s) for m, label in card_metrics(s, report["on_gpu"])}
    assert cards["Tokens / decode step"] == "unknown" and cards["Decode tokens/s"] == "unknown"


def test_a_typed_batch_fills_them_and_says_it_was_typed():
    untyped = _report(NO_SHAPES)["summary"]
    typed = _report(NO_SHAPES, AnalysisOptions(batch=4))
    s = typed["summary"]
    assert s["tokens_per_step"] == 4 and "typed" in s["batch_source"]
    itl_s = untyped["itl_ms"]["mean"] / 1e3  # the ITL does not depend on the batch: 4 tokens each time
    assert s["decode_tokens_per_s"] == pytest.approx(4 / itl_s, rel=1e-9)
    assert not any("batch" in w for w in typed["segmentation"]["warnings"])
    with pytest.raises(ValueError, match="--batch"):
        AnalysisOptions(batch=0)


def test_a_batch_read_from_the_trace_names_its_source():
    s = _report(CAPTURES / "beam_search.json.gz")["summary"]  # [3, S] token ids: three beams
    assert s["tokens_per_step"] == 3 and "record_shapes" in s["batch_source"]
    s = _report(real_trace("tracelens_vllm_gptoss_decode_fullgraph_rocm.json.gz"))["summary"]
    assert s["tokens_per_step"] == 32 and "annotations" in s["batch_source"]


def test_the_decode_roofline_rests_on_no_guessed_batch():
    from stepscope.analysis.roofline import gpu_by_name, roofline_report
    from stepscope.analysis.roofline.model_source import model_shape

    shape = model_shape("tiny-llama", None)
    analysis = analyze(load_trace(NO_SHAPES))
    report = roofline_report(analysis, shape, gpu_by_name("H100"))
    assert "decode" not in set(report.phases["phase"])
    assert any("decode left out" in n and "batch" in n for n in report.notes)
    typed = roofline_report(analyze(load_trace(NO_SHAPES), AnalysisOptions(batch=2)), shape, gpu_by_name("H100"))
    assert typed.phases.set_index("phase").loc["decode", "batch"] == 2


def _cli_json(path: Path, cache: Path) -> dict:
    env = dict(os.environ, STEPSCOPE_CACHE_DIR=str(cache))
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "analyze", str(path), "--json", "--no-cache"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def _roofline_part(report: dict) -> list:
    ranks = report.get("ranks") or [report]
    return [
        (
            [f for f in r["findings"] if "roofline" in f["id"]],
            (r["summary"].get("anatomy") or {}).get("roofline"),
        )
        for r in ranks
    ]


@pytest.mark.parametrize("sample", sorted(p.name for p in SAMPLES.iterdir() if p.is_dir()))
def test_two_fresh_cache_folders_give_one_answer_for_each_shipped_sample(sample, tmp_path):
    """The shipped samples carry their capture machine's own figures (run.json `machine`): the landing roofline is
    a fact about the trace, not about the cache folder that measured this machine."""
    record = json.loads((SAMPLES / sample / "run.json").read_text())
    assert record["machine"]["memory_bytes_per_s"] > 0 and "load average" in record["machine"]["how"]
    folder = SAMPLES / sample
    path = folder / "trace.json.gz" if (folder / "trace.json.gz").exists() else folder
    first, second = _cli_json(path, tmp_path / "one"), _cli_json(path, tmp_path / "two")
    assert _roofline_part(first) == _roofline_part(second)
    phases = [f for part in _roofline_part(first) for f in part[0] if f["id"].startswith("roofline-")]
    assert phases and all("the capture machine" in f["detail"] for f in phases)  # its source, where it is shown
    assert not (tmp_path / "one" / "machine").exists()  # nothing of this machine was measured


def test_machine_figures_taken_under_load_are_measured_again_when_quiet(monkeypatch, tmp_path):
    import socket

    from stepscope.analysis.roofline import machine

    monkeypatch.setenv("STEPSCOPE_CACHE_DIR", str(tmp_path))
    rounds = iter([(1e10, 1e11), (3e10, 0.5e11), (9e10, 9e11)])

    def measured():
        bandwidth, flops = next(rounds)
        return {"memory_bytes_per_s": bandwidth, "flops_per_s": flops, "host": socket.gethostname()[:100],
                "cpu": machine._cpu_identity(), "how": "test", "under_load": loaded[0], "measured": "now"}  # fmt: skip
        # (this host and CPU, as _measured writes them: a record naming another machine is measured again)

    monkeypatch.setattr(machine, "_measured", measured)
    loaded = [True]
    monkeypatch.setattr(machine, "load_now", lambda: 8.0 if loaded[0] else 0.1)
    first = machine.this_machine("CPU")
    assert first.memory_bytes_per_s == 1e10 and "under load" in first.source
    key = machine.stored_figures_digest()
    assert machine.this_machine("CPU").memory_bytes_per_s == 1e10  # still loaded: not measured again
    loaded[0] = False
    quiet = machine.this_machine("CPU")  # quiet now: measured again, each figure's better value kept
    assert (quiet.memory_bytes_per_s, quiet.flops_per_s) == (3e10, 1e11) and "under load" not in quiet.source
    assert machine.stored_figures_digest() != key  # the answers' key changes with the figures
    assert machine.this_machine("CPU").memory_bytes_per_s == 3e10  # quiet figures are kept for good


def test_a_measurement_is_several_rounds_with_the_load_noted():
    from stepscope.contracts.machine_figures import measure

    rates = iter([5.0, 7.0, 6.0])
    calls = []
    figures = measure(lambda: next(rates), lambda: calls.append(1) or 2.0, "test copy", rounds=3)
    assert figures["memory_bytes_per_s"] == 7.0 and len(calls) == 3
    assert "best of 3 rounds" in figures["how"] and isinstance(figures["under_load"], bool)


# --- 2. speculative decoding -----------------------------------------------------------------------------------


def _truth(shape: str) -> dict:
    return json.loads((CAPTURES / f"{shape}.truth.json").read_text())


def test_a_verify_only_capture_gets_ranges_and_no_decode_finding():
    """Assisted generation that emits no plain decode step (its run kept every draft: the truth's `accepted`), read
    from a trace that does not show acceptance: ITL and tokens/s as ranges that hold the run's own figures."""
    truth = _truth("speculative_verify_only")
    assert truth["counts"]["decode"] == 0 and truth["counts"]["verify"] > 0
    report = _report(VERIFY_ONLY)
    s = report["summary"]
    assert s["step_kind"] == "verify" and s["speculative"]["acceptance_known"] is False
    # the run's truth: each verify cycle (previous token to this one) over the tokens it emitted (accepted + 1)
    target = [f for f in truth["forwards"] if f["model"] == "target"]
    ends = [f["ts_us"] + f["dur_us"] for f in target]
    per_token_ms = [
        (ends[i] - ends[i - 1]) / 1e3 / (f["accepted"] + 1)
        for i, f in enumerate(target)
        if f["kind"] == "verify" and f.get("accepted") is not None
    ]
    low, high = s["speculative"]["itl_ms_range"]["min"], s["speculative"]["itl_ms_range"]["max"]
    assert low * 0.9 <= float(np.median(per_token_ms)) <= high
    cards = {label: card_text(m, s) for m, label in card_metrics(s, report["on_gpu"])}
    assert "–" in cards["ITL p50"] and "–" in cards["Verify tokens/s"]
    assert s["tokens_per_s"] is None  # one figure would assume an acceptance the trace does not show
    ids = [f["id"] for f in report["findings"]]
    assert "verify-dominated" in ids and "decode-dominated" not in ids
    for f in report["findings"]:
        assert not re.search(r"\bdecode\b", f["id"] + " " + f["title"] + " " + f["detail"], re.I), f


def test_every_step_kind_shows_its_step_boundaries_on_the_timeline():
    """Neighbouring steps of one kind (a verify capture's two drafts in a row) are never one bar: each kind's steps
    alternate two shades, every rectangle in the fill of its own shade."""
    from stepscope.exporters.figures import timeline

    analysis = analyze(load_trace(VERIFY_ONLY))
    figure, _ = timeline.overview_figure(analysis)
    origin = analysis.time_origin_ns
    fill_of: dict[float, str] = {}
    for trace in figure.data:
        phase_lane = trace.y is not None and len(trace.y) and abs(float(np.nanmean(np.asarray(trace.y, float)))) < 0.3
        if getattr(trace, "fill", None) == "toself" and phase_lane:
            for x in np.asarray(trace.x, dtype=float)[0::5]:
                fill_of[round(float(x), 6)] = trace.fillcolor
    steps = analysis.steps
    starts = [round((s - origin) / 1e6, 6) for s in steps["start_ns"]]
    kinds = steps["kind"].tolist()
    start, end = steps["start_ns"].to_numpy(), steps["end_ns"].to_numpy()
    touching = [i for i in range(1, len(steps)) if kinds[i] == kinds[i - 1] and start[i] == end[i - 1]]
    assert touching, "the capture has neighbouring steps of one kind"
    for i in touching:
        assert fill_of[starts[i]] != fill_of[starts[i - 1]], (i, kinds[i])


# --- 3. Compare on a pair that is not like for like ------------------------------------------------------------


def test_an_unlike_pair_gets_no_verdict_and_no_cause():
    a = analyze(load_trace(real_trace("tracelens_vllm_gptoss_prefill_eager_b200.json.gz")))
    b = analyze(load_trace(real_trace("tracelens_sglang_qwen3-8b_decode_mi300x.json.gz")))
    result = compare(a, b, "vllm prefill", "sglang decode")
    assert result.warnings
    assert not VERDICT_WORDS.search(result.sentence), result.sentence
    assert "no verdict" in result.sentence and "(A) and" in result.sentence


def test_the_cause_never_moved_against_the_headline():
    """tokens/s up 300x (a larger batch) while the step got 3x slower: the idle time that grew with the step explains
    no speed-up."""
    rows = [
        ("step_ms", "step time", "ms", 2.0, 6.0),
        ("tokens_per_s", "tokens/s", "tok/s", 100.0, 30000.0),
        ("gpu_idle_per_step_us", "GPU idle per step", "us", 100.0, 4000.0),
    ]
    metrics = pd.DataFrame(
        [(k, label, unit, a, b, b - a, b / a) for k, label, unit, a, b in rows], columns=list(METRIC_COLUMNS)
    )
    sentence = _sentence(metrics, "A", "B")
    assert "mostly" not in sentence, sentence
    rows[1] = ("tokens_per_s", "tokens/s", "tok/s", 30000.0, 100.0)  # the rate fell with the slower step: it does
    metrics = pd.DataFrame(
        [(k, label, unit, a, b, b - a, b / a) for k, label, unit, a, b in rows], columns=list(METRIC_COLUMNS)
    )
    assert "mostly GPU idle per step" in _sentence(metrics, "A", "B")


# --- 4. findings ranked by what they save ----------------------------------------------------------------------


@pytest.mark.parametrize("name", [*REAL, "speculative_verify_only", "two_requests_stack"])
def test_findings_are_listed_by_severity_then_saving(name):
    path = REAL_TRACES / name if name in REAL else CAPTURES / f"{name}.json.gz"
    findings = _report(path)["findings"]
    ranks = [SEVERITY[f["severity"]] for f in findings]
    assert ranks == sorted(ranks), [(f["id"], f["severity"]) for f in findings]  # severity never rises
    for severity in SEVERITY:
        savings = [f["saving_us"] for f in findings if f["severity"] == severity]
        known = [s for s in savings if s is not None]
        assert savings[: len(known)] == sorted(known, reverse=True), savings  # largest first, unknown after
    last_warning = max((i for i, f in enumerate(findings) if f["severity"] != "info"), default=-1)
    for i, f in enumerate(findings):
        if f["id"] in DESCRIPTIVE:
            assert f["severity"] == "info" and f["saving_us"] is None and i > last_warning, f
        assert "cost_us" in f and "saving_us" in f


def _metrics(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def _open_upload(path: Path, name: str, **settings):
    from stepscope.app.navigation import ANALYZE_KEY
    from stepscope.app.uploads import UPLOADS_KEY, register_upload
    from tests.app_pages import page_test

    state: dict = {}
    key = register_upload(state, name, path.read_bytes()).key
    at = page_test("analyze", 600)
    at.session_state[UPLOADS_KEY] = state[UPLOADS_KEY]
    at.session_state[ANALYZE_KEY] = key
    for k, v in settings.items():  # the page's settings (Analysis settings' keys) before its first run
        at.session_state[k] = v
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_the_page_shows_findings_in_the_jsons_order_descriptive_ones_as_context(monkeypatch, tmp_path):
    monkeypatch.setenv("STEPSCOPE_RUNS_DIR", str(tmp_path / "runs"))
    path = real_trace("tracelens_vllm_gptoss_prefill_eager_b200.json.gz")
    report = _report(path)
    at = _open_upload(path, path.name)
    text = [m.value for m in at.markdown]
    actionable = [f for f in report["findings"] if not (f["severity"] == "info" and f["saving_us"] is None)]
    shown = [i for f in actionable for i, t in enumerate(text) if f["title"][:30] in t.replace("\\", "")]
    assert len(shown) >= min(3, len(actionable)) and shown == sorted(shown)  # the JSON's order
    context = [c.value for c in at.caption if "Context:" in c.value]
    assert any("moe takes" in c for c in context)  # category-dominant: a line of context, not a costed finding
    assert not any("moe takes" in t and "save" in t for t in text)


# --- 5. a trace without steps ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def idle_capture(tmp_path_factory):
    return write_idle_capture(tmp_path_factory.mktemp("idle") / "synthetic_idle_capture.sqlite")


def test_a_trace_without_steps_gets_time_based_figures_and_gpu_mostly_idle(idle_capture):
    report = _report(idle_capture.path)
    assert report["steps"] == []
    c = report["summary"]["capture"]
    window = idle_capture.last_ns - idle_capture.first_ns
    assert c["window_ms"] == pytest.approx(window / 1e6)
    assert c["busy_pct"] == pytest.approx(100 * idle_capture.busy_ns / window)
    assert c["kernels"] == len(idle_capture.kernels)
    assert c["kernels_per_s"] == pytest.approx(len(idle_capture.kernels) / (window / 1e9))
    edges = [idle_capture.first_ns, *(t for _, s, e in idle_capture.kernels for t in (s, e)), idle_capture.last_ns]
    idle = [b - a for a, b in zip(edges[0::2], edges[1::2], strict=True)]  # before, between and after the kernels
    assert c["longest_idle_ms"] == pytest.approx(max(idle) / 1e6)
    by_name: dict[str, int] = {}
    for name, start, end in idle_capture.kernels:
        by_name[name] = by_name.get(name, 0) + end - start
    assert c["top_kernel"] == max(by_name, key=by_name.get)
    (finding,) = [f for f in report["findings"] if f["id"] == "gpu-mostly-idle"]
    assert finding["severity"] == "warn" and f"{1 - c['busy_pct'] / 100:.0%}" in finding["title"]
    assert finding["saving_us"] is None
    labels = [label for _, label in card_metrics(report["summary"], report["on_gpu"])]
    assert labels == ["GPU busy (capture)", "Kernels / s", "Longest idle gap", "Top kernel"]


def test_gpu_mostly_idle_is_information_below_half_idle():
    from stepscope.analysis.capture_figures import gpu_mostly_idle

    capture = {"window_ms": 10.0, "busy_pct": 70.0, "kernels": 9, "kernels_per_s": 900.0, "longest_idle_ms": 1.0,
               "longest_idle_start_ms": 2.0}  # fmt: skip
    assert [f.severity for f in gpu_mostly_idle(capture, False, True, 0)] == ["info"]
    assert gpu_mostly_idle({**capture, "busy_pct": 85.0}, False, True, 0) == []
    assert gpu_mostly_idle({**capture, "busy_pct": 10.0}, True, True, 0) == []  # steps: the step findings speak


def test_the_busy_lane_of_a_trace_without_steps_is_a_utilisation_line(idle_capture):
    from stepscope.exporters.figures import timeline

    analysis = analyze(load_trace(idle_capture.path))
    figure, _ = timeline.overview_figure(analysis)
    (line,) = [t for t in figure.data if "share of time" in (t.name or "")]
    y = np.asarray(line.y, dtype=float)
    lane = -1  # the busy lane, under the phase lane
    assert np.all(y >= lane - 0.4 - 1e-9) and np.all(y <= lane + 0.4 + 1e-9)
    assert y.max() > lane - 0.4  # something ran


def test_the_analyze_page_of_a_trace_without_steps(idle_capture, monkeypatch, tmp_path):
    monkeypatch.setenv("STEPSCOPE_RUNS_DIR", str(tmp_path / "runs"))
    at = _open_upload(idle_capture.path, "synthetic_idle_capture.sqlite")
    cards = _metrics(at)
    assert list(cards) == ["GPU busy (capture)", "Kernels / s", "Longest idle gap", "Top kernel"]
    assert all(v not in ("—", "unknown") for v in cards.values()), cards
    assert any("The GPU is idle" in m.value for m in at.markdown)


# --- 6. the one formatter's leftovers --------------------------------------------------------------------------


def test_a_cpu_pair_draws_no_launches_and_counts_whole_ops_per_step():
    from stepscope.exporters.figures.compare_charts import per_step_overlay

    class Loaded:
        def __init__(self, name):
            self.name = name
            self.analysis = analyze(load_trace(SAMPLES / name / "trace.json.gz"))

    a, b = Loaded("cpu_tiny-llama_eager"), Loaded("cpu_tiny-llama_compile")
    titles = [t.text for t in per_step_overlay(a, b).layout.annotations]
    assert "launches" not in titles and len(titles) == 2
    rows = compare(a.analysis, b.analysis).op_diff["rows"]
    assert rows and all(float(2 * r[k]).is_integer() for r in rows for k in ("a_count", "b_count"))


def test_a_ratio_to_nothing_reads_gone():
    from stepscope.analysis.number_format import format_ratio

    assert format_ratio(0.0, 5.0, 0.0) == "gone" and format_ratio(math.nan, 0.0, 3.0) == "new"
    assert format_ratio(0.5, 2.0, 1.0) == "0.500x" and format_ratio(None) == "—"


@pytest.mark.parametrize("name", REAL)
def test_finding_bodies_write_numbers_as_every_output_does(name):
    for f in _report(REAL_TRACES / name)["findings"]:
        text = f["title"] + " " + f["detail"]
        assert not re.search(r"\d{4,}(\.\d+)? us|\d,\d{3}(\.\d+)? us|0\.0\d* TFLOP", text), text


def test_a_cpu_trace_names_its_device_and_its_memory_panel_one_word_for_missing(monkeypatch, tmp_path):
    monkeypatch.setenv("STEPSCOPE_RUNS_DIR", str(tmp_path / "runs"))
    at = _open_upload(CAPTURES / "memory_fp32_b1_two_requests_kept.json.gz", "memory.json.gz")
    header = " ".join(c.value for c in at.caption)
    assert "unknown device" not in header and "· CPU ·" in header
    memory = {label: value for label, value in _metrics(at).items() if "(cpu)" in label}
    assert memory, _metrics(at)
    for label, value in memory.items():
        assert value == "—" or re.match(r"^[\d.,]+( [KMGT]?i?B)?$", value), (label, value)


def test_the_kernel_detail_slider_is_a_range_of_steps_and_a_one_step_trace_has_none(monkeypatch, tmp_path):
    """Issue 44 item 6: a single-step trace showed a range slider reading "9 9"; issue 42 keeps a range of steps."""
    from tests.synthetic_traces import synthetic_generation, write

    monkeypatch.setenv("STEPSCOPE_RUNS_DIR", str(tmp_path / "runs"))
    at = _open_upload(NO_SHAPES, "two_requests.json.gz")
    (steps,) = [s for s in at.slider if s.label == "Steps drawn at kernel level"]
    lo, hi = steps.value
    assert isinstance(lo, int) and isinstance(hi, int) and 0 <= lo <= hi
    cards = _metrics(at)
    assert cards["Tokens / decode step"] == "unknown"
    assert any("Tokens per step unknown" in c.value for c in at.caption)

    one_step = write(tmp_path / "synthetic_one_prefill.json", synthetic_generation(decode_steps=0))
    at = _open_upload(one_step, "synthetic_one_prefill.json")
    assert not [s for s in at.slider if "kernel level" in s.label]  # one step: drawn whole, nothing to choose


def test_a_batch_typed_in_the_analysis_settings_fills_the_cards_and_says_so(monkeypatch, tmp_path):
    from stepscope.app.analysis_settings import BATCH_KEY

    monkeypatch.setenv("STEPSCOPE_RUNS_DIR", str(tmp_path / "runs"))
    at = _open_upload(NO_SHAPES, "two_requests.json.gz", **{BATCH_KEY: 8})
    assert _metrics(at)["Tokens / decode step"] == "8"
    assert any("Tokens per step from typed" in c.value for c in at.caption)


def test_the_deploy_button_is_off_in_every_way_the_app_starts():
    import tomllib

    from stepscope.app.cli.main import build_parser
    from stepscope.app.cli.webapp import streamlit_command

    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["client"]["toolbarMode"] == "viewer"
    args = build_parser().parse_args(["app", "--logdir", str(ROOT)])
    command = streamlit_command(args)
    assert command[command.index("--client.toolbarMode") + 1] == "viewer"


def test_the_app_runs_without_file_watchers_or_a_collection_after_each_run_in_every_way_it_starts():
    """Issue 39: the server's own time after each script run (a full garbage collection, watchers rescanning
    modules) is taken from other sessions' answers; `stepscope app`, run from any folder, passes what the checkout's
    .streamlit/config.toml says."""
    import tomllib

    from stepscope.app.cli.main import build_parser
    from stepscope.app.cli.webapp import streamlit_command

    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["fileWatcherType"] == "none" and config["runner"]["postScriptGC"] is False
    command = streamlit_command(build_parser().parse_args(["app", "--logdir", str(ROOT)]))
    assert command[command.index("--server.fileWatcherType") + 1] == "none"
    assert command[command.index("--runner.postScriptGC") + 1] == "false"
