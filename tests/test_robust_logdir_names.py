"""Issue 26, class 5: --logdir names that are not UTF-8, and trees too big to offer or sniff in full.

SYNTHETIC folders built here: a trace and a sub-folder whose names hold bytes that are not UTF-8 (the Analyze page
raised UnicodeEncodeError for every trace in the folder), 3000 folders and 3000 traces (the cap was per folder), and
many small JSON files that are not traces (each was read again on every 5-second refresh).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import streamlit as st

from stepscope.app import logdir
from stepscope.app.logdir import MAX_FILES, entry_key, list_folders, list_traces, rel_of_key, scan_traces, shown_name
from stepscope.app.logdir_panel import OPENED_KEY, open_trace, opened_sources
from stepscope.app.navigation import ANALYZE_KEY
from tests.app_pages import page_test
from tests.synthetic_traces import doc, synthetic_generation

BAD_FILE = b"bad\xff-trace.json"
BAD_FOLDER = b"run\xfe"
TRACE = json.dumps(doc(synthetic_generation(decode_steps=3))).encode()


def _write(root: Path, rel: bytes, data: bytes) -> None:
    path = os.fsencode(root) + b"/" + rel
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(data)


@pytest.fixture
def named(tmp_path: Path) -> Path:
    """SYNTHETIC: a good trace, a trace whose name is not UTF-8, and one inside a folder whose name is not."""
    root = tmp_path / "logs"
    _write(root, b"good/trace.json", TRACE)
    _write(root, BAD_FILE, TRACE)
    _write(root, BAD_FOLDER + b"/t.json", TRACE)
    return root


def test_names_that_are_not_utf8_are_listed_escaped_with_keys_that_round_trip(named):
    traces = list_traces(named)
    assert {t.shown for t in traces} == {"good/trace.json", "bad\\xff-trace.json", "run\\xfe/t.json"}
    for t in traces:
        t.key.encode("utf-8")  # what a widget carries: valid UTF-8
        assert rel_of_key(t.key) == t.rel_path and (named / t.rel_path).is_file()
    assert entry_key("good/trace.json") == "good/trace.json"  # ordinary names are their own keys
    assert "run\\xfe" in [shown_name(f) for f in list_folders(named)]


def test_an_entry_with_such_a_name_opens_as_a_source(named):
    state: dict = {}
    rel = os.fsdecode(BAD_FILE)
    key = open_trace(state, rel, named.resolve())
    (source,) = opened_sources(state, named.resolve())
    assert state[ANALYZE_KEY] == key == source.key and state[OPENED_KEY] == [rel]
    source.key.encode("utf-8")  # both reach the browser
    source.label.encode("utf-8")
    assert source.path.is_file()


def test_the_analyze_page_lists_and_opens_them(named, tmp_path, monkeypatch):
    """AppTest: the page lists every trace, and the one with a bad name and the one in a bad folder both open."""
    monkeypatch.setenv("STEPSCOPE_LOGDIR", str(named))
    monkeypatch.setenv("STEPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    st.cache_data.clear()
    at = page_test("analyze", 120).run()
    assert not at.exception
    folders = at.selectbox(key="logdir_folder")
    assert "run\\xfe" in folders.options
    pick = at.selectbox(key="logdir_pick")
    pick.select(next(o for o in pick.options if o.startswith("bad\\xff"))).run()
    at.button(key="logdir_open").click().run()
    assert not at.exception
    assert any(" events · " in c.value for c in at.caption)  # the opened trace's header
    folders = at.selectbox(key="logdir_folder")
    folders.select("run\\xfe").run()
    assert not at.exception
    at.button(key="logdir_open").click().run()
    assert not at.exception
    (trace_box,) = [s for s in at.selectbox if s.label == "Trace"]
    assert trace_box.value == "logdir:" + entry_key(os.fsdecode(BAD_FOLDER + b"/t.json"))


def test_the_cap_holds_across_folders(tmp_path):
    """3000 folders with a trace each: at most MAX_FILES of either are offered, and the listing says so."""
    root = tmp_path / "many"
    for i in range(3000):
        _write(root, f"run{i:04d}/trace.json".encode(), TRACE)
    assert len(list_folders(root)) == MAX_FILES + 1  # the root, then MAX_FILES sub-folders
    listing = scan_traces(root)
    assert len(listing.traces) == MAX_FILES
    assert any("newest 2,000 traces" in note for note in listing.notes)


def test_the_sniff_is_cached_by_stat_and_bounded_per_listing(tmp_path, monkeypatch):
    """Many small JSON files that are not traces: a listing reads at most MAX_NEW_SNIFFS new files, the next
    listings read only what is new or changed (path, size, mtime, inode)."""
    root = tmp_path / "json"
    for i in range(300):
        _write(root, f"d{i % 10}/not-a-trace-{i}.json".encode(), b'{"loss": %d}' % i)
    _write(root, b"d0/real.json", TRACE)
    reads: list[Path] = []
    real_head = logdir._head
    monkeypatch.setattr(logdir, "_head", lambda path: reads.append(path) or real_head(path))
    monkeypatch.setattr(logdir, "MAX_NEW_SNIFFS", 100)
    cache = logdir.SniffCache()
    first = scan_traces(root, sniffs=cache)
    assert len(reads) == 100 and any("not looked at yet" in n for n in first.notes)
    while any("not looked at yet" in n for n in scan_traces(root, sniffs=cache).notes):
        pass
    assert len(reads) == 301 and [t.name for t in scan_traces(root, sniffs=cache).traces] == ["real.json"]
    reads.clear()
    scan_traces(root, sniffs=cache)
    assert reads == []  # nothing changed: nothing read
    changed = root / "d3" / "not-a-trace-3.json"
    changed.write_bytes(TRACE)
    assert {t.name for t in scan_traces(root, sniffs=cache).traces} == {"real.json", "not-a-trace-3.json"}
    assert reads == [changed]
