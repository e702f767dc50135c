"""What Stepscope reads back from its own cache folder is checked by shape and bound to its key (issue 39, items 5
and 6): a result entry or a Timeline entry holding valid JSON of another shape is a miss and is rebuilt, and an
entry whose bytes are another trace's (two entries swapped on disk) is never served. Traces: the shipped samples,
and a SYNTHETIC generation trace built here (tests/synthetic_traces.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stepscope.trace_cache import timelines
from stepscope.trace_cache.entry_seal import sealed
from stepscope.trace_cache.results import cached_result, store_result
from stepscope.trace_cache.store import CacheStore
from tests.conftest import ROOT
from tests.synthetic_traces import synthetic_generation, write

SAMPLES = ROOT / "sample_traces"
EAGER = SAMPLES / "cpu_tiny-llama_eager" / "trace.json.gz"
COMPILED = SAMPLES / "cpu_tiny-llama_compile" / "trace.json.gz"


@pytest.fixture
def store(tmp_path) -> CacheStore:
    return CacheStore(tmp_path / "cache")


@pytest.fixture
def trace(tmp_path) -> Path:
    (tmp_path / "t").mkdir()
    return write(tmp_path / "t" / "trace.json", synthetic_generation(decode_steps=4))


def _cli(args: list[str], cache: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, STEPSCOPE_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300
    )


def _answer(trace: Path) -> str:
    """A body of the analyze --json contract's shape (its steps name the trace it came from)."""
    from stepscope.analysis.front_door import open_report

    return open_report(trace).text


# Valid JSON of other shapes for a result entry's header line: each must read as a miss, never as an answer.
BAD_HEADERS = {
    "a list": [],
    "a number": 7,
    "a string": "stepscope-result/2",
    "missing keys": {"tag": "stepscope-result/2"},
    "wrong-typed entry": {"tag": "stepscope-result/2", "entry": 5, "sum": "x", "notes": []},
    "wrong-typed sum": {"tag": "stepscope-result/2", "entry": "?", "sum": [1], "notes": {}},
}


@pytest.mark.parametrize("shape", sorted(BAD_HEADERS))
def test_a_result_header_of_another_shape_is_a_miss(store, trace, shape):
    timelines.load_trace_cached(trace, store=store)  # records the file's digest in the stat index
    text = _answer(trace)
    assert store_result(trace, "k1", text, store=store)
    (entry,) = (store.root / "results").iterdir()
    header = BAD_HEADERS[shape]
    if isinstance(header, dict) and header.get("entry") == "?":
        header = {**header, "entry": entry.name}
    entry.write_bytes(json.dumps(header).encode() + b"\n" + text.encode())
    assert cached_result(trace, "k1", store) is None
    assert not entry.exists()  # dropped, so the next answer rebuilds it
    assert store_result(trace, "k1", text, store=store)
    assert cached_result(trace, "k1", store).text == text


def test_a_result_entry_under_another_key_is_a_miss(store, trace):
    """The same bytes copied under another key's name (an answer for other options) are not that key's answer."""
    timelines.load_trace_cached(trace, store=store)
    assert store_result(trace, "k1", _answer(trace), store=store)
    (entry,) = (store.root / "results").iterdir()
    other = entry.with_name(entry.name.replace("-k1.json", "-k2.json"))
    other.write_bytes(entry.read_bytes())
    assert cached_result(trace, "k2", store) is None
    assert not other.exists() and cached_result(trace, "k1", store) is not None


def _rewrite_meta(path: Path, change) -> None:
    """Rewrite a Timeline entry's schema metadata through `change(dict) -> object` and seal it again: a valid
    entry (whole, sealed) whose metadata is JSON of another shape."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    content = path.read_bytes()[: -len(sealed(b""))]
    table = ipc.open_file(pa.BufferReader(content)).read_all()
    raw = json.loads(table.schema.metadata[b"stepscope"])
    new = table.replace_schema_metadata({b"stepscope": json.dumps(change(raw)).encode()})
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, new.schema) as writer:
        writer.write_table(new)
    path.write_bytes(sealed(sink.getvalue().to_pybytes()))


def _with_meta(**fields):
    return lambda raw: {**raw, "meta": {**raw["meta"], **fields}}


BAD_METAS = {
    "metadata a list": lambda raw: [raw],
    "metadata a number": lambda raw: 3,
    "meta a list": lambda raw: {**raw, "meta": []},
    "meta missing devices": lambda raw: {**raw, "meta": {k: v for k, v in raw["meta"].items() if k != "devices"}},
    "event_count a string": _with_meta(event_count="12"),
    "source_format a number": _with_meta(source_format=1),
    "warnings a string": _with_meta(warnings="abc"),
    "thread_names row too short": _with_meta(thread_names=[[1, "x"]]),
    "devices without keys": _with_meta(devices=[[0, "gpu", None, None, None, None, None]], device_keys=[]),
    "columns a dict": lambda raw: {**raw, "columns": {"ts": 1}},
    "memory_rows a string": lambda raw: {**raw, "memory_rows": "5"},
}


@pytest.mark.parametrize("shape", sorted(BAD_METAS))
def test_a_timeline_entry_with_metadata_of_another_shape_is_rebuilt(store, trace, shape):
    first = timelines.load_trace_cached(trace, store=store)
    (entry,) = (store.root / "timelines").iterdir()
    _rewrite_meta(entry, BAD_METAS[shape])
    digest = timelines.open_trace_cached(trace, store=store)[0]
    assert timelines.load_timeline(store, digest) is not None  # rebuilt whole by that open
    again = timelines.load_trace_cached(trace, store=store)
    assert again.meta == first.meta and len(again.events) == len(first.events)


def test_an_untouched_rewrite_still_reads(store, trace):
    """The rewrite above changes nothing by itself: the same metadata, sealed again, is still a hit."""
    first = timelines.load_trace_cached(trace, store=store)
    (entry,) = (store.root / "timelines").iterdir()
    _rewrite_meta(entry, lambda raw: raw)
    digest = timelines.open_trace_cached(trace, store=store)[0]
    hit = timelines.load_timeline(store, digest)
    assert hit is not None and hit.meta == first.meta


def _swap(folder: Path) -> list[Path]:
    a, b = sorted(p for p in folder.iterdir() if not p.name.startswith("."))
    data_a, data_b = a.read_bytes(), b.read_bytes()
    a.write_bytes(data_b)
    b.write_bytes(data_a)
    return [a, b]


def _steps(out: subprocess.CompletedProcess) -> list:
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["steps"]


def test_swapped_entries_are_never_served(tmp_path):
    """Two shipped traces analysed, then their result entries swapped on disk, then their Timeline entries: each
    trace still answers its own steps (the swapped entries are misses, rebuilt)."""
    cache = tmp_path / "cache"
    traces = [EAGER, COMPILED]
    cold = [_cli(["analyze", str(t), "--json"], cache) for t in traces]
    own = [_steps(out) for out in cold]
    assert own[0] != own[1]  # two different answers, so a swap would show
    assert len(_swap(cache / "results")) == 2
    for trace, steps in zip(traces, own, strict=True):
        assert _steps(_cli(["analyze", str(trace), "--json"], cache)) == steps
    for entry in (cache / "results").iterdir():  # the answers now come from the Timeline entries, swapped
        entry.unlink()
    assert len(_swap(cache / "timelines")) == 2
    for trace, steps in zip(traces, own, strict=True):
        again = _cli(["analyze", str(trace), "--json"], cache)
        assert _steps(again) == steps
        assert again.stdout == cold[traces.index(trace)].stdout


@pytest.mark.parametrize("shape", ["a list", "a number", "wrong-typed sum"])
def test_the_cli_rebuilds_a_result_entry_of_another_shape(tmp_path, shape):
    cache = tmp_path / "cache"
    cold = _cli(["analyze", str(EAGER), "--json"], cache)
    (entry,) = (cache / "results").iterdir()
    body = entry.read_bytes().partition(b"\n")[2]
    entry.write_bytes(json.dumps(BAD_HEADERS[shape]).encode() + b"\n" + body)
    again = _cli(["analyze", str(EAGER), "--json"], cache)
    assert again.returncode == 0 and again.stdout == cold.stdout and "Traceback" not in again.stderr
    assert json.loads(entry.read_bytes().partition(b"\n")[0])["entry"] == entry.name  # rebuilt, bound


def _fake_measurement() -> dict:
    """What analysis.roofline.machine._measured returns, with figures no real measurement gives (so a test sees
    which record was used) and without the seconds of numpy a measurement costs."""
    from stepscope.analysis.roofline import machine

    return {
        "memory_bytes_per_s": 1.25e9,
        "flops_per_s": 3.5e9,
        "host": machine.socket.gethostname()[:100],
        "how": "synthetic",
        "under_load": False,
        "cpu": machine._cpu_identity(),
        "measured": "2026-12-04T00:00:00+00:00",
    }


def _stored(**changes) -> dict:
    """A stored record with figures of its own (9e9 B/s: a read of it shows) and the given changes."""
    record = {**_fake_measurement(), "memory_bytes_per_s": 9e9, **changes}
    return {k: v for k, v in record.items() if v is not None}


BAD_MACHINE_RECORDS = {
    "a list": [],
    "a number": 5,
    "figures as strings": _stored(memory_bytes_per_s="fast"),
    "measured missing": _stored(measured=None),
    "under_load a string": _stored(under_load="no"),
    "how a list": _stored(how=["x"]),
    "another host's": _stored(host="another-box"),
    "another cpu's": _stored(cpu="riscv 1 cores"),
}


@pytest.mark.parametrize("shape", sorted(BAD_MACHINE_RECORDS))
def test_a_stored_machine_record_of_another_shape_or_machine_is_measured_again(tmp_path, monkeypatch, shape):
    from stepscope.analysis.roofline import machine

    monkeypatch.setenv("STEPSCOPE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(machine, "_measured", _fake_measurement)
    path = machine._stored_path()
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(BAD_MACHINE_RECORDS[shape]))
    hardware = machine.this_machine("CPU")
    assert (hardware.memory_bytes_per_s, hardware.flops_per_s) == (1.25e9, 3.5e9)  # measured, not read
    assert json.loads(path.read_text()) == _fake_measurement()  # the record repaired


def test_this_machines_own_record_is_read_back(tmp_path, monkeypatch):
    from stepscope.analysis.roofline import machine

    monkeypatch.setenv("STEPSCOPE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(machine, "_measured", lambda: pytest.fail("measured although a good record is stored"))
    path = machine._stored_path()
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(_stored()))
    assert machine.this_machine("CPU").memory_bytes_per_s == 9e9


@pytest.mark.parametrize(
    "damage",
    [
        ("results", "foreign", None),
        ("timelines", "foreign", None),
        ("stat", "foreign", None),
        ("timelines", "meta-field", ("meta.event_count", "12")),
        ("timelines", "meta-field", ("meta.devices", [[0]])),
        ("timelines", "meta-field", ("columns", {"ts": 1})),
        ("results", "forged-result", json.dumps({"steps": []})),
    ],
    ids=lambda d: f"{d[0]}-{d[1]}" if isinstance(d, tuple) else str(d),
)
def test_the_fuzz_surface_judges_foreign_and_reshaped_entries(damage):
    """The fuzz surface's new damages (tests/fuzz_surfaces.py; bench/fuzz.py runs them at length), each once here:
    the answers after the damage are the clean ones."""
    from tests import fuzz_surfaces

    assert fuzz_surfaces.check_cache_damage(damage) == 0
