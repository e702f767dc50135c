"""Every real trace in tests/data/real loads with per-kind counts that match the file.

Sources (MIT / BSD-3-Clause, see tests/data/real/PROVENANCE.md): AMD-AGI/TraceLens,
facebookresearch/HolisticTraceAnalysis, pytorch/kineto, facebookresearch/param.
The expected counts are computed here independently, with the standard json module.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter

import numpy as np
import pytest

from stepscope.parsers import load_trace
from tests.conftest import REAL_TRACES, real_trace

NAMES = sorted(p.name for p in REAL_TRACES.glob("*.json*")) if REAL_TRACES.is_dir() else []


# Kineto's category names (libkineto ActivityType, current and 2021 spellings) -> Timeline kinds, written out
# here from Kineto's documentation rather than imported from the reader, so the reader's table is under test.
KINETO_KINDS = {
    "kernel": "kernel", "Kernel": "kernel",
    "gpu_memcpy": "memcpy", "Memcpy": "memcpy",
    "gpu_memset": "memset", "Memset": "memset",
    "gpu_user_annotation": "gpu_annotation",
    "cuda_runtime": "runtime", "Runtime": "runtime",
    "cuda_driver": "driver", "Driver": "driver",
    "cpu_op": "cpu_op", "Operator": "cpu_op",
    "user_annotation": "annotation", "User annotation": "annotation",
    "python_function": "python", "Python": "python",
    "cuda_sync": "sync",
}  # fmt: skip


def _raw_events(path):
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        doc = json.load(fh)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def test_all_eleven_real_traces_are_present():
    assert len(NAMES) == 11


@pytest.mark.parametrize("name", NAMES)
def test_kind_counts_match_the_file(name):
    path = real_trace(name)
    events = _raw_events(path)
    expected = Counter(KINETO_KINDS.get(e.get("cat", ""), "other") for e in events if e.get("ph") == "X")
    timeline = load_trace(path)
    got = {k: v for k, v in timeline.kind_counts().items() if v}
    assert got == dict(expected)
    assert timeline.meta.event_count == len(events)
    # nothing silently dropped: every non-X event is accounted for in skipped
    assert sum(timeline.meta.skipped.values()) == sum(1 for e in events if e.get("ph") != "X")


@pytest.mark.parametrize("name", NAMES)
def test_gpu_activity_links_to_its_launch_call(name):
    path = real_trace(name)
    ev = load_trace(path).events
    gpu = ev[ev["kind"].isin(["kernel", "memcpy", "memset"])]
    calls = ev[ev["kind"].isin(["runtime", "driver"])]
    raw = [e for e in _raw_events(path) if e.get("ph") == "X" and e.get("cat") in ("kernel", "Kernel")]
    raw_linked = sum(1 for e in raw if isinstance(e.get("args", {}).get("correlation"), int))
    assert int((gpu[gpu["kind"] == "kernel"]["correlation"] >= 0).sum()) == raw_linked
    linked = gpu["correlation"].isin(calls["correlation"])
    # Counted from the JSON: GPU events whose correlation id is also a runtime/driver call's. Some captures
    # hold GPU work launched before the profiler's host window opened, so this is not always all of them.
    raw_x = [e for e in _raw_events(path) if e.get("ph") == "X"]
    call_ids = {
        e["args"]["correlation"]
        for e in raw_x
        if KINETO_KINDS.get(e.get("cat")) in ("runtime", "driver")
        and isinstance(e.get("args", {}).get("correlation"), int)
    }
    raw_gpu = [e for e in raw_x if KINETO_KINDS.get(e.get("cat")) in ("kernel", "memcpy", "memset")]
    assert int(linked.sum()) == sum(1 for e in raw_gpu if e.get("args", {}).get("correlation") in call_ids)
    assert len(gpu) == len(raw_gpu)


def test_timestamps_are_ns_on_the_trace_clock():
    path = real_trace("kineto_tiny_sync_h100.json")
    events = _raw_events(path)
    kernel = next(e for e in events if e.get("cat") == "kernel")
    ev = load_trace(path).events
    row = ev[ev["kind"] == "kernel"].iloc[0]
    assert row["ts"] == round(kernel["ts"] * 1000)
    assert row["dur"] == round(kernel["dur"] * 1000)
    assert load_trace(path).meta.base_time_ns == 1775078550000000000


def test_absolute_integer_microsecond_traces_keep_full_precision():
    path = real_trace("hta_alexnet_a100.json.gz")
    first = min(e["ts"] for e in _raw_events(path) if e.get("ph") == "X")
    ev = load_trace(path).events
    assert int(ev["ts"].iloc[0]) == first * 1000
    assert np.all(np.diff(ev["ts"].to_numpy()) >= 0)


def test_legacy_2021_categories_map_to_current_kinds_and_links():
    timeline = load_trace(real_trace("kineto_resnet50_v100_legacy_categories.json.gz"))
    counts = timeline.kind_counts()
    assert counts["kernel"] == 8772 and counts["runtime"] == 11923 and counts["cpu_op"] == 23646
    ev = timeline.events
    kernels = ev[ev["kind"] == "kernel"]
    assert (kernels["external_id"] >= 0).all()  # legacy "external id" spelling
    assert (kernels["stream"] == 7).all() and (kernels["device"] == 0).all()


def test_cuda_graph_replay_kernels_share_the_launch_correlation():
    ev = load_trace(real_trace("tracelens_vllm_gptoss_decode_fullgraph_rocm.json.gz")).events
    launch = ev[ev["name"] == "hipGraphLaunch"]
    assert len(launch) == 1
    corr = int(launch["correlation"].iloc[0])
    replayed = ev[(ev["kind"] == "kernel") & (ev["correlation"] == corr)]
    assert len(replayed) > 400


def test_string_pids_and_metadata_names_are_kept():
    timeline = load_trace(real_trace("tracelens_hf_qwen1.5-0.5b_forward_h100.json.gz"))
    assert "Spans" in timeline.meta.id_labels.values()
    assert timeline.meta.process_names  # "M" process_name events
    assert timeline.device_name == "NVIDIA H100 80GB HBM3"


@pytest.mark.parametrize(
    "name",
    ["tracelens_vllm_gptoss_decode_fullgraph_rocm.json.gz", "tracelens_vllm_gptoss_mixed_piecewise_rocm.json.gz"],
)
def test_rocm_trace_without_gpu_name_is_named_by_its_properties(name):
    # The file's deviceProperties (read here from the JSON): "name": "", gfx 9.4, 304 CUs, 192 GiB, wavefront 64:
    # only the MI300X has those (AMD's datasheets: the MI325X has 256 GB, the MI300A 228 CUs).
    props = json.loads(gzip.decompress(real_trace(name).read_bytes()))["deviceProperties"]
    assert {
        (p["name"], p["computeMajor"], p["computeMinor"], p["numSms"], round(p["totalGlobalMem"] / 2**30))
        for p in props
    } == {("", 9, 4, 304, 192)}
    timeline = load_trace(real_trace(name))
    name_found, source = timeline.device_source
    assert name_found == timeline.device_name == "AMD Instinct MI300X"
    assert "no name" in source and "304 compute units" in source and "192 GiB" in source


def test_unnamed_device_that_fits_no_part_stays_unnamed(tmp_path):
    doc = json.loads(gzip.decompress(real_trace("tracelens_vllm_gptoss_decode_fullgraph_rocm.json.gz").read_bytes()))
    for p in doc["deviceProperties"]:
        p["numSms"] = 200  # no Instinct part has 200 CUs at gfx 9.4
    variant = tmp_path / "variant.json"
    variant.write_text(json.dumps(doc))
    timeline = load_trace(variant)
    assert timeline.device_name is None and timeline.device_source == (None, None)
    assert timeline.meta.devices[0].sm_count == 200  # the properties are there, the name is empty


def test_bare_array_form_reads_like_the_object_form(tmp_path):
    events = _raw_events(real_trace("kineto_tiny_sync_h100.json"))
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(events))
    a = load_trace(real_trace("kineto_tiny_sync_h100.json")).events
    b = load_trace(bare).events
    assert a[["ts", "dur", "correlation"]].equals(b[["ts", "dur", "correlation"]])


def test_metadata_sort_order_is_kept():
    path = real_trace("tracelens_hf_qwen1.5-0.5b_forward_h100.json.gz")
    raw = [e for e in _raw_events(path) if e.get("ph") == "M" and e.get("name") == "process_sort_index"]
    order = load_trace(path).meta.sort_order
    assert raw and all(order[(e["pid"], None)] == e["args"]["sort_index"] for e in raw if isinstance(e["pid"], int))
