"""Perfetto export: a SYNTHETIC generation trace written with the perfetto package's builder and read
back by Stepscope's own reader gives the same Timeline, hence the same steps and gaps."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from stepscope.analysis import analyze
from stepscope.app.cli.main import main
from stepscope.exporters.perfetto_trace import perfetto_trace_bytes, write_perfetto
from stepscope.exporters.perfetto_ui import open_in_perfetto_html
from stepscope.parsers import load_trace, parse_trace_bytes
from stepscope.parsers.kineto.reader import read_chrome_trace
from stepscope.parsers.timeline import COLUMNS
from tests import synthetic_traces as st

ROOT = Path(__file__).resolve().parents[1]
STEP_FIELDS = ["kind", "request", "index", "start_ns", "end_ns", "tokens", "kernels", "launches", "gpu_idle_ns"]


def _export_main(argv: list[str]) -> int:
    """`python -m app.cli export ...` in-process; test_readme_export_command runs it as README writes it."""
    return main(argv)


def test_readme_export_command(tmp_path) -> None:
    """README's command line, run as a user would: fails if export is not wired into the CLI."""
    trace = st.write(tmp_path / "t.json", st.synthetic_generation())
    out = tmp_path / "t.pftrace"
    proc = subprocess.run(
        [sys.executable, "-m", "app.cli", "export", str(trace), "--perfetto", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert len(analyze(parse_trace_bytes(out.read_bytes())).steps) == 7  # 1 prefill + 6 decode, as generated


def _timeline(**kwargs):
    return read_chrome_trace(json.dumps(st.doc(st.synthetic_generation(**kwargs))).encode())


@pytest.mark.parametrize("with_markers", [True, False])
def test_round_trip_gives_the_same_steps_and_gaps(with_markers: bool) -> None:
    timeline = _timeline(with_markers=with_markers)
    before = analyze(timeline)
    back = parse_trace_bytes(perfetto_trace_bytes(timeline, before))
    after = analyze(back)

    assert back.meta.source_format == "perfetto"
    assert back.meta.extra["stepscope_export"] is True
    assert back.meta.warnings == ()
    assert back.device_name == "Synthetic GPU"
    assert after.segmentation.method == before.segmentation.method
    assert len(before.steps) == 7
    assert after.steps[STEP_FIELDS].equals(before.steps[STEP_FIELDS])
    assert after.gaps.equals(before.gaps)
    assert len(before.gaps) > 0


def test_round_trip_keeps_every_row() -> None:
    timeline = _timeline(with_markers=True)
    back = parse_trace_bytes(perfetto_trace_bytes(timeline, analyze(timeline)))
    a, b = timeline.events, back.events
    assert len(a) == len(b)
    for col in COLUMNS:
        assert (a[col].astype(str).to_numpy() == b[col].astype(str).to_numpy()).all(), col
    assert (a["input_dims"].astype(str).to_numpy() == b["input_dims"].astype(str).to_numpy()).all()
    # the phases, gaps and counters are Stepscope's own output: skipped, and counted as such
    assert back.meta.skipped["counter"] > 0
    assert any("derived" in reason for reason in back.meta.skipped)


def test_overlapping_slices_on_one_stream_go_to_extra_lanes() -> None:
    events = st.synthetic_generation(decode_steps=1, with_markers=True)
    events.append(st.kernel("overlapping", 1010.0, 40.0, corr=999))  # crosses kernel_0 without nesting
    timeline = read_chrome_trace(json.dumps(st.doc(events)).encode())
    data = perfetto_trace_bytes(timeline, analyze(timeline))
    back = parse_trace_bytes(data)
    assert b"GPU 0 stream 7 lane 2" in data
    assert (back.events["stream"] == 7).sum() == (timeline.events["stream"] == 7).sum()
    assert analyze(back).gaps.equals(analyze(timeline).gaps)


def test_export_contains_the_labelled_tracks() -> None:
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace

    timeline = _timeline(with_markers=True)
    result = analyze(timeline)
    trace = Trace.FromString(perfetto_trace_bytes(timeline, result))
    tracks = {p.track_descriptor.name for p in trace.packet if p.HasField("track_descriptor")}
    assert {"Stepscope phases", "steps", "GPU 0 idle gaps", "kernels per step", "GPU idle per step"} <= tracks
    assert "GPU 0 stream 7" in tracks and "GPU 0 · Synthetic GPU" in tracks
    assert any(t.startswith("host launches") for t in tracks)
    interned = {e.name for p in trace.packet for e in p.interned_data.event_names}
    assert "prefill r0 #0 · 16 tok" in interned and "decode r0 #6 · 1 tok" in interned
    gap_names = [n for n in interned if n.startswith("idle ")]
    assert gap_names and all(n.endswith(("launch", "sync", "other")) for n in gap_names)
    counters = [p.track_event for p in trace.packet if p.HasField("track_event") and p.track_event.type == 4]
    assert len(counters) == 2 * len(result.steps) + 2
    # launch -> kernel arrows
    assert any(p.track_event.flow_ids for p in trace.packet if p.HasField("track_event"))


def test_write_is_atomic_and_cli_export_works(tmp_path, capsys) -> None:
    trace = st.write(tmp_path / "gen.json", st.synthetic_generation(with_markers=True))
    out = tmp_path / "gen.pftrace"
    assert _export_main(["export", str(trace), "--perfetto", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "7 steps" in printed and str(out) in printed
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp file left
    # the exported file analyses like its source, through the ordinary entry point
    assert main(["analyze", str(out), "--json"]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert main(["analyze", str(trace), "--json"]) == 0
    source = json.loads(capsys.readouterr().out)
    assert exported["format"] == "perfetto"
    assert exported["steps"] == source["steps"]
    assert exported["summary"] == source["summary"]


def test_cli_export_reports_bad_input_in_one_line(tmp_path, capsys) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert _export_main(["export", str(bad), "--perfetto", str(tmp_path / "o.pftrace")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and err.count("\n") == 1
    good = st.write(tmp_path / "gen.json", st.synthetic_generation())
    assert _export_main(["export", str(good), "--perfetto", str(tmp_path / "missing" / "o.pftrace")]) == 2
    assert capsys.readouterr().err.startswith("error: cannot write")


def test_write_perfetto_replaces_the_target(tmp_path) -> None:
    timeline = _timeline()
    out = tmp_path / "x.pftrace"
    out.write_bytes(b"old")
    written = write_perfetto(timeline, analyze(timeline), out)
    assert written.bytes_written == out.stat().st_size > 3
    assert load_trace(out).meta.source_format == "perfetto"


def test_open_in_perfetto_html_embeds_only_base64() -> None:
    events = st.synthetic_generation(decode_steps=1)
    events.append(st.annotation("</script><script>alert(1)</script>", 1000.0, 1.0))
    timeline = read_chrome_trace(json.dumps(st.doc(events)).encode())
    data = perfetto_trace_bytes(timeline, analyze(timeline))
    html = open_in_perfetto_html(data, title="<b>evil</b>")
    assert "alert(1)" not in html and "<b>evil" not in html
    assert html.count("<script>") == 1
    assert "PING" in html and "PONG" in html and "https://ui.perfetto.dev" in html
    with pytest.raises(ValueError, match="download it"):
        open_in_perfetto_html(data, max_bytes=10)


def test_empty_analysis_still_exports() -> None:
    timeline = read_chrome_trace(json.dumps(st.doc([st.kernel("k", 10.0, 5.0, 1)])).encode())
    result = analyze(timeline)
    assert result.steps.empty
    back = parse_trace_bytes(perfetto_trace_bytes(timeline, result))
    assert np.array_equal(back.events["ts"].to_numpy(), timeline.events["ts"].to_numpy())
