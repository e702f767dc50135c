"""Issue 27: big serving traces. The anatomy's module spans narrowed to the categorised ones give the same
enclosing category as every span would (checked against a brute-force walk on nested SYNTHETIC spans)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from stepscope.analysis.categories import CATEGORIES, categorised_rows, enclosing_categories


def _nested_spans(rng: np.random.Generator, n_top: int) -> list[tuple[int, int, int, str]]:
    """(tid, ts, dur, name) of properly nested spans on two threads: each top-level span holds a random tree."""
    names = ["nn.Module: LlamaRMSNorm_0", "nn.Module: LlamaAttention_0", "model.py(12): forward", "torch/nn/f.py: x"]
    spans = []

    def tree(tid: int, start: int, end: int, depth: int) -> None:
        spans.append((tid, start, end - start, names[rng.integers(len(names))]))
        if depth < 4 and end - start > 40:
            cut = start + 5
            while cut + 10 < end - 5:
                length = int(rng.integers(5, max(6, (end - cut) // 2)))
                tree(tid, cut, min(cut + length, end - 5), depth + 1)
                cut += length + int(rng.integers(1, 10))

    for tid in (1, 2):
        t = 0
        for _ in range(n_top):
            length = int(rng.integers(100, 400))
            tree(tid, t, t + length, 0)
            t += length + int(rng.integers(1, 50))
    return spans


def _brute_force(spans, point_tid, point_ts) -> np.ndarray:
    """The innermost span with a strong category holding each point (same thread, start <= ts < end)."""
    _, cats = _categories([s[3] for s in spans])
    strong = {"norm", "attention"}
    out = np.full(len(point_ts), -1, dtype=np.int64)
    for i, (tid, ts) in enumerate(zip(point_tid, point_ts, strict=True)):
        best = None
        for (s_tid, s_ts, s_dur, _), cat in zip(spans, cats, strict=True):
            inside = s_tid == tid and s_ts <= ts < s_ts + s_dur and cat in strong
            if inside and (best is None or s_dur < best[0]):
                best = (s_dur, cat)
        if best is not None:
            out[i] = CATEGORIES.index(best[1])
    return out


def _categories(names: list[str]):
    from stepscope.analysis.categories import categorize

    short, category = categorize(pd.Series(pd.Categorical(names)))
    return short, [str(c) for c in category]


def test_enclosing_categories_on_categorised_spans_only_matches_every_span() -> None:
    rng = np.random.default_rng(7)
    spans = _nested_spans(rng, 30)
    tid, ts, dur = (np.array([s[k] for s in spans], dtype=np.int64) for k in range(3))
    names = pd.Series(pd.Categorical([s[3] for s in spans]))
    ts, dur = ts * 2, dur * 2  # spans on even times, points on odd ones: no point starts with a span (see
    spans = [(t, 2 * a, 2 * d, name) for t, a, d, name in spans]  # categories._categorised_spans on ties)
    point_tid = rng.integers(1, 3, 400)
    point_ts = rng.choice(int(ts.max() + dur.max()) // 2, 400, replace=False) * 2 + 1  # no two at once, either
    got = enclosing_categories(tid, ts, dur, names, point_tid, point_ts)
    assert (got >= 0).sum() > 50  # the check is not vacuous: many points lie in a norm or attention module
    assert got.tolist() == _brute_force(spans, point_tid, point_ts).tolist()


def test_categorised_rows_keeps_only_strong_names_of_the_rows_asked() -> None:
    names = pd.Series(pd.Categorical(["nn.Module: LlamaRMSNorm_0", "model.py(12): forward", "aten::view", None]))
    rows = np.array([True, True, True, True])
    assert categorised_rows(names, rows).tolist() == [True, False, False, False]
    assert categorised_rows(names, np.array([False, True, True, True])).tolist() == [False, False, False, False]


# --- a SYNTHETIC serving trace tiled end to end, read in pieces, within the memory budget -------------------


def _tiled_generation(tiles: int, decode_steps: int = 9) -> dict:
    """SYNTHETIC: one eager generation (1 prefill + `decode_steps` decodes) tiled `tiles` times end to end, times
    and correlation ids shifted per copy, as bench/make_big_serving_trace.py tiles a real serving trace."""
    import copy

    from tests.synthetic_traces import doc, synthetic_generation

    source = synthetic_generation(decode_steps=decode_steps)
    span = max(e["ts"] + e.get("dur", 0) for e in source) - min(e["ts"] for e in source) + 1000.0
    events = []
    for tile in range(tiles):
        for event in source:
            event = copy.deepcopy(event)
            event["ts"] += tile * span
            if "correlation" in event.get("args", {}):
                event["args"]["correlation"] += tile * 1_000_000
            events.append(event)
    return doc(events)


@pytest.fixture
def in_pieces(monkeypatch):
    """Small files read in small pieces by two processes (the path a trace of gigabytes takes)."""
    from stepscope.parsers.kineto import pieces as split_decode

    monkeypatch.setattr(split_decode, "MIN_SPLIT_BYTES", 0)
    monkeypatch.setattr(split_decode, "PIECE_BYTES", 16 << 10)
    monkeypatch.setenv("STEPSCOPE_PARSE_WORKERS", "2")
    for name in ("MEMORY_BUDGET_MB", "MAX_EVENTS", "MAX_FILE_MB", "MAX_DECOMPRESSED_MB"):
        monkeypatch.delenv(f"STEPSCOPE_{name}", raising=False)


def test_a_tiled_trace_read_in_pieces_into_the_cache_keeps_every_step(tmp_path, in_pieces, monkeypatch):
    """30 tiles of 1 prefill + 9 decodes: 30 prefills and 270 decodes, read in pieces and written straight into
    the cache's entry (the Timeline mapped from it), the same frame as the one-process reader's."""
    import json

    from stepscope.analysis import analyze
    from stepscope.analysis.options import AnalysisOptions
    from stepscope.parsers.kineto.reader import read_chrome_trace
    from stepscope.trace_cache import timelines
    from stepscope.trace_cache.store import CacheStore
    from stepscope.trace_cache.timelines import open_trace_cached

    monkeypatch.setattr(timelines, "MAPPED_ROWS", 1)  # mapped back from its entry, as a big trace is
    data = json.dumps(_tiled_generation(30)).encode()
    path = tmp_path / "tiled.json"
    path.write_bytes(data)
    store = CacheStore(tmp_path / "cache")
    digest, timeline = open_trace_cached(path, store=store)
    assert len([p for _, _, p in store.entries() if p.suffix == ".arrow"]) == 1
    assert timelines.load_timeline(store, digest) is not None  # sealed as an entry saved whole is
    pd.testing.assert_frame_equal(timeline.events, read_chrome_trace(data).events)
    assert not timeline.events["ts"].to_numpy().flags.writeable  # a view of the mapped entry, not the frame built
    steps = analyze(timeline, AnalysisOptions()).steps
    assert steps["kind"].value_counts().to_dict() == {"decode": 270, "prefill": 30}
    assert steps["request"].nunique() == 30
    _, again = open_trace_cached(path, store=store)  # the entry written in place is a hit
    pd.testing.assert_frame_equal(again.events, timeline.events)


@pytest.mark.parametrize("read", ["one process", "in pieces"])
def test_columns_built_in_slices_are_the_columns_built_at_once(tmp_path, monkeypatch, read, request):
    """SYNTHETIC: a batch's duration events are turned into columns SLICE_EVENTS at a time; with slices of 7 events
    the Timeline is the one built at once: every column in file order, every code table (the categories) in the
    same order, and a lane's label the first the file gives it."""
    import json

    from stepscope.parsers import load_trace
    from stepscope.parsers.kineto import columns as chrome_trace

    if read == "in pieces":
        request.getfixturevalue("in_pieces")
    doc = _tiled_generation(4)
    pid = doc["traceEvents"][0]["pid"]
    doc["traceEvents"][5:5] = [{"ph": "M", "name": "process_name", "pid": pid, "args": {"name": "first label"}}]
    doc["traceEvents"].append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": "later label"}})
    ties = [
        {"ph": "X", "cat": "cpu_op", "name": f"tie {i}", "pid": pid, "tid": 1, "ts": 5.0, "dur": 1.0} for i in range(30)
    ]
    doc["traceEvents"][40:40] = ties  # one ts across several slices: the stable sort keeps file order
    path = tmp_path / "trace.json"
    path.write_bytes(json.dumps(doc).encode())
    monkeypatch.setattr(chrome_trace, "SLICE_EVENTS", 1 << 30)
    whole = load_trace(path)
    monkeypatch.setattr(chrome_trace, "SLICE_EVENTS", 7)
    sliced = load_trace(path)
    assert len(sliced.events) > 50 * 7  # many slices a batch (and a piece)
    pd.testing.assert_frame_equal(sliced.events, whole.events)
    assert sliced.meta == whole.meta and sliced.meta.process_names[pid] == "first label"
    names = sliced.events["name"].astype(str)
    assert names[names.str.startswith("tie ")].tolist() == [t["name"] for t in ties]


def test_a_real_serving_trace_without_annotations_tiled_keeps_one_step_per_copy(tmp_path, in_pieces):
    """The judged shape of issue 27 (vLLM V1, piecewise graphs, with_stack, no annotations, tiled end to end): the
    real gpt-oss trace with its one vLLM step annotation taken out, tiled 6 times by the bench's own tiler and read
    in pieces. Its truth is that annotation (vLLM's `execute_context_..._generation_...`: one mixed step a copy);
    without it the steps come from the trace's structure, vLLM's execute_model span, one per copy (the source
    alone, one forward, cannot say which span repeats: it is taken as 25 graph-replay steps, flagged)."""
    import gzip
    import json

    from bench import make_big_serving_trace as tiler
    from stepscope.analysis import analyze
    from stepscope.analysis.options import AnalysisOptions
    from stepscope.parsers import load_trace

    source = tiler.load_source(tiler.SOURCE)
    annotations = [e for e in source["traceEvents"] if e.get("cat") == "user_annotation"]
    assert [e["name"].startswith("execute_") and "_generation_" in e["name"] for e in annotations] == [True]
    source["traceEvents"] = [e for e in source["traceEvents"] if e.get("cat") != "user_annotation"]
    stripped = tmp_path / "no_annotations.json.gz"
    with gzip.open(stripped, "wt") as fh:
        json.dump(source, fh)
    out = tmp_path / "tiled.json"
    tiler.build(out, copies=6, source=stripped)
    analysis = analyze(load_trace(out), AnalysisOptions())
    steps = analysis.steps
    assert len(steps) == 6 and analysis.segmentation.method == "host-forwards"
    assert "execute_model" in " ".join(analysis.segmentation.evidence)
    _, _, shift_ns, _ = tiler.plan(source)
    first = int(steps["start_ns"].min())
    assert sorted((steps["start_ns"] - first) // shift_ns) == list(range(6))  # one step in each copy


def test_the_memory_budget_not_the_file_limit_bounds_a_read_in_pieces(tmp_path, in_pieces, monkeypatch):
    """A file over STEPSCOPE_MAX_FILE_MB still opens in pieces (its bytes are never held); the budget refuses it
    in one line once its events do not fit; a gzip of it, read whole, keeps the file limit."""
    import gzip
    import json

    from stepscope.parsers import TraceError, load_trace
    from stepscope.parsers.memory_budget import BYTES_PER_EVENT

    data = json.dumps(_tiled_generation(60)).encode()
    assert len(data) > 1 << 20
    path = tmp_path / "tiled.json"
    path.write_bytes(data)
    monkeypatch.setenv("STEPSCOPE_MAX_FILE_MB", "1")
    assert len(load_trace(path).events) == len(json.loads(data)["traceEvents"])
    zipped = tmp_path / "tiled.json.gz"
    zipped.write_bytes(gzip.compress(data))
    monkeypatch.setenv("STEPSCOPE_MAX_DECOMPRESSED_MB", "1")
    with pytest.raises(TraceError, match="beyond the 1 MB decompression limit"):  # the bomb guard stays
        load_trace(zipped)
    monkeypatch.setenv("STEPSCOPE_MEMORY_BUDGET_MB", "1")  # 1 MiB: about 5,000 events at BYTES_PER_EVENT
    assert len(json.loads(data)["traceEvents"]) > (1 << 20) // BYTES_PER_EVENT
    with pytest.raises(TraceError, match="STEPSCOPE_MEMORY_BUDGET_MB") as refused:
        load_trace(path)
    assert "\n" not in str(refused.value) and "memory budget" in str(refused.value)


def test_the_memory_budget_prices_long_distinct_names(tmp_path, in_pieces, monkeypatch):
    """Issue 39: a few hundred events whose distinct names are long are priced by their bytes (times the copies a
    read keeps), not at 200 bytes an event: refused in one line naming the setting under a budget their events alone
    fit in, while the same events with short names open; within a budget that holds the names, they open too.
    SYNTHETIC events."""
    import json

    from stepscope.parsers import TraceError, load_trace
    from stepscope.parsers.memory_budget import STRING_COPIES

    def trace(name_bytes: int):
        events = [
            {"ph": "X", "cat": "cpu_op", "name": f"op {i} " + "x" * name_bytes, "pid": 1, "tid": 1, "ts": i, "dur": 1}
            for i in range(400)
        ]
        path = tmp_path / f"names-{name_bytes}.json"
        path.write_text(json.dumps({"traceEvents": events}))
        return path

    long_names, short_names = trace(8000), trace(8)
    monkeypatch.setenv("STEPSCOPE_MEMORY_BUDGET_MB", "1")  # about 5,000 events; 400 names of 8 KB cost ~25 MB
    assert len(load_trace(short_names).events) == 400
    with pytest.raises(TraceError, match="STEPSCOPE_MEMORY_BUDGET_MB") as refused:
        load_trace(long_names)
    assert "\n" not in str(refused.value) and "distinct names" in str(refused.value)
    monkeypatch.setenv("STEPSCOPE_MEMORY_BUDGET_MB", str(400 * 8100 * STRING_COPIES // (1 << 20) + 2))
    assert len(load_trace(long_names).events) == 400


def test_the_memory_budget_defaults_to_a_quarter_of_ram_and_refuses_a_bad_value(monkeypatch):
    from stepscope.parsers import TraceError
    from stepscope.parsers.limits import ReadLimits
    from stepscope.parsers.memory_budget import BYTES_PER_EVENT, machine_memory_bytes

    monkeypatch.delenv("STEPSCOPE_MEMORY_BUDGET_MB", raising=False)
    monkeypatch.delenv("STEPSCOPE_MAX_EVENTS", raising=False)
    limits = ReadLimits.from_env()
    assert limits.memory_budget_bytes == machine_memory_bytes() // 4
    assert limits.events_in_pieces == machine_memory_bytes() // 4 // BYTES_PER_EVENT
    monkeypatch.setenv("STEPSCOPE_MEMORY_BUDGET_MB", "512")
    assert ReadLimits.from_env().memory_budget_bytes == 512 << 20
    monkeypatch.setenv("STEPSCOPE_MAX_EVENTS", "1000")  # an event limit set on purpose bounds the pieces too
    assert ReadLimits.from_env().events_in_pieces == 1000
    for bad in ("lots", "-5", "0", "1.5"):
        monkeypatch.setenv("STEPSCOPE_MEMORY_BUDGET_MB", bad)
        with pytest.raises(TraceError, match="STEPSCOPE_MEMORY_BUDGET_MB"):
            ReadLimits.from_env()


def test_the_command_line_shows_how_much_is_read_on_a_terminal_only(tmp_path, in_pieces):
    import io
    import json

    from stepscope.analysis.front_door import CachePolicy, open_report
    from stepscope.app.cli.read_progress import read_progress_for
    from stepscope.trace_cache.store import CacheStore

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert read_progress_for("t.json", io.StringIO()) is None  # a pipe or a file: nothing but the answer
    path = tmp_path / "tiled\x1b[31m.json"
    path.write_bytes(json.dumps(_tiled_generation(10)).encode())
    shown = Terminal()
    hook = read_progress_for(path.name, shown)
    answer = open_report(path, cache=CachePolicy(store=CacheStore(tmp_path / "cache")), read_fraction=hook)
    assert json.loads(answer.text)["summary"]["decode_steps"] == 90
    lines = shown.getvalue().split("\r")[1:]
    assert lines[0].startswith("reading tiled?[31m.json: ") and "\x1b[31m" not in shown.getvalue()
    percents = [int(line.rsplit(" ", 1)[1].rstrip("%")) for line in lines[:-1]]
    assert percents == sorted(percents) and len(percents) >= 2  # it moved while the pieces were read
    assert lines[-1] == "\033[K"  # cleared once read


def _tiny_events_file(path, min_bytes: int):
    """SYNTHETIC hostile input: a plain JSON trace over `min_bytes` of the smallest duration events there are."""
    event = b'{"ph":"X","ts":1,"dur":1}'
    count = min_bytes // (len(event) + 1) + 1
    path.write_bytes(b'{"traceEvents":[' + b",".join([event] * count) + b"]}")
    return count


def test_a_hostile_count_over_the_budget_is_one_line_from_the_command_line(tmp_path):
    """Read in pieces for real (a file over split_decode.MIN_SPLIT_BYTES), under `ulimit -v 3000000`: refused by the
    budget in one line, exit 2, before its frame is built; within a budget that holds it, it opens."""
    from stepscope.parsers.kineto.pieces import MIN_SPLIT_BYTES
    from tests.bounded_cli import assert_sane_outcome, run_bounded

    path = tmp_path / "tiny.json"
    count = _tiny_events_file(path, MIN_SPLIT_BYTES + (2 << 20))
    refused = run_bounded("analyze", path, "--json", cache_dir=tmp_path / "c", env={"STEPSCOPE_MEMORY_BUDGET_MB": "64"})
    assert_sane_outcome(refused)
    assert refused.status == 2 and "STEPSCOPE_MEMORY_BUDGET_MB" in refused.error_lines[0], refused.stderr
    said = int(refused.error_lines[0].split("about ", 1)[1].split(" ", 1)[0].replace(",", ""))
    assert 0.8 * count <= said <= 1.2 * count  # the estimate (from the first piece) is of the right size
    opened = run_bounded("analyze", path, "--json", cache_dir=tmp_path / "c", timeout=60)
    assert_sane_outcome(opened)
    assert opened.status == 0 and '"events":' in opened.stdout


def _memory_under_address_limit(limit: int) -> int:
    import resource

    from stepscope.parsers.memory_budget import machine_memory_bytes

    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
    return machine_memory_bytes()


def test_the_default_budget_stays_within_an_address_space_limit():
    from tests.bounded_cli import ADDRESS_SPACE_BYTES, in_child

    assert in_child(20, _memory_under_address_limit, ADDRESS_SPACE_BYTES) == ADDRESS_SPACE_BYTES  # ulimit -v 3000000


def test_a_cold_open_in_pieces_hashes_the_file_once(tmp_path, in_pieces, monkeypatch):
    """The answer's look-up hashes the file and records it in the stat index; the read in pieces that follows
    takes that digest for the same file state instead of hashing the bytes again (0.5 s of a core at 1.3 GB),
    and the entry it writes is the one a later open finds."""
    import json
    import os

    from stepscope.analysis import front_door
    from stepscope.trace_cache import keys, timelines

    hashed = []
    real = keys.hash_file_sampled

    def counted(path):
        hashed.append(path)
        return real(path)

    monkeypatch.setattr(keys, "hash_file_sampled", counted)
    monkeypatch.setattr(timelines, "hash_file_sampled", counted)
    monkeypatch.setenv("STEPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "tiled.json"
    path.write_text(json.dumps(_tiled_generation(6)))
    first = front_door.open_report(path)
    assert len(hashed) == 1
    assert json.loads(first.text)["summary"]["decode_steps"] == 54
    hashed.clear()
    os.utime(path, ns=(1, 1))  # a new stat, the same bytes: hashed again once, the answer found by content
    again = front_door.open_report(path)
    assert (again.cached, again.text) == (True, first.text)
    assert len(hashed) == 1
