"""Nsight Systems SQLite exports: SYNTHETIC databases built here with the tables and columns that
`nsys export --type sqlite` writes (no licensed real export is at hand)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from stepscope.analysis import analyze
from stepscope.parsers import TraceError, load_trace, parse_trace_bytes
from stepscope.parsers.kineto.reader import read_chrome_trace
from tests import synthetic_traces as st

SCHEMA = """
CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE ThreadNames (nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER);
CREATE TABLE TARGET_INFO_GPU (id INTEGER NOT NULL, name TEXT NOT NULL, busLocation TEXT, totalMemory INTEGER,
    smCount INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
    contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
    demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER, launchType INTEGER,
    gridX INTEGER, gridY INTEGER, gridZ INTEGER, blockX INTEGER, blockY INTEGER, blockZ INTEGER,
    graphNodeId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
    contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
    bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, srcKind INTEGER, dstKind INTEGER, graphNodeId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
    contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
    value INTEGER NOT NULL, bytes INTEGER NOT NULL, graphNodeId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL,
    globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL,
    callchainId INTEGER);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER,
    category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER,
    domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER,
    int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT);
"""
PID, TID = 3117, 3130
GLOBAL_TID = (PID << 24) | TID  # nsys packs pid into bits 24-47 and tid into bits 0-23
NVTX_PUSH_POP, NVTX_START_END, NVTX_MARK = 59, 60, 34


class SyntheticNsysExport:
    """Rows appended table by table, then written as a SQLite file like nsys export's."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn = sqlite3.connect(path)
        self.conn.executescript(SCHEMA)
        self.strings: dict[str, int] = {}
        self.conn.execute("INSERT INTO TARGET_INFO_GPU VALUES (0, 'Synthetic H100', '0000:01:00.0', 85e9, 132)")
        self.conn.execute("INSERT INTO ThreadNames VALUES (?, 0, ?)", (self.string("python3"), GLOBAL_TID))

    def string(self, value: str) -> int:
        if value not in self.strings:
            self.strings[value] = len(self.strings) + 1
            self.conn.execute("INSERT INTO StringIds VALUES (?, ?)", (self.strings[value], value))
        return self.strings[value]

    def kernel(self, name: str, start: int, end: int, corr: int, stream: int = 7, graph_node: int = 0) -> None:
        sid = self.string(name)
        self.conn.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, correlationId, "
            "globalPid, demangledName, shortName, graphNodeId) VALUES (?, ?, 0, 1, ?, ?, ?, ?, ?, ?)",
            (start, end, stream, corr, PID << 24, sid, sid, graph_node),
        )

    def memcpy(self, start: int, end: int, corr: int, copy_kind: int = 2) -> None:
        self.conn.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, contextId, streamId, correlationId, "
            "globalPid, bytes, copyKind) VALUES (?, ?, 0, 1, 7, ?, ?, 8, ?)",
            (start, end, corr, PID << 24, copy_kind),
        )

    def memset(self, start: int, end: int, corr: int) -> None:
        self.conn.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET (start, end, deviceId, contextId, streamId, correlationId, "
            "globalPid, value, bytes) VALUES (?, ?, 0, 1, 7, ?, ?, 0, 64)",
            (start, end, corr, PID << 24),
        )

    def runtime(self, name: str, start: int, end: int, corr: int) -> None:
        self.conn.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, correlationId, nameId, "
            "returnValue) VALUES (?, ?, 0, ?, ?, ?, 0)",
            (start, end, GLOBAL_TID, corr, self.string(name)),
        )

    def nvtx(self, name: str, start: int, end: int | None, event_type: int = NVTX_PUSH_POP, interned: bool = False):
        text, text_id = (None, self.string(name)) if interned else (name, None)
        self.conn.execute(
            "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, textId) VALUES (?, ?, ?, ?, ?, ?)",
            (start, end, event_type, text, GLOBAL_TID, text_id),
        )

    def save(self) -> Path:
        self.conn.commit()
        self.conn.close()
        return self.path


def _from_kineto(events: list[dict], path: Path) -> Path:
    """The same SYNTHETIC generation as an nsys export: kernels, copies, runtime calls, markers as NVTX."""
    export = SyntheticNsysExport(path)
    for n, e in enumerate(events):
        start, end = round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000)
        corr = e.get("args", {}).get("correlation", 0)
        if e["cat"] == "kernel":
            export.kernel(e["name"], start, end, corr)
        elif e["cat"] == "gpu_memcpy":
            export.memcpy(start, end, corr)
        elif e["cat"] == "cuda_runtime":
            export.runtime(e["name"] + "_v7000", start, end, corr)  # nsys keeps the API version suffix
        elif e["cat"] == "user_annotation":
            export.nvtx(e["name"], start, end, NVTX_PUSH_POP if n % 2 else NVTX_START_END, interned=n % 3 == 0)
    return export.save()


STEP_FIELDS = ["kind", "request", "index", "start_ns", "end_ns", "tokens", "kernels", "launches", "d2h_copies"]


def test_nsys_export_gives_the_same_steps_and_gaps_as_the_kineto_trace(tmp_path) -> None:
    events = st.synthetic_generation(with_markers=True)
    kineto = analyze(read_chrome_trace(json.dumps(st.doc(events)).encode()))
    timeline = load_trace(_from_kineto(events, tmp_path / "report.sqlite"))
    result = analyze(timeline)

    assert timeline.meta.source_format == "nsys-sqlite"
    assert timeline.device_name == "Synthetic H100"
    assert result.segmentation.method == "stepscope-markers"  # NVTX ranges named with Stepscope markers
    assert result.steps[STEP_FIELDS].equals(kineto.steps[STEP_FIELDS])
    assert result.gaps[["start_ns", "end_ns", "cause"]].equals(kineto.gaps[["start_ns", "end_ns", "cause"]])


def test_nsys_columns_links_and_names(tmp_path) -> None:
    export = SyntheticNsysExport(tmp_path / "r.sqlite")
    export.nvtx("stepscope.decode[request=0,index=1,tokens=1,batch=4]", 1_000, 60_000, interned=True)
    export.runtime("cudaGraphLaunch_v10000", 2_000, 9_000, corr=42)
    for node, t in ((101, 10_000), (102, 20_000), (103, 30_000)):
        export.kernel("void flash_fwd<128>(Params)", t, t + 5_000, corr=42, stream=13, graph_node=node)
    export.runtime("cuMemsetD32Async", 40_000, 41_000, corr=43)
    export.memset(41_500, 42_000, corr=43)
    export.runtime("cudaMemcpyAsync_v3020", 45_000, 46_000, corr=44)
    export.runtime("cudaMemcpyAsync_v12000", 48_000, 48_500, corr=45)  # two API versions, one name
    export.memcpy(46_500, 47_000, corr=44, copy_kind=1)
    export.nvtx("a mark", 50_000, None, event_type=NVTX_MARK)
    timeline = parse_trace_bytes(export.save().read_bytes())

    ev = timeline.events
    kernels = ev[ev["kind"] == "kernel"]
    assert list(kernels["graph_node_id"]) == [101, 102, 103]
    assert set(kernels["correlation"]) == {42} and set(kernels["stream"]) == {13} and set(kernels["device"]) == {0}
    assert timeline.meta.extra["graph_node_ids"] == 3
    runtime = ev[ev["kind"].isin(("runtime", "driver"))]
    names = ["cudaGraphLaunch", "cuMemsetD32Async", "cudaMemcpyAsync", "cudaMemcpyAsync"]
    assert list(runtime["name"].astype(str)) == names
    assert list(runtime["kind"].astype(str)) == ["runtime", "driver", "runtime", "runtime"]
    assert set(runtime["pid"]) == {PID} and set(runtime["tid"]) == {TID}
    assert timeline.meta.thread_names[(PID, TID)] == "python3"
    assert list(ev.loc[ev["kind"] == "memcpy", "name"].astype(str)) == ["Memcpy HtoD"]
    assert list(ev.loc[ev["kind"] == "memset", "correlation"]) == [43]
    assert timeline.meta.skipped == {"NVTX marks and other non-range events": 1}

    step = analyze(timeline).steps.iloc[0]
    assert (step["kind"], step["tokens"], step["batch"]) == ("decode", 4, 4)
    assert step["kernels"] == 3  # all three graph kernels belong to the step that launched the graph


def test_sqlite_without_nsys_tables_is_rejected_in_one_line(tmp_path) -> None:
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (id INTEGER, body TEXT)")
    with pytest.raises(TraceError, match="not an `nsys export --type sqlite` file") as info:
        load_trace(path)
    assert "\n" not in str(info.value)


def test_nsys_tables_that_are_views_are_not_queried(tmp_path) -> None:
    path = tmp_path / "views.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS SELECT 1 AS start")
    with pytest.raises(TraceError, match="without Nsight Systems tables"):
        load_trace(path)


def test_corrupt_and_empty_sqlite_fail_in_one_line(tmp_path) -> None:
    export = SyntheticNsysExport(tmp_path / "r.sqlite")
    export.kernel("k", 1, 2, 1)
    data = export.save().read_bytes()
    for broken in (data[:100], data[:16] + b"\x00" * 200):
        with pytest.raises(TraceError) as info:
            parse_trace_bytes(broken)
        assert "\n" not in str(info.value)
    empty = SyntheticNsysExport(tmp_path / "empty.sqlite").save()
    with pytest.raises(TraceError, match="hold no events"):
        load_trace(empty)


def test_nsys_export_is_sniffed_by_content(tmp_path) -> None:
    export = SyntheticNsysExport(tmp_path / "r.sqlite")
    export.kernel("k", 1_000, 2_000, 1)
    misnamed = tmp_path / "trace.json.gz"
    misnamed.write_bytes(export.save().read_bytes())
    assert load_trace(misnamed).meta.source_format == "nsys-sqlite"


MEMORY_SCHEMA = """
CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (start INTEGER NOT NULL, globalPid INTEGER, deviceId INTEGER NOT NULL,
    contextId INTEGER, address INTEGER NOT NULL, pc INTEGER, bytes INTEGER NOT NULL, memKind INTEGER NOT NULL,
    memoryOperationType INTEGER NOT NULL, name TEXT, correlationId INTEGER, streamId INTEGER);
CREATE TABLE ENUM_CUDA_DEV_MEM_EVENT_OPER (id INTEGER PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER PRIMARY KEY, name TEXT, label TEXT);
INSERT INTO ENUM_CUDA_DEV_MEM_EVENT_OPER VALUES (0, 'CUDA_DEV_MEM_EVENT_OPR_ALLOCATION', 'Allocation'),
    (1, 'CUDA_DEV_MEM_EVENT_OPR_DEALLOCATION', 'Deallocation');
INSERT INTO ENUM_CUDA_MEM_KIND VALUES (0, 'CUDA_MEMOPR_MEMORY_KIND_PAGEABLE', 'Pageable'),
    (1, 'CUDA_MEMOPR_MEMORY_KIND_PINNED', 'Pinned'), (2, 'CUDA_MEMOPR_MEMORY_KIND_DEVICE', 'Device'),
    (5, 'CUDA_MEMOPR_MEMORY_KIND_DEVICE_STATIC', 'Device Static');
"""


def test_cuda_memory_usage_becomes_the_memory_table(tmp_path) -> None:
    """A SYNTHETIC `--cuda-memory-usage=true` export: allocations and frees of device memory on two GPUs become the
    memory table with each device's running total; pinned host memory is left out; rows come out in time order."""
    export = SyntheticNsysExport(tmp_path / "r.sqlite")
    export.kernel("k", 1_000, 2_000, 1)
    export.conn.executescript(MEMORY_SCHEMA)
    rows = [  # (start, device, bytes, kind, operation)
        (5_000, 0, 2 << 20, 2, 0),
        (1_000, 0, 20 << 20, 2, 0),
        (7_000, 0, 2 << 20, 2, 1),
        (6_000, 1, 4 << 20, 5, 0),
        (6_500, 0, 1 << 20, 1, 0),  # pinned host memory: not device memory
    ]
    export.conn.executemany(
        "INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS (start, deviceId, address, bytes, memKind, memoryOperationType) "
        "VALUES (?, ?, 0, ?, ?, ?)",
        [(s, d, b, k, o) for s, d, b, k, o in rows],
    )
    timeline = load_trace(export.save())
    memory = timeline.memory
    assert list(memory["ts"]) == [1_000, 5_000, 6_000, 7_000]
    assert list(memory["device"]) == [0, 0, 1, 0] and set(memory["device_type"]) == {1}
    assert list(memory["bytes"]) == [20 << 20, 2 << 20, 4 << 20, -(2 << 20)]
    assert list(memory["allocated"]) == [20 << 20, 22 << 20, 4 << 20, 20 << 20]
    assert set(memory["reserved"]) == {-1}
    assert any("what a caching allocator reserves" in w for w in timeline.meta.warnings)


def test_an_export_without_memory_usage_has_no_memory_table(tmp_path) -> None:
    export = SyntheticNsysExport(tmp_path / "r.sqlite")
    export.kernel("k", 1_000, 2_000, 1)
    assert load_trace(export.save()).memory is None
