"""SYNTHETIC hostile inputs for the fuzz test (tests/test_fuzz.py) and the long fuzzing script (bench/fuzz.py).

Hypothesis strategies build structure-aware inputs in the three trace formats (Kineto JSON, Perfetto protobuf,
Nsight SQLite) and run.json files, with the values the issue's fuzzing run found hostile: 20-digit numbers,
2^63, negative and huge times, NaN, inf, malformed Input Dims, invalid UTF-8. `check_contract` runs the CLI
in-process and asserts the contract: exit 0 with sane JSON, or exit 2 with one line starting `error:`.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import sqlite3
import tempfile
from pathlib import Path

from hypothesis import strategies as st

from stepscope.app.cli.main import INTERNAL_ERROR
from stepscope.app.cli.main import main as cli_main

HUGE_INTS = [0, 1, -1, 7, 2**31, 2**53, 2**62, 2**63 - 1, 2**63, 2**64 - 1, 10**20, -(2**63), -(10**20)]
ints = st.one_of(st.integers(-5, 100_000), st.sampled_from(HUGE_INTS))
times = st.one_of(
    st.floats(-1e4, 1e6, allow_nan=False),
    st.sampled_from([0.0, -1.0, 1e300, -1e300, 9.2e15, 1.8e16, 2.0**63, 1e-300]),
    st.integers(-10, 10**7),
    st.sampled_from(HUGE_INTS),
)
number_text = st.one_of(st.integers(0, 64).map(str), st.sampled_from(["9" * 20, str(2**63), str(2**64), "0" * 30]))
dims_values = st.recursive(
    st.one_of(st.none(), ints, st.text(max_size=3), st.floats(allow_nan=False, allow_infinity=False)),
    lambda inner: st.lists(inner, max_size=4),
    max_leaves=8,
)


@st.composite
def step_name(draw) -> str:
    n = draw(number_text)
    m = draw(number_text)
    return draw(
        st.sampled_from(
            [
                f"stepscope.decode[request={n},index={m},tokens=1,batch={n}]",
                f"stepscope.prefill[request=0,index=0,tokens={n},batch={m}]",
                f"execute_context_{n}({m}_5)_generation_{m}(0)",
                f"execute_{n}_context_0(sq0sk0)_generation_{m}(sq{n})",
                f"step[DECODE bs={n}]",
                f"step[EXTEND bs={m}]",
                f"ProfilerStep#{n}",
                "aten::embedding",
                "aten::linear",
                "cudaLaunchKernel",
                "cudaGraphLaunch",
                "cudaStreamSynchronize",
                "Memcpy DtoH (Device -> Pinned)",
                "kernel_a",
            ]
        )
    )


CATEGORIES = ["kernel", "cuda_runtime", "cpu_op", "user_annotation", "gpu_memcpy", "cuda_sync", "Kernel", "weird"]


@st.composite
def kineto_event(draw) -> dict:
    phase = draw(st.sampled_from(["X"] * 8 + ["M", "i", "B"]))
    event: dict = {"ph": phase, "name": draw(step_name()), "pid": draw(st.one_of(ints, st.text(max_size=4)))}
    if draw(st.booleans()):
        event["tid"] = draw(st.one_of(ints, st.sampled_from(["stream 7", "x", "9" * 25])))
    if phase == "M":
        event["name"] = draw(st.sampled_from(["process_name", "thread_name", "process_sort_index"]))
        event["args"] = {"name": draw(st.text(max_size=5)), "sort_index": draw(ints)}
        return event
    event["cat"] = draw(st.sampled_from(CATEGORIES))
    event["ts"] = draw(times)
    if draw(st.integers(0, 9)):
        event["dur"] = draw(times)
    args = {}
    for key in ("correlation", "device", "stream", "External id"):
        if draw(st.booleans()):
            args[key] = draw(ints)
    if draw(st.booleans()):
        args["Input Dims"] = draw(dims_values)
    if args:
        event["args"] = args
    return event


@st.composite
def plausible_kineto_events(draw) -> list[dict]:
    """A short generation loop (so analysis really runs), then a few hostile events mixed in."""
    steps = draw(st.integers(1, 6))
    t = draw(st.sampled_from([0.0, 1000.0, -5000.0]))
    events, corr = [], 1
    for index in range(steps):
        seq = draw(st.sampled_from([1, 16])) if index == 0 else 1
        events.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::embedding",
                "pid": 1,
                "tid": 1,
                "ts": t,
                "dur": 2.0,
                "args": {"Input Dims": [[1000, 8], [1, seq], [], [], []]},
            }
        )
        for _ in range(draw(st.integers(1, 3))):
            events.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    "pid": 1,
                    "tid": 1,
                    "ts": t + 2,
                    "dur": 3.0,
                    "args": {"correlation": corr},
                }
            )
            events.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": "k",
                    "pid": 0,
                    "tid": 7,
                    "ts": t + 5,
                    "dur": draw(st.sampled_from([0.0, 4.0, 10.0])),
                    "args": {"device": 0, "stream": 7, "correlation": corr},
                }
            )
            corr += 1
            t += 12
        t += draw(st.sampled_from([0.0, 20.0]))
    extra = draw(st.lists(kineto_event(), max_size=6))
    for e in extra:
        events.insert(draw(st.integers(0, len(events))), e)
    return events


def _json_bytes(value) -> bytes:
    return json.dumps(value, allow_nan=True).encode("utf-8", "surrogatepass")


REAL_SEED = Path(__file__).resolve().parent / "data" / "real" / "kineto_tiny_sync_h100.json"  # pytorch/kineto


@st.composite
def kineto_trace_bytes(draw) -> bytes:
    if REAL_SEED.exists() and draw(st.integers(0, 5)) == 0:  # byte-level mutations of a real capture
        return draw(mutated(REAL_SEED.read_bytes(), always=True))
    events = draw(st.one_of(plausible_kineto_events(), st.lists(kineto_event(), max_size=20)))
    doc = {"schemaVersion": 1, "traceEvents": events}
    if draw(st.booleans()):
        doc["deviceProperties"] = [{"id": draw(ints), "name": "Synthetic GPU", "numSms": draw(ints)}]
    data = _json_bytes(doc if draw(st.integers(0, 4)) else events)
    return draw(mutated(data))


@st.composite
def mutated(draw, data: bytes, always: bool = False) -> bytes:
    """Mostly the bytes as they are; sometimes a few byte-level edits (invalid UTF-8, cuts, flips)."""
    choice = draw(st.integers(0, 9))
    if (choice < 6 and not always) or not data:
        return data
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        pos = draw(st.integers(0, max(len(buf) - 1, 0)))
        op = draw(st.sampled_from(["flip", "utf8", "cut", "dup"]))
        if op == "flip" and buf:
            buf[pos] = draw(st.integers(0, 255))
        elif op == "utf8":
            buf[pos:pos] = draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80"]))
        elif op == "cut":
            del buf[pos:]
        else:
            buf[pos:pos] = buf[pos : pos + draw(st.integers(1, 40))]
    return bytes(buf)


# --- Perfetto


@st.composite
def perfetto_trace_bytes(draw) -> bytes:
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    trace = pb.Trace()
    u64 = st.one_of(st.integers(0, 10**6), st.sampled_from([2**62, 2**63 - 1, 2**63, 2**64 - 1]))
    n_tracks = draw(st.integers(1, 4))
    for uuid in range(1, n_tracks + 1):
        desc = trace.packet.add().track_descriptor
        desc.uuid = uuid
        desc.parent_uuid = draw(st.integers(0, n_tracks))
        desc.name = draw(
            st.sampled_from(
                [
                    "GPU 0 stream 7",
                    "host ops (pid 1 tid 1)",
                    "CUDA Stream 3",
                    "t",
                    "\udcff" if False else "GPU 99999999999999999999 stream 1",
                ]
            )
        )
        if draw(st.booleans()):
            desc.thread.pid = draw(st.integers(-(2**31), 2**31 - 1))
            desc.thread.tid = draw(st.integers(-(2**31), 2**31 - 1))
    t = 1000
    for _ in range(draw(st.integers(1, 12))):
        begin = trace.packet.add()
        begin.trusted_packet_sequence_id = 1
        begin.timestamp = draw(st.one_of(st.just(t), u64))
        begin.track_event.type = pb.TrackEvent.TYPE_SLICE_BEGIN
        begin.track_event.track_uuid = draw(st.integers(1, n_tracks))
        begin.track_event.name = draw(step_name())
        begin.track_event.categories.append(draw(st.sampled_from(["kernel", "cpu_op", "runtime", "annotation", ""])))
        if draw(st.booleans()):
            begin.track_event.correlation_id = draw(u64)
        if draw(st.booleans()):
            begin.track_event.debug_annotations.add(name="input_dims", string_value=json.dumps(draw(dims_values)))
        end = trace.packet.add()
        end.trusted_packet_sequence_id = 1
        end.timestamp = draw(st.one_of(st.just(t + 10), u64))
        end.track_event.type = pb.TrackEvent.TYPE_SLICE_END
        end.track_event.track_uuid = begin.track_event.track_uuid
        t += 20
    return draw(mutated(trace.SerializeToString()))


# --- Nsight SQLite

_NSYS_VALUES = st.one_of(
    st.integers(-5, 10**6),
    st.sampled_from([2**63 - 1, -(2**63), None, "text", 1e300, float("inf"), float("-inf"), b"\x00\xff"]),
)


@st.composite
def nsys_sqlite_bytes(draw) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "r.sqlite"
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)")
        conn.execute(
            "INSERT INTO StringIds VALUES (1, 'kernel_a'), (2, 'cudaLaunchKernel_v7000'), (3, ?)", (draw(step_name()),)
        )
        kernel_cols = ["start", "end", "deviceId", "streamId", "correlationId", "demangledName"]
        if draw(st.integers(0, 5)) == 0:
            kernel_cols.remove(draw(st.sampled_from(kernel_cols)))
        conn.execute(f"CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL ({', '.join(kernel_cols)})")
        conn.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start, end, nameId, globalTid, correlationId)")
        conn.execute("CREATE TABLE NVTX_EVENTS (start, end, eventType, text, textId, globalTid)")
        t = 1000
        for i in range(draw(st.integers(0, 8))):
            row = {"start": t, "end": t + 10, "deviceId": 0, "streamId": 7, "correlationId": i, "demangledName": 1}
            if draw(st.booleans()):
                row[draw(st.sampled_from(list(row)))] = draw(_NSYS_VALUES)
            values = [row[c] for c in kernel_cols]
            conn.execute(f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES ({', '.join('?' * len(values))})", values)
            conn.execute(
                "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 2, ?, ?)",
                (t - 5, t - 2, draw(st.one_of(st.just(1 << 24 | 1), _NSYS_VALUES)), i),
            )
            if draw(st.booleans()):
                conn.execute(
                    "INSERT INTO NVTX_EVENTS VALUES (?, ?, 59, NULL, 3, ?)",
                    (t - 6, draw(st.one_of(st.just(t + 12), _NSYS_VALUES)), 1 << 24 | 1),
                )
            t += 20
        conn.commit()
        conn.close()
        data = path.read_bytes()
    return draw(mutated(data)) if draw(st.integers(0, 3)) == 0 else data


# --- run.json

run_json_values = st.one_of(
    st.none(),
    st.booleans(),
    ints,
    st.floats(),
    st.text(max_size=8),
    st.lists(ints, max_size=3),
    st.dictionaries(st.text(max_size=5), ints, max_size=3),
)


SAMPLE_RUN = Path(__file__).resolve().parents[1] / "sample_traces" / "cpu_tiny-llama_eager" / "run.json"
RUN_PATHS = [
    ("spec",),
    ("spec", "batch"),
    ("device",),
    ("device_type",),
    ("dtype",),
    ("prompt_len",),
    ("model",),
    ("model", "config"),
    ("model", "source"),
    ("model", "config", "hidden_size"),
    ("model", "config", "num_hidden_layers"),
    ("model", "config", "num_attention_heads"),
    ("model", "config", "num_key_value_heads"),
    ("model", "config", "intermediate_size"),
    ("model", "config", "vocab_size"),
    ("model", "config", "dtype"),
]
hostile_values = st.one_of(
    run_json_values, st.sampled_from([1e308, -1e308, -4, 0, 2**64, 10**30, "H100", [1, 2], {"a": 1}, 1e-300])
)


@st.composite
def run_json_bytes(draw) -> bytes:
    """The shipped sample's run.json with a few fields replaced by hostile values."""
    run = json.loads(SAMPLE_RUN.read_text())
    if draw(st.booleans()):
        run["device"], run["device_type"] = "NVIDIA H100 80GB HBM3", "cuda"
    for path in draw(st.lists(st.sampled_from(RUN_PATHS), min_size=1, max_size=4)):
        node = run
        for key in path[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node[path[-1]] = draw(hostile_values)
    return draw(mutated(_json_bytes(run)))


SAMPLE_TRACE = SAMPLE_RUN.with_name("trace.json.gz")


# --- the contract


def check_contract(trace: bytes, name: str = "trace.json", run_json: bytes | None = None) -> tuple[int, str, str]:
    """Run `analyze --json` on the bytes in-process; assert the contract; return (status, output or the error
    line, all of stderr)."""
    with tempfile.TemporaryDirectory(prefix="stepscope-fuzz-") as tmp:
        path = Path(tmp) / name
        path.write_bytes(trace)
        if run_json is not None:
            (Path(tmp) / "run.json").write_bytes(run_json)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = cli_main(["analyze", str(path), "--json"])
    errors = [line for line in err.getvalue().splitlines() if line.startswith("error:")]
    if status == 2:
        assert len(errors) == 1 and out.getvalue() == "", err.getvalue()
        assert INTERNAL_ERROR not in errors[0], errors[0]
        return status, errors[0], err.getvalue()
    assert status == 0 and not errors, (status, err.getvalue())
    report = json.loads(out.getvalue(), parse_constant=_reject_constant)
    assert_sane_report(report)
    return status, out.getvalue(), err.getvalue()


def _reject_constant(token: str):
    raise AssertionError(f"the JSON report holds {token}")


def assert_sane_report(report: dict) -> None:
    """Invariants every answer keeps, whatever the input: finite numbers, steps in order, busy within span."""
    for path, value in _numbers(report):
        assert math.isfinite(value), f"{path} = {value}"
    summary = report.get("summary") or {}
    busy = summary.get("gpu_busy_pct")
    assert busy is None or 0 <= busy <= 100.0001, f"gpu_busy_pct = {busy}"
    for key in (
        "decode_tokens_per_s",
        "prefill_ms_total",
        "decode_ms_total",
        "decode_step_us",
        "ttft_ms",
        "gpu_idle_per_decode_step_us",
        "launch_call_mean_us",
    ):
        value = summary.get(key)
        assert value is None or value >= 0, f"summary.{key} = {value}"
    for i, step in enumerate(report.get("steps") or []):
        if isinstance(step, dict) and "start_ns" in step and "end_ns" in step:
            assert step["end_ns"] >= step["start_ns"], f"step {i} ends before it starts"
        if isinstance(step, dict) and step.get("gpu_idle_ns") is not None:
            assert step["gpu_idle_ns"] >= 0, f"step {i} idle {step['gpu_idle_ns']}"
    for i, gap in enumerate(report.get("gaps") or []):
        if isinstance(gap, dict) and "dur_ns" in gap:
            assert gap["dur_ns"] >= 0, f"gap {i}"


def _numbers(value, path: str = ""):
    if isinstance(value, bool):
        return
    if isinstance(value, float):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _numbers(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _numbers(v, f"{path}[{i}]")
