"""Issue 39, item 6: the --logdir picker holds its cap of MAX_FILES traces over the whole tree, and a refresh on a
tree of many files that are not traces stays bounded: names skipped before any stat or read, only a bounded head
of a candidate read, the walk bounded by the entries it looks at, and one line saying when a bound was hit.

SYNTHETIC trees built here in tmp_path (tests/synthetic_traces.py for the traces)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from stepscope.app import logdir
from stepscope.app.logdir import MAX_FILES, scan_folders, scan_traces
from stepscope.app.logdir_panel import COMPARE_LISTED, listed_sources
from tests.synthetic_traces import doc, synthetic_generation

TRACE = json.dumps(doc(synthetic_generation(decode_steps=2))).encode()


def _write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


@pytest.fixture
def reads(monkeypatch) -> list[str]:
    """The files whose head a listing reads."""
    seen: list[str] = []
    real = logdir._head
    monkeypatch.setattr(logdir, "_head", lambda path: seen.append(Path(path).name) or real(path))
    return seen


def test_the_cap_holds_over_few_folders_of_many_traces_at_several_depths(tmp_path):
    """4 folders of 700 traces each, at depths 1 to 4: the whole tree offers MAX_FILES, and so do the Compare
    pickers' sources (their own, smaller cap)."""
    root = tmp_path / "logs"
    for k, folder in enumerate(("a", "b/c", "d/e/f", "g/h/i/j")):
        for i in range(700):
            _write(root / folder / f"t{k}-{i}.json", TRACE)
    listing = scan_traces(root, sniffs=logdir.SniffCache())
    assert len(listing.traces) == MAX_FILES and len(listing.entries) <= MAX_FILES
    assert len({t.rel_path for t in listing.traces}) == MAX_FILES  # no trace offered twice
    assert listing.notes == (f"only the newest {MAX_FILES:,} traces are listed: pick a sub-folder to see the others",)
    assert len(scan_traces(root, "d").traces) == 700  # a sub-folder lists its own, under the cap
    assert len(listed_sources({}, root)) == COMPARE_LISTED


def test_the_walk_is_bounded_by_the_entries_it_looks_at(tmp_path, monkeypatch, reads):
    """A tree of 1,200 files that are not traces and 30 folders: with the walk's bound at 500 entries the listing
    stops there, says so in one line, and reads no file whose name is not a trace's."""
    root = tmp_path / "logs"
    for i in range(1200):
        _write(root / f"d{i % 30:02d}" / f"step-{i}.txt", b"loss 0.1\n")
    _write(root / "d00" / "trace.json", TRACE)
    monkeypatch.setattr(logdir, "MAX_VISITED", 500)
    listing = scan_traces(root, sniffs=logdir.SniffCache())
    assert listing.notes == ("the walk stopped after 500 entries: pick a sub-folder to see the others",)
    assert all(name.endswith(".json") for name in reads)
    monkeypatch.setattr(logdir, "MAX_VISITED", 2000)
    assert scan_traces(root, sniffs=logdir.SniffCache()).notes == ()  # 1,231 entries: within this bound
    folders, notes = scan_folders(root)
    assert notes == () and len(folders) == 31
    monkeypatch.setattr(logdir, "MAX_VISITED", 20)
    folders, notes = scan_folders(root)
    assert notes == ("the folder walk stopped after 20 entries: the tree holds more",) and len(folders) <= 21


def test_the_whole_tree_is_listed_when_within_the_bounds(tmp_path, reads):
    root = tmp_path / "logs"
    for i in range(300):
        _write(root / f"d{i % 10}" / f"step-{i}.txt", b"x")
    _write(root / "d3" / "trace.json", TRACE)
    listing = scan_traces(root, sniffs=logdir.SniffCache())
    assert [t.rel_path for t in listing.traces] == ["d3/trace.json"] and listing.notes == ()
    assert reads == ["trace.json"]  # the 300 text files were skipped by their names


def test_names_a_trace_never_has_are_skipped_before_any_read(tmp_path, reads):
    """A model folder under the log directory: its config, tokenizer and weight index are JSON (even JSON that
    would sniff as a trace here), never read nor offered; a trace beside them is."""
    root = tmp_path / "logs"
    for name in ("config.json", "tokenizer.json", "run.json", "model.safetensors.index.json", "Config.JSON"):
        _write(root / "model" / name, TRACE)
    _write(root / "model" / "profile.json", TRACE)
    listing = scan_traces(root, sniffs=logdir.SniffCache())
    assert [t.name for t in listing.traces] == ["profile.json"]
    assert reads == ["profile.json"]


@pytest.mark.parametrize("packed", [False, True])
def test_a_candidate_is_sniffed_by_a_bounded_head(tmp_path, packed):
    """A big JSON file that is not a trace (8 MB; gzip'd, it inflates to that from a few KB): the sniff reads at
    most _HEAD_BYTES of it, and it is not offered."""
    body = b'{"metrics": [' + b"0.125, " * (8 << 20 >> 3) + b"1]}"
    name, data = ("big.json.gz", gzip.compress(body)) if packed else ("big.json", body)
    path = _write(tmp_path / "logs" / name, data)
    assert len(logdir._head(path)) <= logdir._HEAD_BYTES
    assert scan_traces(tmp_path / "logs", sniffs=logdir.SniffCache()).traces == []


def test_the_analyze_page_says_where_the_walk_stopped(tmp_path, monkeypatch):
    """AppTest: with the walk's bound below the tree's entries, the picker still offers what it found and says in
    one line, under the folder box and the trace list, that the walk stopped."""
    import streamlit as st

    from tests.app_pages import page_test

    root = tmp_path / "logs"
    _write(root / "a" / "trace.json", TRACE)
    for i in range(60):
        _write(root / "b" / f"step-{i}.txt", b"x")
    monkeypatch.setenv("STEPSCOPE_LOGDIR", str(root))
    monkeypatch.setenv("STEPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(logdir, "MAX_VISITED", 40)
    st.cache_data.clear()
    at = page_test("analyze", 120).run()
    assert not at.exception
    captions = [c.value for c in at.caption]
    assert any("The folder walk stopped after 40 entries" in c for c in captions), captions
    assert any("the walk stopped after 40 entries" in c for c in captions), captions
