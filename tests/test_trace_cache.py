"""The on-disk cache: exact round trips, damaged and foreign entries rebuilt, LRU bound, concurrent writers,
and a warm `analyze` that imports no pandas. Traces are SYNTHETIC (built here) or the shipped samples."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pandas as pd
import pytest

from stepscope.parsers import load as loader
from stepscope.parsers import load_trace
from stepscope.trace_cache import column_file, keys, timelines
from stepscope.trace_cache.results import cached_result, store_result
from stepscope.trace_cache.store import CacheStore
from tests.conftest import ROOT, real_trace
from tests.synthetic_memory import CPU, memory_event
from tests.synthetic_traces import synthetic_generation, write

SAMPLE = ROOT / "sample_traces" / "cpu_tiny-llama_eager" / "trace.json.gz"


def _assert_same(a, b) -> None:
    pd.testing.assert_frame_equal(a.events, b.events)  # dtypes, category order, values
    assert a.meta == b.meta
    assert (a.memory is None) == (b.memory is None)
    if a.memory is not None:
        pd.testing.assert_frame_equal(a.memory, b.memory)


@pytest.fixture
def store(tmp_path) -> CacheStore:
    return CacheStore(tmp_path / "cache")


@pytest.fixture
def trace(tmp_path) -> Path:
    (tmp_path / "t").mkdir()
    return write(tmp_path / "t" / "trace.json", synthetic_generation(decode_steps=8))


def test_round_trip_is_exact(store, trace):
    fresh = load_trace(trace)
    cold = timelines.load_trace_cached(trace, store=store)
    assert len(list((store.root / "timelines").iterdir())) == 1
    warm = timelines.load_trace_cached(trace, store=store)
    _assert_same(fresh, cold)
    _assert_same(fresh, warm)
    assert not warm.events["ts"].to_numpy().flags.writeable  # mapped from the file, not copied


def timelines_policy(store):
    from stepscope.analysis.front_door import CachePolicy

    return CachePolicy(store=store)


def test_round_trip_of_a_real_sample_with_run_json(store):
    if not SAMPLE.exists():
        pytest.skip("no shipped sample")
    fresh = load_trace(SAMPLE)
    timelines.load_trace_cached(SAMPLE, store=store)
    warm = timelines.load_trace_cached(SAMPLE, store=store)
    _assert_same(fresh, warm)
    assert "run" not in warm.meta.extra  # the run.json beside it is the front door's to read, once per open
    from stepscope.analysis.front_door import open_trace

    assert open_trace(SAMPLE, cache=timelines_policy(store)).timeline.meta.extra["run"].device_type == "cpu"


def test_round_trip_keeps_launch_geometry_and_rank_facts(store, monkeypatch):
    """A real A100 trace with kernel grid/block columns and distributedInfo in meta.extra: cached (not silently
    skipped as uncacheable) and served back exactly, without parsing."""
    path = real_trace("hta_training_cudagraph_a100.json.gz")
    fresh = load_trace(path)
    assert fresh.events["grid"].gt(0).any() and fresh.events["block"].gt(0).any()
    assert fresh.meta.extra["distributed"]["world_size"] == 16
    timelines.load_trace_cached(path, store=store)
    assert len(list((store.root / "timelines").iterdir())) == 1
    monkeypatch.setattr(loader, "_parse", lambda *_: pytest.fail("parsed although cached"))
    _assert_same(fresh, timelines.load_trace_cached(path, store=store))


def test_round_trip_keeps_the_memory_table(store, tmp_path, monkeypatch):
    """A SYNTHETIC trace with [memory] events on two devices: the memory table comes back exact, mapped from the one
    entry (not copied, not parsed); an entry whose memory part is cut off is rebuilt, never served without it."""
    events = synthetic_generation(decode_steps=8)
    events += [memory_event(1000.0 + 3 * i, 512, 4096 + 512 * i, 1 << 21) for i in range(300)]
    events += [memory_event(1001.0 + 5 * i, 16, 16 * (i + 1), 0, device_type=CPU) for i in range(100)]
    path = write(tmp_path / "memory.json", events)
    fresh = load_trace(path)
    assert fresh.memory is not None and len(fresh.memory) == 400
    timelines.load_trace_cached(path, store=store)
    (entry,) = (store.root / "timelines").iterdir()
    with monkeypatch.context() as m:
        m.setattr(loader, "_parse", lambda *_: pytest.fail("parsed although cached"))
        warm = timelines.load_trace_cached(path, store=store)
    _assert_same(fresh, warm)
    assert not warm.memory["allocated"].to_numpy().flags.writeable  # a view of the mapped entry
    whole = entry.read_bytes()
    entry.write_bytes(whole[: len(whole) - 40])  # the memory table's end and the trailer gone
    _assert_same(fresh, timelines.load_trace_cached(path, store=store))
    assert entry.read_bytes() == whole  # rebuilt


def test_a_hit_does_not_parse(store, trace, monkeypatch):
    timelines.load_trace_cached(trace, store=store)
    expected = len(load_trace(trace).events)

    def no_parse(*_):
        raise AssertionError("parsed although cached")

    monkeypatch.setattr(loader, "_parse", no_parse)
    assert len(timelines.load_trace_cached(trace, store=store).events) == expected


def test_corrupt_entry_is_rebuilt(store, trace):
    timelines.load_trace_cached(trace, store=store)
    (entry,) = (store.root / "timelines").iterdir()
    data = bytearray(entry.read_bytes())
    entry.write_bytes(bytes(data[: len(data) // 2]))  # truncated
    calls = []
    real_parse = loader._parse
    loader._parse = lambda owned, *args: calls.append(1) or real_parse(owned, *args)
    try:
        again = timelines.load_trace_cached(trace, store=store)
    finally:
        loader._parse = real_parse
    assert calls == [1]
    _assert_same(load_trace(trace), again)
    assert entry.stat().st_size == len(data)  # rewritten whole


def test_garbage_entry_is_rebuilt(store, trace):
    timelines.load_trace_cached(trace, store=store)
    (entry,) = (store.root / "timelines").iterdir()
    entry.write_bytes(b"not arrow at all" * 100)
    _assert_same(load_trace(trace), timelines.load_trace_cached(trace, store=store))


def test_a_changed_value_in_an_entry_is_a_miss(store, trace):
    """A flipped byte inside a column (a timestamp, not a dictionary code or an offset) passes Arrow's validation:
    the entry's seal makes it a miss, so the answer is the file's, never the damaged entry's."""
    fresh = load_trace(trace)
    timelines.load_trace_cached(trace, store=store)
    (entry,) = (store.root / "timelines").iterdir()
    data = bytearray(entry.read_bytes())
    ts = fresh.events["ts"].to_numpy()
    needle = ts[len(ts) // 2].tobytes()  # int64, little-endian, as Arrow stores it
    at = data.find(needle)
    assert at > 0
    data[at] ^= 0x01  # the timestamp moves by 1 ns: still a valid Arrow file
    entry.write_bytes(bytes(data))
    assert timelines.load_timeline(store, keys.hash_file(trace)) is None
    _assert_same(fresh, timelines.load_trace_cached(trace, store=store))


def test_parser_version_bump_is_a_miss(store, trace, monkeypatch):
    timelines.load_trace_cached(trace, store=store)
    monkeypatch.setattr(keys, "PARSER_VERSION", keys.PARSER_VERSION + 1)
    monkeypatch.setattr(column_file, "PARSER_VERSION", keys.PARSER_VERSION)
    digest = keys.known_digest(store, trace)
    assert timelines.load_timeline(store, digest) is None
    timelines.load_trace_cached(trace, store=store)
    assert len(list((store.root / "timelines").iterdir())) == 2  # one per version


def test_entry_of_another_version_under_this_name_is_ignored(store, trace, monkeypatch):
    timeline = timelines.load_trace_cached(trace, store=store)
    digest = keys.known_digest(store, trace)
    monkeypatch.setattr(column_file, "PARSER_VERSION", 999)  # written as version 999 under today's name
    timelines.save_timeline(store, digest, timeline)
    monkeypatch.undo()
    assert timelines.load_timeline(store, digest) is None
    assert not list((store.root / "timelines").glob(f"{digest}*"))  # dropped, to be rebuilt


def test_changed_file_is_not_served_from_the_old_entry(store, tmp_path):
    (tmp_path / "x").mkdir()
    path = write(tmp_path / "x" / "trace.json", synthetic_generation(decode_steps=4))
    first = timelines.load_trace_cached(path, store=store)
    time.sleep(0.01)
    write(path, synthetic_generation(decode_steps=9))
    second = timelines.load_trace_cached(path, store=store)
    assert len(second.events) > len(first.events)
    _assert_same(load_trace(path), second)


def test_lru_eviction_under_a_tiny_bound(tmp_path):
    store = CacheStore(tmp_path / "c", max_bytes=3500)
    for i in range(3):
        store.put_bytes("results", f"e{i}.json", bytes(1000))
        os.utime(store.entry("results", f"e{i}.json"), (1000 + i, 1000 + i))
    # e0 is used now, so e1 is the least recently used when e3 arrives
    assert store.get("results", "e0.json") is not None
    store.put_bytes("results", "e3.json", bytes(1000))
    left = sorted(p.name for p in (tmp_path / "c" / "results").iterdir())
    assert left == ["e0.json", "e2.json", "e3.json"]
    assert store.size_bytes() <= 3500


def _write_many(args) -> int:
    root, worker = args
    store = CacheStore(root)
    payload = json.dumps({"same": "content", "n": list(range(20000))}).encode()
    for _ in range(30):
        assert store.put_bytes("results", "shared.json", payload) is not None
    return worker


def test_concurrent_writers_leave_one_whole_entry(tmp_path):
    root = tmp_path / "c"
    with ProcessPoolExecutor(4) as pool:
        assert sorted(pool.map(_write_many, [(root, w) for w in range(4)])) == [0, 1, 2, 3]
    names = [p.name for p in (root / "results").iterdir()]
    assert names == ["shared.json"]  # no temporary files left behind
    assert json.loads((root / "results" / "shared.json").read_bytes())["n"][-1] == 19999


def test_concurrent_timeline_writers(tmp_path, trace):
    root = tmp_path / "c"
    with ProcessPoolExecutor(3) as pool:
        lengths = list(pool.map(_load_len, [(str(root), str(trace))] * 6))
    assert len(set(lengths)) == 1
    _assert_same(load_trace(trace), timelines.load_trace_cached(trace, store=CacheStore(root)))


def _load_len(args) -> int:
    root, trace = args
    return len(timelines.load_trace_cached(trace, store=CacheStore(root)).events)


# The smallest body of the analyze --json contract's shape (trace_cache/results.py serves nothing else).
RESULT = json.dumps(
    {
        "format": "kineto-json",
        "device": None,
        "events": 1,
        "requests": 0,
        "segmentation": {"method": "none", "confidence": 0.0, "warnings": [], "evidence": []},
        "steps": [],
        "summary": {},
        "findings": [],
    }
)


def _text(trace, key, store):
    hit = cached_result(trace, key, store)
    return None if hit is None else hit.text


def test_result_cache_keyed_and_checksummed(store, trace):
    timelines.load_trace_cached(trace, store=store)  # records the file's digest
    assert _text(trace, "key1", store) is None
    assert store_result(trace, "key1", RESULT, ["note: x"], store=store)
    assert _text(trace, "key1", store) == RESULT
    assert cached_result(trace, "key1", store).notes == ("note: x",)
    assert _text(trace, "key2", store) is None
    (entry,) = (store.root / "results").iterdir()
    entry.write_bytes(entry.read_bytes().replace(b'"events": 1', b'"events": 2'))  # damaged body
    assert _text(trace, "key1", store) is None
    assert not entry.exists()


def test_result_key_follows_the_run_json(trace):
    from stepscope.analysis.front_door import NOTHING_GIVEN, answer_key
    from stepscope.analysis.options import AnalysisOptions
    from stepscope.parsers.limits import ReadLimits

    before = answer_key(trace, AnalysisOptions(), NOTHING_GIVEN, ReadLimits.from_env())
    (trace.parent / "run.json").write_text('{"device": "x"}')
    assert answer_key(trace, AnalysisOptions(), NOTHING_GIVEN, ReadLimits.from_env()) != before


def _cli(args, cache: Path, code: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, STEPSCOPE_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "app.cli", *args] if code is None else [sys.executable, "-c", code, *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)


def test_warm_cli_imports_no_pandas_and_prints_the_same(tmp_path, trace):
    cache = tmp_path / "cache"
    cold = _cli(["analyze", str(trace), "--json"], cache)
    assert cold.returncode == 0, cold.stderr
    probe = (
        "import sys\n"
        "from stepscope.app.cli.main import main\n"  # main(), not the entry point: that leaves with os._exit
        "code = main(sys.argv[1:])\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('pandas', 'numpy', 'pyarrow'))\n"
        "print('HEAVY', heavy, file=sys.stderr)\n"
    )
    warm = _cli(["analyze", str(trace), "--json"], cache, code=probe)
    assert "HEAVY []" in warm.stderr, warm.stderr
    assert warm.stdout == cold.stdout
    assert json.loads(warm.stdout)["events"] == len(load_trace(trace).events)
    uncached = _cli(["analyze", str(trace), "--json", "--no-cache"], tmp_path / "other", code=probe)
    assert "pandas" in uncached.stderr and uncached.stdout == cold.stdout
    assert not (tmp_path / "other").exists()  # --no-cache writes nothing


def test_warm_cli_text_output_and_new_options(tmp_path, trace):
    cache = tmp_path / "cache"
    _cli(["analyze", str(trace), "--json"], cache)
    text = _cli(["analyze", str(trace)], cache)
    assert text.returncode == 0 and "device" in text.stdout
    other = _cli(["analyze", str(trace), "--json", "--gap-threshold-us", "50"], cache)
    direct = _cli(["analyze", str(trace), "--json", "--gap-threshold-us", "50", "--no-cache"], cache)
    assert other.stdout == direct.stdout


def test_bad_file_still_fails_cleanly_with_the_cache(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [')
    out = _cli(["analyze", str(bad), "--json"], tmp_path / "cache")
    assert out.returncode == 2 and out.stderr.startswith("error:")


def test_every_input_is_in_the_key_so_no_answer_is_served_for_another(tmp_path):
    """--categories (a file whose content may change) and --model are in the result key (the rules by their
    patterns, the model by its shape): an edited rules file is honoured, going back to the first content serves
    the first answer, and each input has an entry of its own. SYNTHETIC trace: kernel_0..kernel_4."""
    (tmp_path / "t").mkdir()
    trace = write(tmp_path / "t" / "trace.json", synthetic_generation(decode_steps=3, kernels_per_step=5))
    cache = tmp_path / "cache"
    plain = _cli(["analyze", str(trace), "--json"], cache)
    assert plain.returncode == 0
    assert len(list((cache / "results").iterdir())) == 1
    rules = tmp_path / "mine.toml"
    answers = []
    for pattern, gemm_kernels in (("^kernel_[0-2]$", 3), ("^kernel_0$", 1), ("^kernel_[0-2]$", 3)):  # same path
        rules.write_text(f'gemm = ["{pattern}"]\n')
        out = _cli(["analyze", str(trace), "--json", "--categories", str(rules)], cache)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["steps"][-1]["categories"]["gemm"]["kernels"] == gemm_kernels
        answers.append(out.stdout)
    assert answers[0] == answers[2] != answers[1]
    model = _cli(["analyze", str(trace), "--json", "--model", "tiny-llama"], cache)
    assert model.returncode == 0, model.stderr
    assert "memory bandwidth" in json.loads(model.stdout)["summary"]["anatomy"]["roofline"]["status"]
    assert len(list((cache / "results").iterdir())) == 4  # plain, two rule files, the model
    assert _cli(["analyze", str(trace), "--json"], cache).stdout == plain.stdout  # still the plain answer
    probe = (
        "import sys\nfrom stepscope.app.cli.main import main\nmain(sys.argv[1:])\n"
        "print('PANDAS', 'pandas' in sys.modules, file=sys.stderr)\n"
    )
    warm = _cli(["analyze", str(trace), "--json"], cache, code=probe)
    assert "PANDAS False" in warm.stderr, warm.stderr
    folder = _cli(["analyze", str(trace.parent), "--json"], cache)  # a folder of one trace: that trace's answer
    assert folder.stdout == plain.stdout


def test_a_lowered_read_limit_refuses_a_cached_trace(tmp_path, trace, monkeypatch):
    """Entries are per read limits: a trace cached under the defaults is refused (one line, exit 2) once
    STEPSCOPE_MAX_EVENTS is below its event count, by the library and by a warm command line alike."""
    from stepscope.parsers import TraceError
    from stepscope.parsers.limits import ReadLimits

    cache = tmp_path / "cache"
    events = json.loads(trace.read_text())["traceEvents"]
    assert _cli(["analyze", str(trace), "--json"], cache).returncode == 0  # cached: timeline and result
    env_cli = dict(
        os.environ, STEPSCOPE_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT), STEPSCOPE_MAX_EVENTS=str(len(events) - 1)
    )
    out = subprocess.run(
        [sys.executable, "-m", "app.cli", "analyze", str(trace), "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env_cli,
        timeout=120,
    )
    assert out.returncode == 2 and out.stderr.startswith("error:") and "event limit" in out.stderr, out.stderr
    store = CacheStore(cache)
    limits = ReadLimits.from_env()
    with pytest.raises(TraceError, match="event limit"):
        timelines.load_trace_cached(
            trace, ReadLimits(limits.max_file_bytes, limits.max_decompressed_bytes, len(events) - 1), store=store
        )
    assert len(timelines.load_trace_cached(trace, store=store).events) == len(load_trace(trace).events)


def test_warm_cli_leaves_bad_option_values_to_the_full_command(tmp_path, trace):
    """With a warm cache, option values the analysis refuses still end as one `error:` line and status 2."""
    cache = tmp_path / "cache"
    assert _cli(["analyze", str(trace), "--json"], cache).returncode == 0
    for value in ("inf", "nan", "-1", "1e300"):
        out = _cli(["analyze", str(trace), "--json", f"--gap-threshold-us={value}"], cache)
        assert out.returncode == 2 and out.stderr.startswith("error: --gap-threshold-us"), (value, out.stderr)
        assert len(out.stderr.splitlines()) == 1 and out.stdout == ""


def test_open_hands_back_the_content_hash(store, trace):
    """Callers keying their own caches by content (the app) get the hash from the one read of the file."""
    digest, cold = timelines.open_trace_cached(trace, store=store)
    assert digest == keys.hash_bytes(trace.read_bytes()) == keys.hash_file(trace)
    again, warm = timelines.open_trace_cached(trace, store=store)
    assert again == digest
    _assert_same(cold, warm)
    assert not warm.events["ts"].to_numpy().flags.writeable  # mapped from the entry


def test_the_fast_path_never_hashes_a_file_it_does_not_know(tmp_path, trace, monkeypatch):
    """A first open is answered by the full command, which reads the file once; the fast path only looks up the
    stat index (hashing an unknown file there would read it twice)."""
    from stepscope.app import cli_cached

    monkeypatch.setenv("STEPSCOPE_CACHE_DIR", str(tmp_path / "cache"))

    def no_hashing(*_):
        raise AssertionError("hashed")

    monkeypatch.setattr(keys, "hash_file", no_hashing)
    assert cli_cached.serve_cached_analyze(["analyze", str(trace), "--json"]) is None


def test_rank_folders_and_the_notebook_api_read_through_the_cache(tmp_path, monkeypatch):
    """`analyze DIR` caches every rank's Timeline; stepscope.load caches too (and cache=False leaves it alone)."""
    import stepscope
    from stepscope.app.cli.main import main

    folder = ROOT / "sample_traces" / "cpu_tiny-llama_tp2_eager"
    cache = tmp_path / "cache"
    monkeypatch.setenv("STEPSCOPE_CACHE_DIR", str(cache))
    with open(os.devnull, "w") as sink:
        old, sys.stdout = sys.stdout, sink
        try:
            assert main(["analyze", str(folder), "--json"]) == 0
        finally:
            sys.stdout = old
    ranks = [p for p in folder.iterdir() if ".trace." in p.name]
    assert len(ranks) >= 2
    assert len(list((cache / "timelines").iterdir())) == len(ranks)
    single = tmp_path / "single"
    monkeypatch.setenv("STEPSCOPE_CACHE_DIR", str(single))
    stepscope.load(SAMPLE, cache=False)
    assert not (single / "timelines").exists() or not any((single / "timelines").iterdir())
    stepscope.load(SAMPLE)
    assert len(list((single / "timelines").iterdir())) == 1


@pytest.fixture
def pieces_from_disk(monkeypatch):
    """Small files take the path of a big plain JSON file: read in pieces from disk by two processes."""
    from stepscope.parsers.kineto import pieces as split_decode

    monkeypatch.setattr(split_decode, "MIN_SPLIT_BYTES", 0)
    monkeypatch.setattr(split_decode, "PIECE_BYTES", 4096)
    monkeypatch.setenv("STEPSCOPE_PARSE_WORKERS", "2")
    return split_decode


def test_a_file_read_in_pieces_is_hashed_meanwhile_and_cached(store, trace, pieces_from_disk, monkeypatch):
    """The digest taken while the child decodes is the digest of the bytes; the stat index and the entry are written."""
    taken = []
    from stepscope.parsers.kineto import two_processes

    monkeypatch.setattr(two_processes, "decode_file_in_two", _recording(two_processes.decode_file_in_two, taken))
    digest, cold = timelines.open_trace_cached(trace, store=store)
    assert taken  # the pieces path was used
    assert digest == keys.hash_bytes(trace.read_bytes())
    assert keys.known_digest(store, trace) == digest
    again, warm = timelines.open_trace_cached(trace, store=store)
    assert again == digest and len(taken) == 1  # the second open is the entry, not a parse
    _assert_same(cold, warm)
    _assert_same(load_trace(trace), cold)


def test_same_content_elsewhere_stops_the_parse(store, trace, tmp_path, pieces_from_disk, monkeypatch):
    """A copy of a cached trace: its hash, taken while the child decodes, finds the entry and the parse stops."""
    digest, first = timelines.open_trace_cached(trace, store=store)
    copy = tmp_path / "copy.json"
    copy.write_bytes(trace.read_bytes())

    def no_full_parse(*_):
        raise AssertionError("parsed to the end")

    from stepscope.parsers.kineto import two_processes

    monkeypatch.setattr(two_processes, "joined", no_full_parse)
    again, served = timelines.open_trace_cached(copy, store=store)
    assert again == digest
    _assert_same(first, served)
    assert keys.known_digest(store, copy) == digest  # the next open of the copy hashes nothing


def test_a_file_touched_while_read_in_pieces_is_read_again(store, trace, pieces_from_disk, monkeypatch):
    """The hash and the pieces are read separately: a file changed in between is read whole instead, once."""
    original = pieces_from_disk.take_pieces
    touched = []

    def touching(*args, **kwargs):
        if not touched:
            touched.append(1)
            st = trace.stat()
            os.utime(trace, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
        return original(*args, **kwargs)

    monkeypatch.setenv("STEPSCOPE_PARSE_WORKERS", "1")
    monkeypatch.setattr(pieces_from_disk, "take_pieces", touching)
    digest, timeline = timelines.open_trace_cached(trace, store=store)
    assert touched and digest == keys.hash_bytes(trace.read_bytes())
    _assert_same(load_trace(trace), timeline)
    assert keys.known_digest(store, trace) == digest  # recorded by the whole read, under the file's new stat


def test_hash_file_equals_hash_bytes_around_chunk_sizes(tmp_path, monkeypatch):
    monkeypatch.setattr(keys, "_CHUNK", 1000)
    monkeypatch.setattr(keys, "_PARALLEL_HASH_BYTES", 1500)
    for size in (0, 1, 999, 1000, 1001, 1500, 1501, 5003):
        path = tmp_path / f"f{size}"
        path.write_bytes(os.urandom(size))
        assert keys.hash_file(path) == keys.hash_bytes(path.read_bytes()), size


def _recording(function, calls: list):
    def wrapper(*args, **kwargs):
        calls.append(args)
        return function(*args, **kwargs)

    return wrapper
