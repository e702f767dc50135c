"""The Ranks and Fleet pages run headless through streamlit.testing's AppTest.

Ranks opens on the shipped 2-rank CPU capture (copied into a temporary samples folder); its communication
heatmap is checked against the c10d all-reduces read straight from the trace files. Fleet reads a batch made
by the test from the tensor-parallel ranks, a CPU fixture and a hostile file.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from stepscope.app.navigation import ANALYZE_KEY
from stepscope.app.rank_runs import RANK_UPLOADS_KEY, RANKS_KEY
from stepscope.batch.runner import run_batch
from tests.app_pages import page_test
from tests.app_samples import XSS_KERNEL, sample_folder
from tests.conftest import real_trace

REPO = Path(__file__).resolve().parents[1]
PAGES = REPO / "app" / "views"
TP2 = REPO / "sample_traces" / "cpu_tiny-llama_tp2_eager"
TIMEOUT_S = 120


@pytest.fixture
def samples(tmp_path, monkeypatch) -> Path:
    folder = sample_folder(tmp_path, monkeypatch, extra=(TP2,))
    monkeypatch.setenv("STEPSCOPE_FLEET_ROOT", str(tmp_path / "fleet"))
    return folder


def _page(name: str) -> AppTest:
    return page_test(name, TIMEOUT_S)


def _allreduce_ms_per_step(trace: Path, starts_us, ends_us) -> list[float]:
    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    colls = [(e["ts"], e["ts"] + e["dur"]) for e in events if e.get("ph") == "X" and e["name"] == "c10d::allreduce_"]
    return [
        sum(max(0.0, min(b, hi) - max(a, lo)) for a, b in colls) / 1e3
        for lo, hi in zip(starts_us, ends_us, strict=True)
    ]


def _array(value) -> np.ndarray:
    """A figure array as plotly serialises it: a list, or a typed array {"dtype", "bdata", "shape"}."""
    if isinstance(value, dict):
        flat = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
        shape = value.get("shape")
        return flat.reshape([int(n) for n in str(shape).split(",")]) if shape else flat
    return np.asarray(value, dtype=float)


def _figures(at: AppTest) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def test_ranks_opens_on_the_tp2_sample_with_comm_per_step(samples):
    at = _page("ranks.py").run()
    assert not at.exception
    assert at.session_state[RANKS_KEY] == "ranks:sample:cpu_tiny-llama_tp2_eager"
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Ranks"] == "2" and int(metrics["Aligned steps"]) > 0
    assert metrics["Communication"].endswith("%") and metrics["Slowest rank"] in {"0", "1"}
    figs = _figures(at)
    assert len(figs) == 3  # every rank in one window, heatmap, ITL lines
    lanes = figs[0]["layout"]["yaxis"]["ticktext"]
    assert any(t.startswith("rank 0:") for t in lanes) and any(t.startswith("rank 1:") for t in lanes)
    itl_names = sorted(tr["name"] for tr in figs[2]["data"])
    assert itl_names == ["rank 0", "rank 1"]

    at.selectbox(key="ranks_heatmap_metric").select("communication").run()
    assert not at.exception
    heat = _figures(at)[1]["data"][0]
    # recompute rank 0's all-reduce time per aligned step from the raw file, with the step windows the table shows
    table = at.dataframe[-1].value
    r0 = table[table["rank"] == 0].sort_values("step")
    expected = _allreduce_ms_per_step(TP2 / "rank-0.trace.json.gz", r0["start_ns"] / 1e3, r0["end_ns"] / 1e3)
    z = _array(heat["z"])[0]
    assert sum(expected) > 0
    assert z == pytest.approx(expected, rel=0.02, abs=1e-3)


def test_ranks_step_choice_moves_the_timeline(samples):
    at = _page("ranks.py").run()
    at.number_input(key="ranks_iteration").set_value(0).run()
    assert not at.exception
    assert _figures(at)[0]["layout"]["title"]["text"].startswith("step 0 (prefill) on every rank")


def test_ranks_uploads_several_files_and_escapes_names(samples):
    at = _page("ranks.py")
    files = sorted(TP2.glob("*.gz"))
    at.session_state[RANK_UPLOADS_KEY] = tuple(
        (f"{XSS_KERNEL}-rank-{i}.json.gz", p.read_bytes()) for i, p in enumerate(files)
    )
    at.session_state[RANKS_KEY] = "ranks:upload"
    at.run()
    assert not at.exception
    assert {m.label: m.value for m in at.metric}["Ranks"] == "2"
    captions = " ".join(c.value for c in at.caption)
    assert "\\<img" in captions and not re.search(r"(?<!\\)<", captions)  # every < escaped for Markdown


def test_ranks_a_broken_upload_is_one_error(samples):
    at = _page("ranks.py")
    good = sorted(TP2.glob("*.gz"))[0].read_bytes()
    at.session_state[RANK_UPLOADS_KEY] = (("rank-0.json.gz", good), ("rank-1.json", b'{"traceEvents": ['))
    at.session_state[RANKS_KEY] = "ranks:upload"
    at.run()
    assert not at.exception
    assert len(at.error) == 1 and "rank-1.json" in at.error[0].value.replace("\\", "")  # the bad file named


@pytest.fixture
def fleet_batch(samples, tmp_path) -> Path:
    source = tmp_path / "fleet_in"
    source.mkdir()
    shutil.copytree(TP2, source / "tp2")  # a folder of rank files: one input, a row per rank
    shutil.copy(samples / "cpu_tiny-llama_eager" / "trace.json.gz", source / "eager.json.gz")
    (source / "hostile.json").write_bytes(b"\x00not a trace")
    run_batch(str(source), str(tmp_path / "fleet" / "nightly"), workers=1, progress=None)
    return source


def test_fleet_shows_a_batch_and_opens_a_trace_in_analyze(fleet_batch):
    at = _page("fleet.py").run()
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Traces analysed"] == "2" and metrics["Error rows"] == "1"  # the rank folder is one trace
    assert len(at.get("plotly_chart")) == 4
    slow = at.dataframe[0].value
    assert list(slow["itl_p50_ms"]) == sorted(slow["itl_p50_ms"], reverse=True)
    assert sorted(slow["rank"].dropna().astype(int)) == [0, 1] and slow["key"].nunique() == 2
    assert not any(Path(p).is_absolute() for p in slow["path"])  # relative to the folder the caption names
    assert any(str(fleet_batch) in c.value.replace("\\", "") for c in at.caption)
    for row in (
        int(slow.reset_index(drop=True).index[slow["rank"].isna().to_numpy()][0]),  # the single trace
        int(slow.reset_index(drop=True).index[(slow["rank"] == 1).to_numpy()][0]),
    ):  # rank 1 of the run
        at.selectbox(key="fleet_open_choice").set_value(row).run()
        at.button(key="fleet_open").click().run()
        assert not at.exception and not at.error
        path = fleet_batch / slow.iloc[row]["path"]
        assert at.session_state[ANALYZE_KEY] == "upload:" + hashlib.sha256(path.read_bytes()).hexdigest()


def test_fleet_refuses_a_trace_whose_file_changed(fleet_batch):
    at = _page("fleet.py").run()
    slow = at.dataframe[0].value.reset_index(drop=True)
    chosen = int(slow.index[slow["rank"].isna().to_numpy()][0])
    at.selectbox(key="fleet_open_choice").set_value(chosen).run()
    path = fleet_batch / slow.iloc[chosen]["path"]
    path.write_bytes(path.read_bytes() + b" ")
    at.button(key="fleet_open").click().run()
    assert not at.exception
    assert any("no longer" in e.value for e in at.error)


def test_fleet_without_batches_says_how_to_make_one(samples):
    at = _page("fleet.py").run()
    assert not at.exception
    assert any("No batch output" in i.value for i in at.info)


def test_ranks_shows_the_hta_pair_without_steps(samples):
    folder = real_trace("hta_sampled_2rank")
    at = _page("ranks.py")
    at.session_state[RANK_UPLOADS_KEY] = tuple((p.name, p.read_bytes()) for p in sorted(folder.glob("*.json.gz")))
    at.session_state[RANKS_KEY] = "ranks:upload"
    at.run()
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Ranks"] == "2" and metrics["Aligned steps"] == "0"
    assert float(metrics["Communication"].rstrip("%")) > 0  # NCCL kernels over each rank's whole trace
    assert any("world of 128" in w.value for w in at.warning)
    totals = next(d.value for d in at.dataframe if "span (ms)" in d.value.columns)
    assert sorted(totals["rank"]) == [0, 1] and (totals["collectives"] > 0).all()
    assert "span (ms)" in totals and not any(str(c).endswith("_ns") for c in totals.columns)  # times in ms
    import json

    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    window = next(s for s in specs if "on every rank" in s["layout"]["title"]["text"])
    names = {t.get("name") for t in window["data"]}
    assert {"r0 collectives", "r1 collectives"} <= names  # the NCCL kernels on a lane of their own, per rank
    assert "No straggler" not in " ".join(m.value for m in at.markdown)  # no such claim where it could not judge
