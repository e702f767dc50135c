"""The app's trace cache: a logdir file is read once (its hash taken from the bytes the parse reads, never by a
separate pass over the file), reruns read nothing, the same content under two names is parsed once, and a
changed file is read again.

Traces here are SYNTHETIC (tests/synthetic_traces.py).
"""

from __future__ import annotations

import json
import os
import shutil

import pytest
import streamlit as st

from stepscope.app import cache as app_cache
from stepscope.parsers import load as loader
from stepscope.parsers.kineto.reader import read_chrome_trace
from stepscope.trace_cache import keys
from tests.synthetic_traces import doc, synthetic_generation


@pytest.fixture
def counted(tmp_path, monkeypatch):
    """Counts file reads, whole-file hashes and parses made through the on-disk cache."""
    monkeypatch.setenv("STEPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    st.cache_data.clear()
    st.cache_resource.clear()
    calls = {"read": [], "hash_file": [], "parse": 0}
    real_read, real_hash, real_parse = loader.read_file_bytes, keys.hash_file, loader._parse

    def read(path, *args, **kwargs):
        calls["read"].append(os.path.basename(path))
        return real_read(path, *args, **kwargs)

    def hash_file(path, *args, **kwargs):
        calls["hash_file"].append(os.path.basename(path))
        return real_hash(path, *args, **kwargs)

    def parse(*args, **kwargs):
        calls["parse"] += 1
        return real_parse(*args, **kwargs)

    monkeypatch.setattr(loader, "read_file_bytes", read)
    monkeypatch.setattr(keys, "hash_file", hash_file)
    monkeypatch.setattr(loader, "_parse", parse)
    yield calls
    st.cache_data.clear()
    st.cache_resource.clear()


def _trace(path, decode_steps: int = 4):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc(synthetic_generation(decode_steps=decode_steps))))
    return path


def test_a_file_is_read_once_and_never_hashed_on_its_own(tmp_path, counted):
    trace = _trace(tmp_path / "logs" / "a" / "trace.json")
    loaded = app_cache.load_path(trace)
    assert counted["read"] == ["trace.json"] and counted["hash_file"] == [] and counted["parse"] == 1
    assert loaded.digest == keys.hash_bytes(trace.read_bytes())  # the digest of the bytes, computed here apart
    expected = read_chrome_trace([trace.read_bytes()]).events  # an independent parse, outside every cache
    assert len(loaded.timeline.events) == len(expected) > 0
    assert loaded.timeline.events["ts"].tolist() == expected["ts"].tolist()
    again = app_cache.load_path(trace)  # a rerun: the stat lookups only
    assert counted["read"] == ["trace.json"] and counted["parse"] == 1 and again.digest == loaded.digest


def test_a_rerun_reads_nothing_even_without_the_on_disk_stat_index(tmp_path, counted, monkeypatch):
    trace = _trace(tmp_path / "trace.json")
    monkeypatch.setattr(keys, "remember_digest", lambda *args, **kwargs: None)  # a cache folder that keeps nothing
    first = app_cache.load_path(trace)
    second = app_cache.load_path(trace)
    assert counted["read"] == ["trace.json"] and counted["parse"] == 1 and first.digest == second.digest


def test_the_same_content_under_two_names_is_parsed_once(tmp_path, counted):
    first = _trace(tmp_path / "logs" / "a" / "trace.json")
    copy = tmp_path / "logs" / "b" / "copy.json"
    copy.parent.mkdir(parents=True)
    shutil.copyfile(first, copy)
    a = app_cache.load_path(first)
    b = app_cache.load_path(copy)
    assert a.digest == b.digest
    assert counted["parse"] == 1  # the copy is read to learn its hash, then its content is already known
    assert counted["read"] == ["trace.json", "copy.json"] and counted["hash_file"] == []


def test_a_changed_file_is_read_again(tmp_path, counted):
    trace = _trace(tmp_path / "trace.json", decode_steps=3)
    before = app_cache.load_path(trace)
    _trace(trace, decode_steps=6)  # new content: size and mtime change
    after = app_cache.load_path(trace)
    assert counted["read"] == ["trace.json", "trace.json"] and counted["parse"] == 2
    assert after.digest != before.digest
    assert len(after.analysis.steps) > len(before.analysis.steps)
