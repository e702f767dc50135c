"""Read Nsight Systems SQLite exports (`nsys export --type sqlite`) into a Timeline.

Tables read (each optional, at least one needed; names resolved through StringIds):
  CUPTI_ACTIVITY_KIND_KERNEL / _MEMCPY / _MEMSET   -> kernel, memcpy, memset on (deviceId, streamId)
  CUPTI_ACTIVITY_KIND_SYNCHRONIZATION              -> sync
  CUPTI_ACTIVITY_KIND_RUNTIME                      -> runtime (cuda*) or driver (cu*) calls
  NVTX_EVENTS (push/pop and start/end ranges)      -> annotation, so NVTX-marked steps are found
                                                      like record_function ones
  CUDA_GPU_MEMORY_USAGE_EVENTS (--cuda-memory-usage) -> the memory table (parsers.nsys_memory)
GPU activity and API calls share correlationId, kept in the correlation column;
graphNodeId, where the export has it, is kept in an extra graph_node_id column.
Times are already nanoseconds on the session clock. Runtime names lose nsys's
version suffix (cudaLaunchKernel_v7000 -> cudaLaunchKernel) so they read like
Kineto's. Uploads arrive as bytes, so the database is a private temp copy
opened read-only; only real tables are queried, never views.
"""

from __future__ import annotations

import dataclasses
import re
import sqlite3
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import TraceError
from .limits import ReadLimits, check_event_count
from .nsys_memory import read_memory_usage
from .numbers import int64_column
from .timeline import COLUMNS, KINDS, DeviceInfo, Timeline, TraceMeta

SOURCE_FORMAT = "nsys-sqlite"
SQLITE_MAGIC = b"SQLite format 3\x00"
KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY_TABLE = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET_TABLE = "CUPTI_ACTIVITY_KIND_MEMSET"
SYNC_TABLE = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
RUNTIME_TABLE = "CUPTI_ACTIVITY_KIND_RUNTIME"
NVTX_TABLE = "NVTX_EVENTS"
EVENT_TABLES = (KERNEL_TABLE, MEMCPY_TABLE, MEMSET_TABLE, RUNTIME_TABLE, NVTX_TABLE)

# CUpti_ActivityMemcpyKind, spelled as Kineto names copies ("Memcpy DtoH ...") so D2H is recognised.
COPY_KINDS = dict(enumerate(("HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP"), start=1))
# CUpti_ActivitySynchronizationType
SYNC_KINDS = {1: "Event Sync", 2: "Stream Wait Event", 3: "Stream Sync", 4: "Context Sync"}
NVTX_RANGE_TYPES = (59, 60)  # NvtxPushPopRange, NvtxStartEndRange
_VERSION_SUFFIX = re.compile(r"_v\d+$")
_DRIVER_NAME = re.compile(r"^cu[A-Z]")


def looks_like_sqlite(head: bytes) -> bool:
    return bytes(head[: len(SQLITE_MAGIC)]) == SQLITE_MAGIC


def read_nsys_sqlite(data: bytes | bytearray | memoryview, limits: ReadLimits | None = None) -> Timeline:
    """Parse the bytes of an nsys SQLite export. Raises TraceError with a one-line reason."""
    if not looks_like_sqlite(bytes(data[:16])):
        raise TraceError("not a SQLite file: the SQLite header is missing")
    with tempfile.TemporaryDirectory(prefix="stepscope-nsys-") as tmp:
        path = Path(tmp) / "report.sqlite"
        path.write_bytes(data)
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        except sqlite3.Error as exc:
            raise TraceError(f"cannot open the SQLite file: {exc}") from None
        try:
            conn.execute("PRAGMA trusted_schema = OFF")
            return _read(conn, limits)
        except sqlite3.DatabaseError as exc:
            raise TraceError(f"corrupt or unreadable SQLite file: {exc}") from None
        finally:
            conn.close()


def _read(conn: sqlite3.Connection, limits: ReadLimits | None = None) -> Timeline:
    tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    present = [t for t in EVENT_TABLES if t in tables]
    if not present:
        raise TraceError(
            "SQLite file without Nsight Systems tables (CUPTI_ACTIVITY_KIND_KERNEL, _RUNTIME, NVTX_EVENTS...): "
            "not an `nsys export --type sqlite` file"
        )
    if "StringIds" not in tables:
        raise TraceError("nsys export without its StringIds table: names cannot be resolved")
    columns = {t: _columns(conn, t) for t in (*present, SYNC_TABLE) if t in tables}
    rows = sum(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in columns)
    check_event_count(rows, limits, "rows in the event tables")
    frames, skipped = [], {}
    if KERNEL_TABLE in columns:
        frames.append(_kernels(conn, columns[KERNEL_TABLE]))
    if MEMCPY_TABLE in columns:
        frames.append(_memcpys(conn, columns[MEMCPY_TABLE]))
    if MEMSET_TABLE in columns:
        frames.append(_gpu_query(conn, MEMSET_TABLE, columns[MEMSET_TABLE], "'Memset'", "memset"))
    if SYNC_TABLE in columns:
        frames.append(_syncs(conn, columns[SYNC_TABLE]))
    if RUNTIME_TABLE in columns:
        frames.append(_runtime(conn))
    if NVTX_TABLE in columns:
        nvtx, nvtx_skipped = _nvtx(conn, columns[NVTX_TABLE])
        frames.append(nvtx)
        skipped.update(nvtx_skipped)
    raw = pd.concat([f for f in frames if len(f)], ignore_index=True) if any(len(f) for f in frames) else None
    if raw is None:
        raise TraceError(f"the nsys export's tables ({', '.join(present)}) hold no events: nothing to analyse")
    # Columns are typed by the file, not by us: text, NULL, inf or 1e300 where a time belongs are dropped
    # and counted, as are times beyond 2^62 ns (their sums would wrap around in int64).
    start, start_ok = int64_column(raw["start"])
    end, end_ok = int64_column(raw["end"])
    unusable = ~(start_ok & end_ok)
    before = ~unusable & (end < start)
    if unusable.any():
        skipped["start or end missing, not a number or beyond 2^62 ns"] = int(unusable.sum())
    if before.any():
        skipped["ending before start"] = int(before.sum())
    keep = ~(unusable | before)
    raw = raw.assign(start=start, end=end)[keep]
    for col in ("pid", "tid", "device", "stream"):
        raw[col] = int64_column(raw[col])[0]
    timeline = _timeline(raw, skipped, _devices(conn, tables), _thread_names(conn, tables), present)
    memory, notes = read_memory_usage(conn, tables)
    if memory is None and not notes:
        return timeline
    meta = dataclasses.replace(timeline.meta, warnings=(*timeline.meta.warnings, *notes))
    return dataclasses.replace(timeline, meta=meta, memory=memory)


def _query(conn: sqlite3.Connection, sql: str, table: str) -> pd.DataFrame:
    """Run one query; pandas wraps sqlite's errors in its own class, so both are caught and said with the table."""
    try:
        return pd.read_sql_query(sql, conn)
    except (sqlite3.Error, pd.errors.DatabaseError) as exc:
        reason = " ".join(str(exc.__cause__ or exc).split())[:200]
        raise TraceError(f"nsys table {table} cannot be read: {reason}") from None
    except OverflowError:
        raise TraceError(f"nsys table {table} holds an integer beyond 64 bits") from None


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


def _pick(cols: set[str], *candidates: str, default: str = "-1") -> str:
    return next((c for c in candidates if c in cols), default)


def _gpu_query(conn, table: str, cols: set[str], name_sql: str, kind: str, join: str = "") -> pd.DataFrame:
    graph = _pick(cols, "graphNodeId")
    sql = (
        f"SELECT a.start AS start, a.end AS end, {name_sql} AS name, a.deviceId AS device, a.streamId AS stream, "
        f"a.correlationId AS correlation, {'a.' + graph if graph != '-1' else '-1'} AS graph_node_id "
        f"FROM {table} AS a {join}"
    )
    frame = _query(conn, sql, table)
    frame["kind"] = kind
    frame["pid"], frame["tid"] = frame["device"], frame["stream"]  # Kineto's layout for GPU lanes
    return frame


def _kernels(conn, cols: set[str]) -> pd.DataFrame:
    name_col = _pick(cols, "demangledName", "shortName", "mangledName", default="")
    if not name_col:
        return _gpu_query(conn, KERNEL_TABLE, cols, "'kernel'", "kernel")
    join = f"LEFT JOIN StringIds AS s ON s.id = a.{name_col}"
    return _gpu_query(conn, KERNEL_TABLE, cols, "COALESCE(s.value, 'kernel')", "kernel", join)


def _memcpys(conn, cols: set[str]) -> pd.DataFrame:
    frame = _gpu_query(conn, MEMCPY_TABLE, cols, "a.copyKind" if "copyKind" in cols else "0", "memcpy")
    copy = pd.Series(int64_column(frame["name"], 0)[0])
    frame["name"] = "Memcpy " + copy.map(COPY_KINDS).fillna("Unknown")
    return frame


def _syncs(conn, cols: set[str]) -> pd.DataFrame:
    frame = _gpu_query(conn, SYNC_TABLE, cols, "a.syncType" if "syncType" in cols else "0", "sync")
    sync = pd.Series(int64_column(frame["name"], 0)[0])
    frame["name"] = sync.map(SYNC_KINDS).fillna("Synchronization")
    return frame


def _runtime(conn) -> pd.DataFrame:
    sql = (
        "SELECT r.start AS start, r.end AS end, COALESCE(s.value, 'cuda API call') AS name, r.globalTid AS gtid, "
        f"r.correlationId AS correlation FROM {RUNTIME_TABLE} AS r LEFT JOIN StringIds AS s ON s.id = r.nameId"
    )
    frame = _host_ids(_query(conn, sql, RUNTIME_TABLE))
    distinct = frame["name"].astype(str).unique()
    frame["name"] = frame["name"].astype(str).map({n: _VERSION_SUFFIX.sub("", n) for n in distinct})
    is_driver = frame["name"].map(lambda n: bool(_DRIVER_NAME.match(n)) and not n.startswith("cuda"))
    frame["kind"] = np.where(is_driver, "driver", "runtime")
    return frame


def _nvtx(conn, cols: set[str]) -> tuple[pd.DataFrame, dict[str, int]]:
    text = "COALESCE(n.text, s.value, '')" if "text" in cols else "COALESCE(s.value, '')"
    join = "LEFT JOIN StringIds AS s ON s.id = n.textId" if "textId" in cols else ""
    if not join:
        text = "COALESCE(n.text, '')"
    types = ", ".join(map(str, NVTX_RANGE_TYPES))
    sql = (
        f"SELECT n.start AS start, n.end AS end, {text} AS name, n.globalTid AS gtid "
        f"FROM {NVTX_TABLE} AS n {join} WHERE n.eventType IN ({types})"
    )
    frame = _host_ids(_query(conn, sql, NVTX_TABLE))
    frame["kind"] = "annotation"
    frame["correlation"] = -1
    (others,) = conn.execute(f"SELECT COUNT(*) FROM {NVTX_TABLE} WHERE eventType NOT IN ({types})").fetchone()
    return frame, ({"NVTX marks and other non-range events": int(others)} if others else {})


def _host_ids(frame: pd.DataFrame) -> pd.DataFrame:
    """nsys packs pid and tid into globalTid: pid in bits 24-47, tid in bits 0-23."""
    gtid = int64_column(frame.pop("gtid"))[0]
    frame["pid"] = (gtid >> 24) & 0xFFFFFF
    frame["tid"] = gtid & 0xFFFFFF
    frame["device"], frame["stream"], frame["graph_node_id"] = -1, -1, -1
    return frame


def _devices(conn, tables: set[str]) -> dict[int, DeviceInfo]:
    if "TARGET_INFO_GPU" not in tables:
        return {}
    cols = _columns(conn, "TARGET_INFO_GPU")
    if not {"id", "name"} <= cols:
        return {}
    sm = "smCount" if "smCount" in cols else "NULL"
    mem = "totalMemory" if "totalMemory" in cols else "NULL"
    devices = {}
    for ordinal, name, sms, memory in conn.execute(f"SELECT id, name, {sm}, {mem} FROM TARGET_INFO_GPU"):
        if isinstance(ordinal, int):
            devices[ordinal] = DeviceInfo(ordinal, str(name or "").strip(), sms, memory)
    return devices


def _thread_names(conn, tables: set[str]) -> dict[tuple[int, int], str]:
    if "ThreadNames" not in tables or not {"nameId", "globalTid"} <= _columns(conn, "ThreadNames"):
        return {}
    rows = conn.execute(
        "SELECT t.globalTid, s.value FROM ThreadNames AS t JOIN StringIds AS s ON s.id = t.nameId"
    ).fetchall()
    return {((g >> 24) & 0xFFFFFF, g & 0xFFFFFF): str(v)[:200] for g, v in rows if isinstance(g, int)}


def _timeline(
    raw: pd.DataFrame,
    skipped: dict[str, int],
    devices: dict[int, DeviceInfo],
    thread_names: dict[tuple[int, int], str],
    present: list[str],
) -> Timeline:
    raw = raw.sort_values("start", kind="stable")
    start = raw["start"].to_numpy(dtype=np.int64)
    kinds = raw["kind"].to_numpy(dtype=object)
    data = {
        "ts": start,
        "dur": raw["end"].to_numpy(dtype=np.int64) - start,
        "kind": pd.Categorical(kinds, categories=[k for k in KINDS if k in set(kinds)]),
        "name": pd.Categorical(raw["name"].astype(str).to_numpy()),
        "pid": raw["pid"].to_numpy(dtype=np.int64),
        "tid": raw["tid"].to_numpy(dtype=np.int64),
        "device": raw["device"].to_numpy(dtype=np.int64),
        "stream": raw["stream"].to_numpy(dtype=np.int64),
        "correlation": int64_column(raw["correlation"])[0],
        "external_id": np.full(len(raw), -1, dtype=np.int64),
    }
    events = pd.DataFrame({c: data[c] for c in COLUMNS}, copy=False)
    graph_nodes = int64_column(raw["graph_node_id"])[0]
    graph_nodes = np.where(graph_nodes == 0, -1, graph_nodes)  # 0 or NULL: work outside any graph
    events["graph_node_id"] = graph_nodes
    events["input_dims"] = pd.Categorical(np.full(len(raw), "", dtype=object))
    warnings = []
    if not (events["kind"].isin(("kernel", "memcpy", "memset"))).any():
        warnings.append("the export has no CUDA kernel or copy activity (was CUDA tracing on?)")
    meta = TraceMeta(
        source_format=SOURCE_FORMAT,
        event_count=len(raw) + sum(skipped.values()),
        devices=devices,
        thread_names=thread_names,
        skipped=skipped,
        warnings=tuple(warnings),
        extra={"tables": present, "graph_node_ids": int((graph_nodes >= 0).sum())},
    )
    return Timeline(events=events.reset_index(drop=True), meta=meta)
