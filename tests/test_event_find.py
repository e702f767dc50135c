"""Issue 42: find events by name everywhere (analysis/event_find.py, `stepscope.load(path).find(...)`). Checked
against plain pandas string tests on a shipped sample and real GPU traces, and on SYNTHETIC names built here:
names with brackets in plain mode, a regex that makes a backtracking engine take exponential time (RE2 answers
within a bound), letters whose case fold changes their length."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import stepscope
from stepscope.analysis.event_find import FIND_COLUMNS, FindQuery, count_line, find_events, name_hits, per_step
from stepscope.analysis.event_window import work_index
from stepscope.analysis.user_patterns import UserPatternError
from stepscope.parsers.timeline import Timeline, TraceMeta
from tests.bounded_cli import in_child
from tests.conftest import REAL_TRACES

ROOT = Path(__file__).resolve().parents[1]
CPU_SAMPLE = ROOT / "sample_traces" / "cpu_tiny-llama_eager" / "trace.json.gz"
VLLM = REAL_TRACES / "tracelens_vllm_gptoss_decode_fullgraph_rocm.json.gz"
EVIL = r"^(a+)+$"
ALMOST = "a" * 40 + "!"  # 2^40 ways for a backtracking engine to fail


@pytest.mark.parametrize("trace_path", [CPU_SAMPLE, VLLM], ids=["cpu sample", "vllm rocm"])
@pytest.mark.parametrize("text", ["mm", "ATEN::", "Launch", "attention", "zzz-no-such-name"])
def test_a_plain_find_is_every_event_whose_name_holds_the_text(trace_path, text):
    trace = stepscope.load(trace_path)
    found = trace.find(text)
    names = trace.timeline.events["name"].astype(str)
    want = names.str.contains(text, case=False, regex=False).to_numpy()
    assert list(found.columns) == list(FIND_COLUMNS)
    assert len(found) == int(want.sum())
    assert found["name"].tolist() == names[want].tolist()
    assert (found["start_ms"].diff().dropna() >= 0).all()  # in time order
    exact = trace.find(text, case_sensitive=True)
    assert len(exact) == int(names.str.contains(text, case=True, regex=False).sum())


def test_a_name_with_brackets_is_found_as_written_in_plain_mode():
    trace = stepscope.load(CPU_SAMPLE)
    marker = "stepscope.decode[request=0,index=3,"
    found = trace.find(marker)
    assert len(found) == 1 and found["name"].iloc[0].startswith(marker)
    assert found["step"].iloc[0] == 3  # the marker's own step
    with pytest.raises(UserPatternError, match="find regex"):
        trace.find(marker, regex=True)  # as a regex the bracket opens a class that never closes: one clear line
    assert len(trace.find(r"stepscope\.decode\[request=0,index=3\b", regex=True)) == 1


def test_a_regex_find_is_re2_and_matches_like_the_name_tests():
    trace = stepscope.load(VLLM)
    found = trace.find(r"(?i)^_?matmul_.*swiglu$", regex=True)
    names = trace.timeline.events["name"].astype(str)
    want = names.str.contains(r"(?i)^_?matmul_.*swiglu$", regex=True)
    assert len(found) == int(want.sum()) > 0


def _hostile_timeline(n: int) -> Timeline:
    """SYNTHETIC: n events whose distinct names almost match EVIL."""
    names = [ALMOST[: 30 + i % 11] + "!" + str(i) for i in range(n)]
    frame = pd.DataFrame(
        {
            "ts": np.arange(n, dtype=np.int64) * 1000,
            "dur": np.full(n, 500, np.int64),
            "kind": pd.Categorical(["kernel"] * n),
            "name": pd.Categorical(names),
            "pid": np.zeros(n, np.int64),
            "tid": np.zeros(n, np.int64),
            "device": np.zeros(n, np.int64),
            "stream": np.full(n, 7, np.int64),
            "correlation": np.full(n, -1, np.int64),
            "external_id": np.full(n, -1, np.int64),
        }
    )
    return Timeline(events=frame, meta=TraceMeta(source_format="synthetic", event_count=n))


def _hostile_find(n: int) -> tuple[int, float]:
    timeline = _hostile_timeline(n)
    analysis = stepscope.analyze(timeline)
    start = time.perf_counter()
    found = find_events(timeline, work_index(timeline, analysis), FindQuery(EVIL, regex=True))
    return len(found), time.perf_counter() - start


def test_a_hostile_regex_stays_linear():
    """Python's re takes hours on one such name; RE2 answers for 20,000 of them within the bound, and ten times
    the names take about ten times as long (not a power of it)."""
    small, small_s = in_child(60, _hostile_find, 2_000)
    big, big_s = in_child(60, _hostile_find, 20_000)
    assert small == big == 0
    assert big_s < 30 and big_s < 100 * max(small_s, 0.01)


def test_find_refuses_what_it_cannot_search():
    trace = stepscope.load(CPU_SAMPLE)
    with pytest.raises(ValueError, match="nothing to find"):
        trace.find("")
    with pytest.raises(ValueError, match="longer than"):
        trace.find("x" * 5000)
    with pytest.raises(UserPatternError, match="backreferences"):
        trace.find(r"(a)\1", regex=True)


@pytest.mark.parametrize("text", ["ss", "SS", "straße", "İ", "\x00", "a"])
def test_the_joined_search_equals_a_search_name_by_name(text):
    names = pd.Index(["Straße", "STRASSE", "strasse", "İstanbul", "i̇", "a\x00b", "plain", "", "ǅ"])
    for case_sensitive in (False, True):
        query = FindQuery(text, case_sensitive=case_sensitive)
        fold = (lambda s: s) if case_sensitive else str.casefold
        needle = fold(text)
        want = [needle in fold(n) for n in names]
        assert name_hits(names, query).tolist() == want, (text, case_sensitive)


def test_matches_say_their_step_as_the_steps_count_their_kernels():
    trace = stepscope.load(VLLM)
    kernel = trace.window(steps=[0])["name"].iloc[0]
    found = trace.find(kernel, case_sensitive=True, kinds=["kernel"])
    exact = found[found["name"] == kernel]
    assert len(exact) == int(trace.window(steps=[0]).set_index("name").loc[kernel, "count"])
    assert (exact["step"] == 0).all()
    table = per_step(found, trace.steps)
    assert table["count"].sum() == len(found)
    assert count_line(found).startswith(f"{len(found):,} match")
    assert count_line(found.iloc[:0]) == "no match"


def test_find_on_a_frame_without_categorical_names():
    timeline = _hostile_timeline(50)
    events = timeline.events.assign(name=timeline.events["name"].astype(str))
    plain_names = Timeline(events=events, meta=timeline.meta)
    found = find_events(plain_names, work_index(timeline, stepscope.analyze(timeline)), FindQuery("!4"))
    assert sorted(found["name"]) == sorted(n for n in events["name"] if "!4" in n)
