"""Every real trace in tests/data/real goes through the whole Analyze page without an error.

Sources: tests/data/real/PROVENANCE.md (AMD-AGI/TraceLens, facebookresearch/HolisticTraceAnalysis,
pytorch/kineto, facebookresearch/param; MIT / BSD-3-Clause). Each is copied into a temporary samples
folder as <name>/trace.json.gz, the layout the app lists.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from stepscope.app.navigation import ANALYZE_KEY, COMPARE_KEYS
from tests.app_pages import page_test, too_precise
from tests.conftest import REAL_TRACES

PAGE = Path(__file__).resolve().parents[1] / "app" / "views" / "analyze.py"
NAMES = sorted(p.name for p in REAL_TRACES.glob("*.json*")) if REAL_TRACES.is_dir() else []
# the training and toy traces (PROVENANCE.md): no generation in them, so no steps
WITHOUT_STEPS = {n for n in NAMES if n.startswith(("hta_", "kineto_", "param_"))}


@pytest.fixture(scope="module")
def samples(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("real_samples")
    for name in NAMES:
        data = (REAL_TRACES / name).read_bytes()
        target = folder / name.split(".json")[0]
        target.mkdir()
        (target / "trace.json.gz").write_bytes(data if name.endswith(".gz") else gzip.compress(data))
    return folder


@pytest.mark.parametrize("name", NAMES)
def test_analyze_page_renders_each_real_trace(samples, name, monkeypatch, tmp_path):
    monkeypatch.setenv("STEPSCOPE_SAMPLES_DIR", str(samples))
    monkeypatch.setenv("STEPSCOPE_RUNS_DIR", str(tmp_path / "runs"))
    at = page_test("analyze", 120)
    at.session_state[ANALYZE_KEY] = f"sample:{name.split('.json')[0]}"
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    # st.error is used for critical findings; anything else in red would be a failure to read the trace
    assert all(e.value.startswith("**") for e in at.error), [e.value for e in at.error]
    labels = {m.label for m in at.metric}
    if name in WITHOUT_STEPS:  # the capture's own figures decide the first row (issue 44)
        assert {"GPU busy (capture)", "Kernels / s", "Longest idle gap", "Top kernel"} <= labels
    else:
        assert {"ITL p50", "GPU busy"} <= labels
        assert "TTFT" in labels or {"Requests", "TTFT p50"} <= labels  # a served run's cards lead with its requests
    assert len(at.get("plotly_chart")) >= 2  # the overview and the detail timeline at least
    assert too_precise(at) == [], "table cells with more than 4 significant digits"


def test_compare_page_warns_about_an_unlike_pair_and_shows_the_op_diff(samples, monkeypatch, tmp_path):
    """SGLang's Qwen3-8B decode against vLLM's gpt-oss decode, both on an MI300X: not like for like."""
    monkeypatch.setenv("STEPSCOPE_SAMPLES_DIR", str(samples))
    monkeypatch.setenv("STEPSCOPE_RUNS_DIR", str(tmp_path / "runs"))
    at = page_test("compare", 180)
    at.session_state[COMPARE_KEYS] = (
        "sample:tracelens_sglang_qwen3-8b_decode_mi300x",
        "sample:tracelens_vllm_gptoss_decode_fullgraph_rocm",
    )
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert any("Not like for like" in w.value for w in at.warning)  # one line; the differences under "why"
    (expander,) = [e for e in at.expander if e.label == "Why not like for like"]
    why = " ".join(m.value for m in expander.markdown)
    assert "different engines" in why and "SGLang" in why and "vLLM" in why
    assert not at.success  # no verdict on an unlike pair (issue 44): the figures side by side
    assert "step time 474 ms (A) and 19.1 ms (B)" in at.info[0].value.replace("\\", "")
    assert "Op by op" in [h.value for h in at.subheader]
    ops = next(d.value for d in at.dataframe if "status" in d.value.columns)
    assert {"appeared", "disappeared"} <= set(ops["status"])


def test_analyze_page_shows_a_mixed_step_with_its_own_figures(samples, monkeypatch, tmp_path):
    monkeypatch.setenv("STEPSCOPE_SAMPLES_DIR", str(samples))
    monkeypatch.setenv("STEPSCOPE_RUNS_DIR", str(tmp_path / "runs"))
    at = page_test("analyze", 180)
    at.session_state[ANALYZE_KEY] = "sample:tracelens_vllm_gptoss_mixed_piecewise_rocm"
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    cards = {m.label: m.value for m in at.metric}
    for label in (
        "Step time (mixed)",
        "Mixed tokens/s",
        "Mixed steps",
        "Kernels / mixed step",
        "GPU idle / mixed step",
    ):
        assert cards[label] != "n/a", (label, cards)
    assert cards["Kernels / mixed step"] == "413"
    assert any("AMD Instinct MI300X" in c.value for c in at.caption)  # the device its properties name
    assert any("step 0, the only mixed step" in h.value for h in at.subheader)


def test_roofline_of_a_real_rocm_trace_from_its_device_annotation_and_a_family_preset(samples, monkeypatch, tmp_path):
    """vLLM's gpt-oss full-graph decode on ROCm: the device comes from its properties (MI300X), the batch and
    context from vLLM's annotation, the model from the gpt-oss-120b preset picked here."""
    monkeypatch.setenv("STEPSCOPE_SAMPLES_DIR", str(samples))
    monkeypatch.setenv("STEPSCOPE_RUNS_DIR", str(tmp_path / "runs"))
    at = page_test("analyze", 180)
    at.session_state[ANALYZE_KEY] = "sample:tracelens_vllm_gptoss_decode_fullgraph_rocm"
    at.run()
    next(s for s in at.selectbox if s.label.startswith("Model")).set_value("gpt-oss-120b").run()
    assert not at.exception, [e.message for e in at.exception]
    captions = [c.value.replace("\\", "") for c in at.caption]  # markdown-escaped
    assert any("MI300X" in c and "gpt-oss-120b" in c for c in captions)  # the trace's device: none to pick
    table = next(d.value for d in at.dataframe if "% of roofline" in d.value.columns)
    row = table[table["phase"] == "decode"].iloc[0]
    assert row["batch from"] == "engine annotations" and row["context"] == 1720  # (55086 - 32) / 32 per sequence
    assert row["GPU window ms"] < row["measured ms"]  # the 8.4 ms lead is outside the window
    cats = next(d.value for d in at.dataframe if "floor (us)" in d.value.columns or "floor_us" in d.value.columns)
    assert "moe" in set(cats["category"])
