"""Issue 30, how a trace is drawn: CPU wording on the cards, unique short names, where a finding's Zoom points,
readable hovers, Compare over every trace the session knows, upload errors and `compare DIR DIR`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import streamlit as st

from stepscope.analysis.findings import finding_range
from stepscope.analysis.kernel_names import distinct_short_names, short_name
from stepscope.analysis.metrics import card_metrics
from stepscope.analysis.model import Finding
from stepscope.app.navigation import COMPARE_KEYS
from stepscope.app.upload_box import FORMATS_READ, upload_error_text
from stepscope.app.uploads import UPLOADS_KEY, register_upload
from stepscope.exporters.figures.hover import HOVERLABEL, event_hover, step_hover
from tests.app_pages import page_test
from tests.app_samples import sample_folder

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample_traces" / "cpu_tiny-llama_eager"


def test_a_cpu_trace_has_cpu_cards_and_no_launch_card():
    from stepscope.analysis.front_door import open_trace

    summary = open_trace(SAMPLE / "trace.json.gz").analysis.summary
    assert not summary.on_gpu
    labels = [label for _, label in card_metrics(summary)]
    assert "Host busy" in labels and not any("GPU" in label for label in labels), labels
    assert not any("aunch" in label for label in labels)  # a CPU trace launches nothing
    gpu_labels = [label for _, label in card_metrics(summary, on_gpu=True)]
    assert "GPU busy" in gpu_labels and "Launches / decode step" in gpu_labels


def test_short_names_stay_unique_within_a_table():
    names = [
        "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, "
        "c10::BFloat16, at::native::binary_internal::MulFunctor<float> > >(int, T1, T2)",
        "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, "
        "at::native::binary_internal::MulFunctor<float> > >(int, T1, T2)",
        "void at::native::elementwise_kernel<128, 2, at::native::BinaryFunctor<float, float, float, "
        "at::native::binary_internal::MulFunctor<float> > >(int, T1)",
    ]
    assert len({short_name(n) for n in names}) < 3  # the family name alone collides
    labels = distinct_short_names(names)
    assert len(set(labels)) == 3, labels
    assert distinct_short_names([names[0], names[0]]) == [short_name(names[0])] * 2  # one kernel: one plain label


def _steps() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "kind": ["prefill", "decode", "decode", "decode"],
            "start_ns": [0, 100, 200, 300],
            "end_ns": [100, 190, 300, 390],
            "outlier": [False, False, True, False],
        }
    )


def test_a_findings_zoom_points_at_its_evidence():
    steps = _steps()
    own = Finding("long-host-call", "warn", "t", "d", at_ns=(120, 130))
    assert finding_range(own, steps) == (120, 130)
    named = Finding("x", "warn", "t", "d", evidence={"step": 2})
    assert finding_range(named, steps) == (200, 300)
    outlier = Finding("itl-outliers", "info", "t", "d")
    assert finding_range(outlier, steps) == (200, 300)  # the slowest outlier
    phase = Finding("decode-dominated", "info", "t", "d")
    assert finding_range(phase, steps) == (100, 390)
    assert finding_range(Finding("memory-peak", "info", "t", "d"), steps) is None  # about no place in the run
    assert finding_range(named, steps.iloc[:0]) is None


def test_hovers_name_the_kernel_its_times_and_its_launch():
    events = pd.DataFrame(
        {
            "name": ["void at::native::vectorized_elementwise_kernel<4, MulFunctor<float> >(int)", "cudaLaunchKernel"],
            "ts": np.array([2_000_000, 1_900_000], dtype=np.int64),
            "dur": np.array([1_500, 20_000], dtype=np.int64),
            "device": [0, -1],
            "correlation": [7, 7],
            "kind": ["kernel", "runtime"],
        }
    )
    (label,) = event_hover(events.iloc[:1], np.array(["step 1 · decode"], dtype=object), 0, window=events)
    assert "start 2.00 ms" in label and "1.50 us" in label and "end 2.00 ms" in label
    assert "launched by cudaLaunchKernel" in label and "step 1 · decode" in label
    assert HOVERLABEL["bgcolor"] == "#ffffff" and HOVERLABEL["font"]["color"] == "#212529"  # dark on light
    steps = _steps().assign(kernels=[3, 2, 2, 2], launches=[0, 0, 0, 0], gpu_busy_ns=50, gpu_idle_ns=40)
    cpu = step_hover(steps, np.array(["a", "b", "c", "d"]), on_gpu=False)
    assert all("GPU" not in t and "launches" not in t and "host ops" in t for t in cpu)


def test_upload_errors_name_the_file_and_the_formats_read():
    state: dict = {}
    result = register_upload(state, "notes.txt", b"hello, not a trace")
    text = upload_error_text(result.error)
    assert text.startswith("Could not read notes.txt") and FORMATS_READ in text
    assert "trace_processor" not in text  # the note belongs only to a Perfetto trace that needs it
    assert "trace_processor_shell" in upload_error_text("x.pftrace: reading it needs trace_processor_shell")
    assert not state.get(UPLOADS_KEY)


@pytest.fixture
def logdir_and_samples(tmp_path, monkeypatch):
    sample_folder(tmp_path, monkeypatch)
    logs = tmp_path / "logs"
    shutil.copytree(SAMPLE, logs / "eager_on_disk")
    monkeypatch.setenv("STEPSCOPE_LOGDIR", str(logs))
    monkeypatch.setenv("STEPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    st.cache_data.clear()
    return logs


def test_compare_lists_log_directory_traces_and_uploads(logdir_and_samples):
    at = page_test("compare", 120)
    eager = (SAMPLE / "trace.json.gz").read_bytes()
    state: dict = {}
    upload = register_upload(state, "mine.json.gz", eager).key
    at.session_state[UPLOADS_KEY] = state[UPLOADS_KEY]
    at.run()
    assert not at.exception
    a_box = next(s for s in at.selectbox if s.label == "Baseline (A)")
    options = list(a_box.options)
    assert any("eager_on_disk" in o and "(log directory)" in o for o in options), options  # not opened on Analyze
    assert any("mine.json.gz" in o and "(upload)" in o for o in options), options
    assert any(u.label.startswith("Upload a trace") for u in at.get("file_uploader"))
    at.session_state[COMPARE_KEYS] = ("logdir:eager_on_disk/trace.json.gz", upload)
    at.run()
    assert not at.exception and not at.error
    metrics = at.dataframe[0].value
    assert {"metric", "B - A", "B / A"} <= set(metrics.columns)
    shown = " ".join(metrics.astype(str).to_numpy().ravel())
    assert "None" not in shown and "nan" not in shown


def test_compare_takes_folders_as_analyze_does(tmp_path):
    run = tmp_path / "tp2"
    shutil.copytree(REPO / "sample_traces" / "cpu_tiny-llama_tp2_eager", run)
    env_cache = {"STEPSCOPE_CACHE_DIR": str(tmp_path / "cache")}
    result = subprocess.run(
        [sys.executable, "-m", "app.cli", "compare", str(run), str(SAMPLE), "--json"],
        cwd=REPO,
        env={**os.environ, **env_cache},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "run of several traces" in result.stderr
    out = json.loads(result.stdout)
    assert out["metrics"]
    empty = tmp_path / "empty"
    empty.mkdir()
    bad = subprocess.run(
        [sys.executable, "-m", "app.cli", "compare", str(empty), str(SAMPLE)],
        cwd=REPO,
        env={**os.environ, **env_cache},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 2 and bad.stderr.startswith("error: ") and bad.stderr.count("\n") == 1


def test_fleet_counts_a_rank_folder_once_and_offers_the_worst_outlier_first(tmp_path):
    from stepscope.batch.fleet import Fleet, trace_count, worst_outlier

    traces = pd.DataFrame(
        {
            "status": ["ok", "ok", "ok", "ok", "error"],
            "key": ["run", "run", "a", "b", None],  # two ranks of one run folder, two single traces, one error
            "itl_p50_ms": [5.0, 5.2, float("nan"), 9.0, float("nan")],
            "outlier": [False, True, False, False, False],
        }
    )
    assert trace_count(Fleet(tmp_path, traces, 1)) == 3
    assert worst_outlier(traces) == 1  # the outlier, though another trace is slower
    assert worst_outlier(traces.assign(outlier=False)) == 3  # no outlier: the slowest
    assert worst_outlier(traces.iloc[:0]) == 0


def test_a_custom_model_from_config_or_form_reaches_the_front_door(tmp_path):
    """app/analysis_settings.py: an uploaded config.json or the small form becomes the Given(model=...) that the
    CLI's --model gives; a description naming no model is refused and the previous choice stays."""
    from stepscope.analysis.front_door import open_trace
    from stepscope.analysis.roofline.model_source import model_shape
    from stepscope.app.analysis_settings import MODEL_KEY, current_given, set_custom_model

    config = {
        "model_type": "llama",
        "hidden_size": 256,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 512,
        "vocab_size": 1000,
    }
    state: dict = {}
    shape = set_custom_model(state, "config", {"config": config, "dtype": "float32", "name": "mine <b>"})
    assert shape.layers == 4 and shape.hidden == 256 and current_given(state).model == shape
    alone = tmp_path / "trace.json.gz"  # no run.json beside it: the given model is the one read against
    shutil.copy(SAMPLE / "trace.json.gz", alone)
    roofline = open_trace(alone, model=current_given(state).model, device="H100").analysis.anatomy.roofline
    assert roofline["status"] == "ok" and "mine" in roofline["model"], roofline
    form = {"name": "f", "layers": 4, "hidden": 256, "heads": 4, "kv_heads": 2, "vocab": 1000, "dtype": "float32"}
    form_shape = set_custom_model(state, "form", form | {"intermediate": 512})
    assert form_shape.layers == 4 and state[MODEL_KEY][0] == "form"
    with pytest.raises(ValueError):
        set_custom_model(state, "form", form | {"kv_heads": 3})  # 4 heads are not a multiple of 3 KV heads
    assert state[MODEL_KEY][0] == "form" and current_given(state).model == form_shape  # the previous choice stays
    with pytest.raises(ValueError):
        set_custom_model(state, "pickle", {})
    assert model_shape("llama-3-8b", "bfloat16").layers == 32  # the presets are untouched


def test_cpu_step_charts_draw_no_launch_series_and_a_one_step_axis_is_that_step():
    from stepscope.exporters.figures import step_charts

    steps = _steps().assign(kernels=[3, 2, 2, 2], launches=0, gpu_busy_ns=50, gpu_idle_ns=40)
    cpu = step_charts.kernels_launches_chart(steps, on_gpu=False)
    assert [t.name for t in cpu.data] == ["host ops"]
    gpu = step_charts.kernels_launches_chart(steps, on_gpu=True)
    assert [t.name for t in gpu.data] == ["kernels", "launches"]
    busy = step_charts.busy_idle_chart(steps, on_gpu=False)
    assert not any("GPU" in t.name for t in busy.data)
    one = step_charts.step_time_chart(steps.iloc[:1])
    assert list(one.layout.xaxis.tickvals) == [0] and list(one.layout.xaxis.range) == [-1, 1]
    kinds = {t.name for t in step_charts.step_time_chart(steps).data}
    assert {"prefill", "decode", "outlier (outlined)"} <= kinds  # every colour in the legend


def test_analyze_puts_findings_under_the_cards_and_zoom_moves_the_timeline(tmp_path, monkeypatch):
    from stepscope.app.findings_panel import ZOOM_KEY

    monkeypatch.setenv("STEPSCOPE_SAMPLES_DIR", str(REPO / "sample_traces"))  # the shipped samples, as shipped
    monkeypatch.setenv("STEPSCOPE_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("STEPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    st.cache_data.clear()

    at = page_test("analyze", 120).run()
    assert not at.exception
    labels = [m.label for m in at.metric]
    assert labels and not any("GPU" in label for label in labels) and "Host busy" in labels  # the CPU sample
    zooms = [b for b in at.button if b.label == "Zoom"]
    assert zooms, [b.label for b in at.button]
    zooms[0].click().run()
    assert not at.exception
    (lo, hi, _) = next(iter(at.session_state[ZOOM_KEY].values()))
    assert hi > lo
    overview = next(
        json.loads(c.proto.spec)
        for c in at.get("plotly_chart")
        if "Whole run" in json.loads(c.proto.spec)["layout"]["title"]["text"]
    )
    x0, x1 = overview["layout"]["xaxis"]["range"]
    assert x0 < x1  # the overview drawn at the finding's range
    assert overview["layout"]["xaxis"]["rangeslider"]["visible"]  # the zoomed window as a brush (issue 43)
    outlined = [s for s in overview["layout"].get("shapes", []) if s.get("type") == "rect"]
    assert any(s["x1"] - s["x0"] == pytest.approx((hi - lo) / 1e6) and x0 <= s["x0"] for s in outlined)


def test_fleet_box_names_are_short_on_the_axis_and_whole_in_the_hover():
    """Long group names overlapped on Fleet's axis: the tick is cut in the middle, the hover keeps it whole."""
    import html

    import pandas as pd

    from stepscope.exporters.figures.fleet_charts import TICK_CHARS, distribution

    long_name = "NVIDIA H100 80GB HBM3 <b>with a very long name</b>"
    traces = pd.DataFrame(
        {
            "status": ["ok"] * 5,
            "itl_p50_ms": [1.0, 2.0, 3.0, 4.0, 5.0],
            "device": [long_name, "a", "b", "c", "d"],
            "path": ["run/<i>1</i>"] * 5,
        }
    )
    fig = distribution(traces, "itl_p50_ms", "device")
    names = [t.name for t in fig.data]
    assert all(len(html.unescape(n)) <= TICK_CHARS for n in names) and "<b>" not in "".join(names)
    whole = next(t for t in fig.data if t.name.startswith("NVIDIA"))
    assert "with a very long name" in whole.hovertext[0] and "&lt;b&gt;" in whole.hovertext[0]
    assert fig.layout.xaxis.tickangle == -30 and fig.layout.xaxis.automargin
