"""One answer, whichever door: the CLI's JSON, `stepscope.load(path).report`, the Analyze page, batch's traces
row and the HTML report agree on every sample and every real trace (tests/data/real: sources and licenses in its
PROVENANCE.md), to the precision each shows.

Before the front door, the CLI gave the shipped sample 5 findings and the API 2 (no roofline): these fail then.
"""

from __future__ import annotations

import gzip
import html
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import stepscope
from stepscope.analysis.metrics import METRICS, card_metrics, card_text
from stepscope.app.navigation import ANALYZE_KEY
from tests.app_pages import page_test
from tests.conftest import REAL_TRACES

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_traces"
SINGLE = sorted(SAMPLES.glob("*/trace.json.gz")) + sorted(REAL_TRACES.glob("*.json*"))
RUNS = [SAMPLES / "cpu_tiny-llama_tp2_eager", REAL_TRACES / "hta_sampled_2rank"]
REAL_IN_APP = ("tracelens_hf_qwen1.5-0.5b_forward_h100.json.gz", "tracelens_vllm_gptoss_decode_fullgraph_rocm.json.gz")


def _cli_json(*args) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "app.cli", "analyze", *map(str, args), "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _plain(obj) -> dict:
    return json.loads(json.dumps(obj))


def _name(path: Path) -> str:
    return path.parent.name if path.name.startswith("trace.") else path.name


@pytest.mark.parametrize("trace", SINGLE, ids=_name)
def test_the_cli_and_the_api_give_one_answer(trace):
    cli = _cli_json(trace)
    api = stepscope.load(trace).report
    assert _plain(api) == cli
    assert set(cli) >= {"format", "device", "events", "segmentation", "requests", "steps", "summary", "findings"}
    assert cli == _cli_json(trace)  # and a second, cached, answer is the same


@pytest.mark.parametrize("folder", RUNS, ids=lambda p: p.name)
def test_the_cli_and_the_api_give_one_answer_for_a_run_of_ranks(folder):
    assert _plain(stepscope.load_run(folder).report) == _cli_json(folder)


def test_the_shipped_sample_keeps_its_roofline_whatever_the_door():
    """Issue 23's first symptom: the API and the app's downloads lacked the run.json's roofline."""
    sample = SAMPLES / "cpu_tiny-llama_eager" / "trace.json.gz"
    ids = {f["id"] for f in stepscope.load(sample).report["findings"]}
    assert {"roofline-prefill", "roofline-decode", "category-roofline"} <= ids
    assert stepscope.load(sample).summary["anatomy"]["roofline"]["status"] == "ok"


@pytest.fixture(scope="module")
def app_samples(tmp_path_factory) -> Path:
    """The shipped samples and two real GPU traces, laid out as the app lists samples (<name>/trace.json.gz)."""
    folder = tmp_path_factory.mktemp("one_answer_samples")
    for sample in sorted(SAMPLES.glob("*/trace.json.gz")):
        (folder / sample.parent.name).mkdir()
        for part in sample.parent.iterdir():
            (folder / sample.parent.name / part.name).write_bytes(part.read_bytes())
    for name in (
        "tracelens_hf_qwen1.5-0.5b_forward_h100.json.gz",
        "tracelens_vllm_gptoss_decode_fullgraph_rocm.json.gz",
    ):
        (folder / name.split(".json")[0]).mkdir()
        data = (REAL_TRACES / name).read_bytes()
        (folder / name.split(".json")[0] / "trace.json.gz").write_bytes(
            data if name.endswith(".gz") else gzip.compress(data)
        )
    return folder


@pytest.mark.parametrize(
    "name",
    [
        "cpu_tiny-llama_eager",
        "cpu_tiny-llama_compile",
        "tracelens_hf_qwen1.5-0.5b_forward_h100",
        "tracelens_vllm_gptoss_decode_fullgraph_rocm",
    ],
)
def test_the_analyze_page_shows_the_contract(app_samples, name, monkeypatch, tmp_path):
    monkeypatch.setenv("STEPSCOPE_SAMPLES_DIR", str(app_samples))
    monkeypatch.setenv("STEPSCOPE_RUNS_DIR", str(tmp_path / "runs"))
    report = _cli_json(app_samples / name / "trace.json.gz")
    at = page_test("analyze", 180)
    at.session_state[ANALYZE_KEY] = f"sample:{name}"
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    cards = {m.label: m.value for m in at.metric}
    assert cards
    for m, label in card_metrics(
        report["summary"], report["on_gpu"]
    ):  # every card the registry asks for, with its number
        assert cards[label] == card_text(m, report["summary"]), label
    # every finding, in alerts; the descriptive ones (issue 44) as context lines
    shown = " ".join(e.value for e in [*at.error, *at.warning, *at.info, *at.markdown, *at.caption])
    for finding in report["findings"]:
        assert finding["title"].split(":")[0][:40] in html.unescape(shown.replace("\\", "")), finding["title"]


def test_batch_rows_and_the_html_report_carry_the_contracts_numbers(tmp_path):
    from stepscope.analysis.front_door import open_trace
    from stepscope.batch.runner import run_batch
    from stepscope.exporters.report_html import build_report, report_trace

    sample = SAMPLES / "cpu_tiny-llama_eager" / "trace.json.gz"
    report = _cli_json(sample)
    out = tmp_path / "batch"
    run_batch(str(SAMPLES / "cpu_tiny-llama_eager"), str(out), workers=1, progress=None)
    import pyarrow.parquet as pq

    row = pq.read_table(out / "traces.parquet").to_pylist()[0]
    summary = report["summary"]
    for m in METRICS:
        expected = m.value(summary)
        if expected == expected:  # not NaN
            assert row[m.key] == pytest.approx(expected, rel=1e-9, abs=1e-9), m.key
    steps = pq.read_table(out / "steps.parquet").to_pylist()
    assert [s["gpu_idle_us"] for s in steps] == [s["gpu_idle_us"] for s in report["steps"]]
    page = build_report(report_trace(open_trace(sample)))
    for m, label in card_metrics(summary, report["on_gpu"]):  # the app's cards: a CPU trace has no launch card
        assert html.escape(card_text(m, summary)) in page and html.escape(label) in page, m.key
    for finding in report["findings"]:
        assert html.escape(finding["title"]) in page
