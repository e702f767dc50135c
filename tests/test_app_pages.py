"""Each Streamlit page run headless through streamlit.testing's AppTest.

Samples come from a temporary folder (STEPSCOPE_SAMPLES_DIR): the CPU tiny-llama
eager/compile fixtures, a synthetic GPU trace with a kernel named like an XSS
probe, and an unreadable one.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from stepscope.app.analysis_settings import DEVICE_KEY, MODEL_KEY
from stepscope.app.navigation import ANALYZE_KEY, COMPARE_KEYS
from stepscope.app.uploads import ACCEPTED_TYPES, UPLOADS_KEY, register_upload, size_limit_text
from tests.app_pages import page_test, too_precise
from tests.app_samples import XSS_KERNEL, sample_folder, synthetic_trace, write_synthetic_trace

REPO = Path(__file__).resolve().parents[1]
PAGES = REPO / "app" / "views"
TIMEOUT_S = 90


@pytest.fixture
def samples(tmp_path, monkeypatch) -> Path:
    folder = sample_folder(tmp_path, monkeypatch)
    write_synthetic_trace(folder, "synthetic")
    bad = folder / "zz_broken"
    bad.mkdir()
    (bad / "trace.json.gz").write_bytes(gzip.compress(b"this is not a trace"))
    return folder


def _trace_box(at):
    """Analyze's trace picker (in the sidebar since issue 30)."""
    return next(s for s in at.selectbox if s.label == "Trace")


def _page(name: str) -> AppTest:
    return page_test(name, TIMEOUT_S)


def _metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def _plotly_specs(at: AppTest) -> list[str]:
    return [chart.proto.spec for chart in at.get("plotly_chart")]


def test_analyze_opens_on_the_eager_sample(samples):
    at = _page("analyze.py").run()
    assert not at.exception
    assert at.session_state[ANALYZE_KEY] == "sample:cpu_tiny-llama_eager"
    assert too_precise(at) == [], "table cells with more than 4 significant digits"
    metrics = _metrics(at)
    for label in (
        "TTFT",
        "ITL p50",
        "ITL p90",
        "Decode tokens/s",
        "Decode steps",
        "Host ops / decode step",  # a CPU trace's cards say what they measure there (issue 30)
        "Host busy",
        "No op running / decode step",
    ):
        assert label in metrics
    assert not any("GPU" in label or "Launches" in label for label in metrics)  # no GPU wording, no launch card
    assert metrics["Decode steps"] == "7"
    assert metrics["TTFT"].endswith("ms")
    assert len(_plotly_specs(at)) >= 5  # overview, detail, three per-step charts, gap histogram
    # how the steps were found: one line (a box only when unsure), its evidence in it (issue 30)
    found = next(c.value.replace("\\", "") for c in at.caption if c.value.startswith("Steps found by"))
    forwards = int(metrics["Decode steps"]) + 1  # one prefill
    assert "stepscope-markers" in found and f"evidence: {forwards} Stepscope step markers, kinds as written" in found
    buttons = at.get("download_button")
    assert [b.label for b in buttons] == ["Steps (CSV)", "Gaps (CSV)", "Summary (JSON)"]
    # written when clicked, not on every run of the page: no file behind the button until then
    assert all(b.proto.deferred_file_id and not b.proto.url and b.proto.ignore_rerun for b in buttons)


def test_streamlit_app_defaults_to_analyze(samples):
    at = AppTest.from_file(str(REPO / "app" / "streamlit_app.py"), default_timeout=TIMEOUT_S).run()
    assert not at.exception
    assert "TTFT" in _metrics(at)


def test_trace_strings_are_escaped(samples):
    at = _page("analyze.py")
    at.session_state[ANALYZE_KEY] = "sample:synthetic"
    at.run()
    assert not at.exception
    assert _metrics(at)["Launches / decode step"] == "5"
    specs = "".join(_plotly_specs(at))
    assert "&lt;img src=x onerror=alert(1)&gt;" in specs
    assert XSS_KERNEL not in specs
    for element in list(at.markdown) + list(at.caption) + list(at.warning) + list(at.info) + list(at.error):
        assert "<img" not in element.value.replace("\\<img", "")
    kernels = next(d.value for d in at.dataframe if "kernel" in d.value.columns)  # a data grid: text as text
    # the full-name column is left out where every name is its own label (issue 30): the name itself is the label
    assert XSS_KERNEL in set(kernels["kernel"]) and "full name" not in kernels.columns


def test_unreadable_sample_shows_an_error_and_the_page_keeps_working(samples):
    at = _page("analyze.py")
    at.session_state[ANALYZE_KEY] = "sample:zz_broken"
    at.run()
    assert not at.exception
    assert at.error and "zz" in at.error[0].value
    assert _trace_box(at).value == "sample:zz_broken"
    _trace_box(at).set_value("sample:cpu_tiny-llama_compile").run()
    assert not at.exception and not at.error
    assert "TTFT" in _metrics(at)


def test_upload_handler_accepts_a_trace_and_rejects_a_bad_file(samples):
    state: dict = {}
    bad = register_upload(state, "notes.json", b"hello, not json")
    assert bad.key is None and bad.error.startswith("notes.json: ")
    assert "\n" not in bad.error
    truncated = register_upload(state, "cut.json.gz", gzip.compress(b'{"traceEvents": []}')[:-8])
    assert truncated.key is None and "gzip" in truncated.error
    data = gzip.compress(json.dumps(synthetic_trace()).encode())
    good = register_upload(state, "mine.json.gz", data)
    assert good.error is None and good.key.startswith("upload:")
    assert len(state[UPLOADS_KEY]) == 1
    assert "MB per file" in size_limit_text()
    assert ".pftrace" in size_limit_text() and ".sqlite" in size_limit_text()
    assert {"json", "gz", "pftrace", "perfetto-trace", "sqlite"} == set(ACCEPTED_TYPES)


def test_an_upload_opens_in_analyze(samples):
    data = gzip.compress(json.dumps(synthetic_trace()).encode())
    state: dict = {}
    key = register_upload(state, "mine.json.gz", data).key
    at = _page("analyze.py")
    at.session_state[UPLOADS_KEY] = state[UPLOADS_KEY]
    at.session_state[ANALYZE_KEY] = key
    at.run()
    assert not at.exception
    assert _trace_box(at).value == key
    assert _metrics(at)["Decode steps"] == "6"


def test_compare_defaults_to_eager_vs_compile(samples):
    at = _page("compare.py").run()
    assert not at.exception
    assert at.session_state[COMPARE_KEYS] == ("sample:cpu_tiny-llama_eager", "sample:cpu_tiny-llama_compile")
    assert too_precise(at) == [], "table cells with more than 4 significant digits"
    sentence = at.success[0].value.replace("\\", "")
    assert sentence.startswith("torch.compile cut ITL p50 from")
    assert "x faster" in sentence
    assert len(_plotly_specs(at)) == 4  # categories, ITL, per-step counts, one step each
    # the headline metrics (12 since 2026-12-01) and tokens/s over the step spans, which differs from the ITL-based
    # decode tokens/s; per-step rows that repeat their decode row are left out
    # (a CPU pair: the launch row, always 0 there, left out since issue 30)
    metrics = at.dataframe[0].value
    assert len(metrics) == 12 and not metrics["metric"].str.contains("launch").any()
    assert not any("Not like for like" in w.value for w in at.warning)  # a fair pair: no banner


def test_compare_shows_per_category_deltas_and_layers(samples):
    at = _page("compare.py").run()
    assert not at.exception
    assert "inside the median decode step" in at.success[0].value.replace("\\", "")
    table = next(d.value for d in at.dataframe if any(str(c).startswith("B - A (") for c in d.value.columns))
    delta = next(c for c in table.columns if str(c).startswith("B - A ("))
    unit = delta.removeprefix("B - A (").removesuffix(")")  # one time unit for the three columns
    a_col, b_col = f"A ({unit})", f"B ({unit})"
    assert unit in ("ns", "us", "ms", "s") and {a_col, b_col} <= set(table.columns)
    assert "gemm" in set(table["category"]) and (table[a_col] >= 0).all()
    scale = table[[a_col, b_col]].abs().max(axis=1)  # each shown to 3 significant digits
    assert ((table[delta] - (table[b_col] - table[a_col])).abs() <= 0.01 * scale + 1e-9).all()
    layers = next(m.value for m in at.markdown if m.value.startswith("**Layers.**"))
    assert layers.count("4 layers") == 2  # tiny-llama has 4 decoder layers (its preset config), eager and compiled


def test_compare_a_broken_trace_shows_an_error(samples):
    at = _page("compare.py")
    at.session_state[COMPARE_KEYS] = ("sample:cpu_tiny-llama_eager", "sample:zz_broken")
    at.run()
    assert not at.exception
    assert at.error


def test_run_page_shows_the_form_and_a_collector_error(samples):
    pytest.importorskip("torch")
    at = _page("run.py").run()
    assert not at.exception
    assert {b.label for b in at.button} >= {"Run"}
    device = next(s for s in at.selectbox if s.label == "Device")
    mode = next(s for s in at.selectbox if s.label == "Mode")
    device.set_value("cpu")
    mode.set_value("cuda-graph")
    next(b for b in at.button if b.label == "Run").click().run()
    assert not at.exception
    assert at.error and "cuda-graph needs a CUDA GPU" in at.error[0].value.replace("\\", "")


def _roofline_table(at: AppTest):
    return next((d.value for d in at.dataframe if "% of roofline" in d.value.columns), None)


def test_analyze_shows_expected_vs_measured_for_the_cpu_sample(samples):
    at = _page("analyze.py").run()
    assert not at.exception
    assert any(h.value.startswith("Expected vs measured") for h in at.subheader)
    table = _roofline_table(at)
    assert table is not None and list(table["phase"]) == ["prefill", "decode"]
    assert {"expected ms", "measured ms", "binding resource", "bytes", "FLOPs"} <= set(table.columns)
    assert (table["expected ms"] > 0).all() and (table["measured ms"] > 0).all()
    assert any("Decode at" in m.value and "% of roofline" in m.value for m in at.markdown)  # in the summary area
    device = next(s for s in at.selectbox if s.label == "Device")
    assert device.value.startswith("CPU")  # run.json says cpu: this machine, measured
    titles = [a.value for a in list(at.info) + list(at.warning)]
    assert any("roofline" in t and "Decode runs at" in t for t in titles)
    # a lower achievable fraction lowers the floor's bandwidth, so the expected time rises: in a what-if table
    # beside the answer's, which stays as it was (the findings and downloads keep the answer)
    before = float(table.loc[table["phase"] == "decode", "expected ms"].iloc[0])
    next(n for n in at.number_input if n.label == "Memory bandwidth fraction").set_value(0.5).run()
    assert not at.exception
    answer, what_if = (d.value for d in at.dataframe if "% of roofline" in d.value.columns)
    assert float(answer.loc[lambda t: t["phase"] == "decode", "expected ms"].iloc[0]) == before
    assert float(what_if.loc[lambda t: t["phase"] == "decode", "expected ms"].iloc[0]) > before
    assert any(c.value.startswith("What-if") for c in at.caption)
    next(b for b in at.button if b.label.startswith("Typical")).click().run()
    assert next(n for n in at.number_input if n.label == "Memory bandwidth fraction").value == 0.8


def test_roofline_for_a_trace_without_run_json_takes_a_model_and_a_gpu(samples):
    at = _page("analyze.py")
    at.session_state[ANALYZE_KEY] = "sample:synthetic"
    at.run()
    assert not at.exception
    assert _roofline_table(at) is None
    assert any("pick the model" in i.value.lower() for i in at.info)
    next(s for s in at.selectbox if s.label.startswith("Model")).set_value("llama-3-8b").run()
    assert not at.exception
    assert at.session_state[MODEL_KEY] == ("llama-3-8b", "bfloat16")  # every page now reads traces with it
    assert any("pick the device" in i.value.lower() for i in at.info)  # the synthetic trace names no GPU
    next(s for s in at.selectbox if s.label.startswith("Device (the trace")).set_value("H100 SXM").run()
    assert not at.exception
    assert at.session_state[DEVICE_KEY] == "H100 SXM"
    table = _roofline_table(at)
    assert list(table["phase"]) == ["prefill", "decode"]
    assert table["binding resource"].str.contains("HBM").any()


def test_analyze_shows_categories_layers_and_readable_tables(samples):
    at = _page("analyze.py").run()
    assert not at.exception
    assert any(h.value.startswith("Inside a step") for h in at.subheader)
    assert _metrics(at)["Layers"] == "4"  # tiny-llama: num_hidden_layers = 4 in collectors/presets.py
    cats = next(d.value for d in at.dataframe if "share_pct" in d.value.columns and "category" in d.value.columns)
    assert set(cats["category"]) <= {
        "gemm",
        "attention",
        "norm",
        "elementwise",
        "rotary",
        "embedding",
        "kv_cache",
        "sampling",
        "communication",
        "moe",
        "memcpy",
        "memset",
        "framework",
        "other",
    }
    assert abs(cats["share_pct"].sum() - 100) < 0.1 and cats["category"].iloc[0] == "gemm"  # shown to 3 digits
    for frame in (d.value for d in at.dataframe):  # no raw nanosecond timestamps anywhere
        assert not any(str(c).endswith("_ns") for c in frame.columns), list(frame.columns)
    steps = next(d.value for d in at.dataframe if "gemm (ms)" in d.value.columns)  # every time in ms
    assert steps["start (ms from trace start)"].iloc[0] >= 0 and (steps["step"] == list(range(len(steps)))).all()
    gaps = next(d.value for d in at.dataframe if "length_us" in d.value.columns)
    assert {"start_ms", "step", "step_kind"} <= set(gaps.columns)
    inside = gaps["step"].notna()
    assert (gaps.loc[inside, "step_kind"].isin(["prefill", "decode"])).all()
    specs = "".join(_plotly_specs(at))
    assert "by category" in specs and "layers (step" in specs  # stacked chart, layer lane on the detail
    assert "GPU idle" not in specs and "GPU busy" not in specs  # a CPU trace: host ops, not the GPU
    roof = next(d.value for d in at.dataframe if "pct_of_roofline" in d.value.columns)
    assert list(roof["category"]) == ["gemm", "attention", "overhead (neither)"]
    assert (roof["floor_us"].iloc[:2] > 0).all()


def test_analyze_gpu_trace_shows_short_kernel_names_and_needs_a_model_for_category_roofline(samples):
    at = _page("analyze.py")
    at.session_state[ANALYZE_KEY] = "sample:synthetic"
    at.run()
    assert not at.exception
    assert not any("pct_of_roofline" in d.value.columns for d in at.dataframe)
    assert any("per-category roofline needs a model" in i.value for i in at.info)
    next(s for s in at.selectbox if s.label.startswith("Model")).set_value("llama-3-8b").run()
    next(s for s in at.selectbox if s.label.startswith("Device (the trace")).set_value("H100 SXM").run()
    assert not at.exception
    roof = next(d.value for d in at.dataframe if "pct_of_roofline" in d.value.columns)
    gemm = roof[roof["category"] == "gemm"].iloc[0]
    # llama-3-8b weights (about 16 GB in bf16) over the H100's 3.35 TB/s: a floor of several ms
    assert 14_000 < gemm["bytes_MB"] < 17_000 and gemm["floor_us"] > 4000
    kernels = [d.value for d in at.dataframe if {"kernel", "share_pct"} <= set(d.value.columns)]
    assert kernels and all((k["kernel"].str.len() <= 80).all() for k in kernels)
    for k in kernels:  # labels unique within a table; the full name only where it says more than the label
        assert k["kernel"].is_unique
        assert "full name" not in k or (k["full name"] != k["kernel"]).all()


def test_perfetto_export_is_made_on_request(samples):
    at = _page("analyze.py").run()
    assert not at.exception
    prepare = next(b for b in at.button if b.label.startswith("Prepare for Perfetto"))
    assert "events" in prepare.label
    prepare.click().run()
    assert not at.exception
    labels = [b.label for b in at.get("download_button")]
    assert "Download for Perfetto (.pftrace)" in labels
    assert not any(b.label.startswith("Prepare for Perfetto") for b in at.button)
    assert any("ui.perfetto.dev" in c.value for c in at.caption)


def test_a_perfetto_upload_opens_in_analyze(samples):
    from stepscope.app.cache import load_path
    from stepscope.exporters.perfetto_trace import perfetto_trace_bytes

    loaded = load_path(samples / "cpu_tiny-llama_eager" / "trace.json.gz")
    data = perfetto_trace_bytes(loaded.timeline, loaded.analysis)
    state: dict = {}
    result = register_upload(state, "eager.pftrace", data)
    assert result.error is None, result.error
    at = _page("analyze.py")
    at.session_state[UPLOADS_KEY] = state[UPLOADS_KEY]
    at.session_state[ANALYZE_KEY] = result.key
    at.run()
    assert not at.exception
    assert _metrics(at)["Decode steps"] == "7"
    # no run.json beside an upload: the model the trace shows is proposed (tiny-llama's 4 layers), not used
    assert any("Proposed from the trace" in i.value and "tiny-llama" in i.value.replace("\\", "") for i in at.info)


def test_run_page_has_the_prefill_sweep_form(samples):
    pytest.importorskip("torch")
    at = _page("run.py").run()
    assert not at.exception
    assert "Run sweep" in {b.label for b in at.button}
    inputs = {n.label: n.value for n in at.number_input}
    assert inputs["Min prompt tokens"] == 16 and inputs["Max prompt tokens"] == 512
    assert inputs["Points (log-spaced)"] == 6
    assert next(s for s in at.selectbox if s.label == "Preset").value == "tiny-llama"
    assert any("No sweeps" in i.value for i in at.info)


def test_a_prefill_sweep_runs_and_is_plotted(samples, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from stepscope.app.sweeps import past_sweeps, run_sweep
    from stepscope.app.trace_sources import runs_dir
    from stepscope.collectors.sweep import SweepSpec
    from stepscope.exporters.figures.sweep_chart import sweep_figure

    stages = []
    spec = SweepSpec(preset="tiny-llama", device="cpu", min_tokens=16, max_tokens=64, points=3, repeats=1)
    path, record = run_sweep(spec, runs_dir(), lambda stage, done, total: stages.append(stage))
    assert path.name == "sweep.json" and past_sweeps(runs_dir()) == [path]
    assert [p["prompt_tokens"] for p in record["points"]] == [16, 32, 64]
    assert {"load model", "sweep", "decode step", "write"} <= set(stages)
    figure, notes = sweep_figure(record)
    names = [trace.name for trace in figure.data]
    assert names[:2] == ["measured prefill", "expected (roofline)"]
    assert any(n.startswith("one decode step, measured") for n in names)
    marks = record["marks"]
    drawn_or_noted = " ".join(names + notes)
    if marks["compute_bound_prompt_tokens"]:
        assert "compute bound from" in drawn_or_noted
    assert figure.layout.xaxis.type == "log" and figure.layout.yaxis.type == "log"
    at = _page("run.py").run()  # the Run page finds it in the runs folder and draws it
    assert not at.exception
    assert next(s for s in at.selectbox if s.label == "Sweep").value == str(path)
    assert "Prefill time vs prompt length" in _plotly_specs(at)[0]


def test_analysis_settings_reanalyse_and_a_bad_regex_is_one_line(samples):
    def gap_count(at: AppTest) -> int:
        title = next(h.value for h in at.subheader if h.value.startswith("Idle gaps ("))
        return int(title.split("(")[1].split(")")[0].replace(",", ""))

    at = _page("analyze.py").run()
    before = gap_count(at)
    at.number_input(key="gap_threshold_us").set_value(1000.0).run()
    assert not at.exception
    assert gap_count(at) < before
    at.text_input(key="step_regex").set_value("(unclosed").run()
    assert not at.exception
    assert any("regex" in e.value for e in at.error)
    at.text_input(key="step_regex").set_value("").run()
    assert not at.exception and not [e for e in at.error if "regex" in e.value]


def test_analyze_shows_the_memory_lane_and_figures_of_a_memory_capture(samples):
    """A real capture with profile_memory (tests/data/captures): the memory lane under the timeline, the memory
    cards of the CPU (the model's device), the per-step memory chart; a trace without memory says how to get it."""
    capture = REPO / "tests" / "data" / "captures" / "memory_fp32_b1_dynamic.json.gz"
    (samples / "memory_capture").mkdir()
    (samples / "memory_capture" / "trace.json.gz").write_bytes(capture.read_bytes())
    at = _page("analyze.py")
    at.session_state[ANALYZE_KEY] = "sample:memory_capture"
    at.run()
    assert not at.exception
    specs = _plotly_specs(at)
    lane = [s for s in specs if "Memory over the run" in s]
    # on the decoded figure, not its text: plotly escapes "·" as \u00b7 unless orjson is installed
    assert len(lane) == 1 and "allocated · cpu" in {t.get("name") for t in json.loads(lane[0])["data"]}
    assert any("Memory per step (cpu)" in s for s in specs)
    metrics = _metrics(at)
    assert metrics["Peak allocated (cpu)"].endswith("KiB")
    assert metrics["KV growth / decode step (cpu)"] == "1.02 KiB"  # 3 significant digits (analysis.number_format)
    assert metrics["Expected KV / decode step (cpu)"] == "—"  # one word for missing; the hover says it needs the model
    eager = _page("analyze.py").run()
    assert not eager.exception
    assert not [s for s in _plotly_specs(eager) if "Memory over the run" in s]
    assert any("No memory events in this trace" in c.value for c in eager.caption)


def test_run_page_profile_memory_reaches_the_run_spec(samples, monkeypatch):
    pytest.importorskip("torch")
    from stepscope.collectors import child
    from stepscope.collectors.errors import CollectorError

    seen = []

    def stop(spec, *args, **kwargs):
        seen.append(spec)
        raise CollectorError("stopped by the test")

    monkeypatch.setattr(child, "run_in_child", stop)  # the page runs generations in a child process
    at = _page("run.py").run()
    next(c for c in at.checkbox if c.label == "Profile memory").check()
    next(b for b in at.button if b.label == "Run").click().run()
    assert not at.exception
    assert [s.profile_memory for s in seen] == [True]


def test_the_summary_file_is_the_contract_without_its_step_list():
    import json

    from stepscope.app.components import summary_json

    report = {"schema_version": 3, "summary": {"ttft_ms": 1.5}, "steps": [{"index": 0}]}
    assert json.loads(summary_json(report)) == {"schema_version": 3, "summary": {"ttft_ms": 1.5}}
