"""Reading Perfetto traces not written by Stepscope: SYNTHETIC TrackEvent traces built here with the
perfetto package's own protos and builder, plus broken files and content sniffing."""

from __future__ import annotations

import json

import pytest

from stepscope.analysis import analyze
from stepscope.contracts.markers import format_marker
from stepscope.parsers import TraceError, parse_trace_bytes
from stepscope.parsers.perfetto_reader import looks_like_perfetto, read_perfetto
from stepscope.parsers.trace_processor import trace_processor_status
from tests import synthetic_traces as st

pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")
TraceProtoBuilder = pytest.importorskip("perfetto.trace_builder.proto_builder").TraceProtoBuilder

SEQ = 7
HOST, GPU = 1, 2
BEGIN, END, INSTANT, COUNTER = (
    pb.TrackEvent.TYPE_SLICE_BEGIN,
    pb.TrackEvent.TYPE_SLICE_END,
    pb.TrackEvent.TYPE_INSTANT,
    pb.TrackEvent.TYPE_COUNTER,
)


class _Foreign:
    """A TrackEvent trace the way an instrumented app writes one: a thread track, a GPU track,
    names interned on one sequence, correlation ids as debug annotations."""

    def __init__(self) -> None:
        self.builder = TraceProtoBuilder()
        self.iids: dict[str, int] = {}
        thread = self._packet()
        thread.track_descriptor.uuid = HOST
        thread.track_descriptor.thread.pid = 4242
        thread.track_descriptor.thread.tid = 4243
        thread.track_descriptor.thread.thread_name = "engine"
        gpu = self._packet()
        gpu.track_descriptor.uuid = GPU
        gpu.track_descriptor.name = "CUDA Stream 13 (GPU 1)"
        self.clear_state()

    def _packet(self):
        packet = self.builder.add_packet()
        packet.trusted_packet_sequence_id = SEQ
        return packet

    def clear_state(self) -> None:
        packet = self._packet()
        packet.sequence_flags = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
        self.iids = {}

    def slice(self, track: int, name: str, ts_ns: int, dur_ns: int, correlation: int | None = None) -> None:
        begin = self._packet()
        begin.timestamp = ts_ns
        begin.sequence_flags = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
        event = begin.track_event
        event.type = BEGIN
        event.track_uuid = track
        if name not in self.iids:  # intern on first use, in the packet that uses it
            self.iids[name] = len(self.iids) + 1
            begin.interned_data.event_names.add(iid=self.iids[name], name=name)
        event.name_iid = self.iids[name]
        if correlation is not None:
            event.debug_annotations.add(name="correlation", int_value=correlation)
        end = self._packet()
        end.timestamp = ts_ns + dur_ns
        end.track_event.type = END
        end.track_event.track_uuid = track

    def other(self, kind, track: int, ts_ns: int) -> None:
        packet = self._packet()
        packet.timestamp = ts_ns
        packet.track_event.type = kind
        packet.track_event.track_uuid = track
        if kind == INSTANT:
            packet.track_event.name = "tick"
        else:
            packet.track_event.counter_value = 3

    def bytes(self) -> bytes:
        return self.builder.serialize()


def _generation(trace: _Foreign, decode_steps: int = 3, kernels: int = 4) -> None:
    t, corr = 1_000_000, 1
    for index in range(decode_steps + 1):
        start = t
        kind, tokens = ("prefill", 8) if index == 0 else ("decode", 1)
        for k in range(kernels):
            trace.slice(HOST, "cudaLaunchKernel", t, 3_000, correlation=corr)
            trace.slice(GPU, f"gemm_{k}", t + 3_000, 10_000, correlation=corr)
            t += 13_000
            corr += 1
        trace.slice(HOST, format_marker(kind, 0, index, tokens, 1), start, t - start)
        t += 25_000  # host time between forwards: the GPU idles


def test_foreign_trace_maps_tracks_by_heuristics_and_finds_marked_steps() -> None:
    trace = _Foreign()
    _generation(trace)
    trace.other(INSTANT, HOST, 5_000_000)
    trace.other(COUNTER, GPU, 5_000_000)
    timeline = read_perfetto(trace.bytes())

    counts = timeline.kind_counts()
    assert counts["kernel"] == 16 and counts["runtime"] == 16 and counts["annotation"] == 4
    kernels = timeline.events[timeline.events["kind"] == "kernel"]
    assert set(kernels["device"]) == {1} and set(kernels["stream"]) == {13}
    launches = timeline.events[timeline.events["kind"] == "runtime"]
    assert set(launches["pid"]) == {4242} and set(launches["tid"]) == {4243}
    assert sorted(kernels["correlation"]) == sorted(launches["correlation"]) == list(range(1, 17))
    assert timeline.meta.thread_names[(4242, 4243)] == "engine"
    assert timeline.meta.skipped["instant"] == 1 and timeline.meta.skipped["counter"] == 1
    assert any("guessed" in w for w in timeline.meta.warnings)
    assert timeline.meta.extra["stepscope_export"] is False

    result = analyze(timeline)
    assert result.segmentation.method == "stepscope-markers"
    assert list(result.steps["kind"]) == ["prefill", "decode", "decode", "decode"]
    assert list(result.steps["kernels"]) == [4, 4, 4, 4]
    assert list(result.steps["launches"]) == [4, 4, 4, 4]
    gaps = result.gaps["dur_ns"]
    assert set(gaps) == {3_000, 25_000 + 3_000}  # launch latency inside a step, host time between steps
    assert (gaps == 28_000).sum() == 3 and set(result.gaps["cause"]) == {"launch"}


def test_interned_names_follow_sequence_resets() -> None:
    trace = _Foreign()
    trace.slice(HOST, "first name", 100, 10)
    trace.clear_state()  # iid 1 is free again and now means another name
    trace.slice(HOST, "second name", 200, 10)
    names = list(read_perfetto(trace.bytes()).events["name"].astype(str))
    assert names == ["first name", "second name"]


def test_events_needing_state_before_any_reset_are_skipped_and_said() -> None:
    builder = TraceProtoBuilder()
    packet = builder.add_packet()
    packet.trusted_packet_sequence_id = 3
    packet.sequence_flags = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
    packet.track_event.type = BEGIN
    packet.track_event.name_iid = 1
    trace = _Foreign()
    trace.slice(HOST, "kept", 100, 10)
    timeline = read_perfetto(builder.serialize() + trace.bytes())
    assert list(timeline.events["name"].astype(str)) == ["kept"]
    assert any("state" in w for w in timeline.meta.warnings)


def test_unmatched_ends_and_open_slices_are_counted() -> None:
    trace = _Foreign()
    trace.slice(HOST, "ok", 100, 10)
    stray = trace._packet()
    stray.timestamp = 500
    stray.track_event.type = END
    stray.track_event.track_uuid = GPU
    dangling = trace._packet()
    dangling.timestamp = 600
    dangling.track_event.type = BEGIN
    dangling.track_event.track_uuid = HOST
    dangling.track_event.name = "never ends"
    timeline = read_perfetto(trace.bytes())
    assert len(timeline.events) == 1
    assert timeline.meta.skipped["slice ends without a begin"] == 1
    assert timeline.meta.skipped["slices never ended"] == 1


def _exported() -> bytes:
    from stepscope.exporters.perfetto_trace import perfetto_trace_bytes
    from stepscope.parsers.kineto.reader import read_chrome_trace

    timeline = read_chrome_trace(json.dumps(st.doc(st.synthetic_generation(with_markers=True))).encode())
    return perfetto_trace_bytes(timeline, analyze(timeline))


@pytest.mark.parametrize(
    ("mangle", "reason"),
    [
        (lambda b: b[: len(b) - 7], "truncated Perfetto trace"),
        (lambda b: b[:6], "truncated Perfetto trace: packet 0"),
        (lambda b: b"\x0a\x03\x08\x01\x07", "corrupt Perfetto trace"),
        (lambda b: b + b"\x0a\x02\xff\xff", "Perfetto trace"),
    ],
)
def test_broken_perfetto_files_fail_with_one_line(mangle, reason: str) -> None:
    with pytest.raises(TraceError, match=reason) as info:
        parse_trace_bytes(mangle(_exported()))
    assert "\n" not in str(info.value)


def test_garbage_is_not_sniffed_as_perfetto() -> None:
    for data in (b"\x0a\x02\x0f\x00", b"\x00\x01\x02\x03" * 20, b"\nplain text\nmore text\n"):
        with pytest.raises(TraceError, match="unrecognised") as info:
            parse_trace_bytes(data)
        assert "\n" not in str(info.value)
    assert not looks_like_perfetto(b"{}")


def test_trace_without_track_events_says_trace_processor_is_missing(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("STEPSCOPE_TRACE_PROCESSOR", str(tmp_path / "no_such_binary"))
    builder = TraceProtoBuilder()
    for _ in range(3):
        builder.add_packet().ftrace_stats.phase = pb.FtraceStats.START_OF_TRACE
    with pytest.raises(TraceError, match=r"no TrackEvent slices.*trace_processor_shell.*not on this machine"):
        parse_trace_bytes(builder.serialize())
    assert "not on this machine" in trace_processor_status()


def test_format_is_sniffed_from_content_not_name(tmp_path) -> None:
    from stepscope.parsers import load_trace

    pftrace_named_json = tmp_path / "trace.json"
    pftrace_named_json.write_bytes(_exported())
    json_named_pftrace = st.write(tmp_path / "trace.pftrace", st.synthetic_generation())
    assert load_trace(pftrace_named_json).meta.source_format == "perfetto"
    assert load_trace(json_named_pftrace).meta.source_format == "kineto-json"


def test_foreign_memory_counters_become_the_memory_table() -> None:
    """Counter tracks named for memory (allocated / reserved, on GPU 1) fill the memory table, one row per sample;
    a counter track that is not about memory (the GPU lane's own counter) does not."""
    trace = _Foreign()
    _generation(trace)
    for uuid, name in ((10, "GPU 1 memory allocated"), (11, "GPU 1 memory reserved"), (12, "queue depth")):
        packet = trace._packet()
        packet.track_descriptor.uuid = uuid
        packet.track_descriptor.name = name
        packet.track_descriptor.counter.unit = pb.CounterDescriptor.UNIT_SIZE_BYTES
    for i, (allocated, reserved) in enumerate(((100, 2048), (300, 2048), (200, 4096))):
        for uuid, value in ((10, allocated), (11, reserved), (12, 7)):
            packet = trace._packet()
            packet.timestamp = 2_000_000 + 1000 * i
            packet.track_event.type = COUNTER
            packet.track_event.track_uuid = uuid
            packet.track_event.counter_value = value
    timeline = read_perfetto(trace.bytes())
    memory = timeline.memory
    assert len(memory) == 6 and set(memory["device"]) == {1} and set(memory["device_type"]) == {1}
    assert list(memory.loc[memory["allocated"] >= 0, "allocated"]) == [100, 300, 200]
    assert list(memory.loc[memory["reserved"] >= 0, "reserved"]) == [2048, 2048, 4096]
    assert any("memory counters matched by name" in w for w in timeline.meta.warnings)


def test_a_trace_without_memory_counters_has_no_memory_table() -> None:
    trace = _Foreign()
    _generation(trace)
    trace.other(COUNTER, GPU, 5_000_000)
    assert read_perfetto(trace.bytes()).memory is None
