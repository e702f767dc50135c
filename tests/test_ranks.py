"""Many ranks of one run: rank numbering, grouping warnings, aligned steps, skew, communication, waiting.

SYNTHETIC multi-rank traces are generated here with a known straggler and known arrivals, so every figure
below is derived by hand from the construction, not from the code under test. The real 2-rank CPU
tensor-parallel sample and HTA's sampled 2-rank training pair complete the set.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from stepscope.analysis.ranks import analyze_ranks, collective_ops
from stepscope.analysis.ranks_report import multi_rank_contract
from stepscope.contracts.markers import format_marker
from stepscope.parsers.ranks import find_trace_files, load_ranks, rank_from_name
from tests.synthetic_traces import annotation, kernel, launch

ROOT = Path(__file__).resolve().parents[1]
TP_SAMPLE = ROOT / "sample_traces" / "cpu_tiny-llama_tp2_eager"
HTA_2RANK = ROOT.parent / "shared" / "real_traces" / "hta_sampled_2rank"
if not HTA_2RANK.is_dir():
    HTA_2RANK = Path("/work/shared/real_traces/hta_sampled_2rank")

# The synthetic run: 3 ranks, 6 steps of PERIOD us each. Rank r starts every step OFFSET[r] us late, computes
# COMPUTE[r] us, then enters an all-reduce that ends for everybody XFER us after the last rank arrives.
PERIOD, STEPS, XFER = 1000.0, 6, 20.0
OFFSET = (0.0, 10.0, 5.0)
COMPUTE = (100.0, 100.0, 300.0)  # rank 2 is the straggler
OVERLAP_R0 = 50.0  # rank 0 runs this much compute on a second stream while its all-reduce runs
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def arrival(r: int) -> float:
    return OFFSET[r] + 2.0 + COMPUTE[r]


LATEST = max(arrival(r) for r in range(3))  # 307


def synthetic_rank_doc(
    r: int, ranks: int = 3, host: str | None = "node0", clock_shift_us: float = 0.0, distributed: bool = True
) -> dict:
    events = []
    corr = 1
    for i in range(STEPS):
        base = 10_000.0 + clock_shift_us + i * PERIOD + OFFSET[r]
        kind = "prefill" if i == 0 else "decode"
        events.append(annotation(format_marker(kind, 0, i, 16 if i == 0 else 1, 1), base, 50.0))
        events.append(launch(base + 1.0, 0.5, corr))
        events.append(kernel("gemm_compute", base + 2.0, COMPUTE[r], corr))
        corr += 1
        a = base - OFFSET[r] + arrival(r)
        end = base - OFFSET[r] + LATEST + XFER
        events.append(launch(base + 1.5, 0.5, corr))
        events.append(kernel(NCCL, a, end - a, corr, stream=20))
        corr += 1
        if r == 0:
            events.append(launch(base + 1.7, 0.2, corr))
            events.append(kernel("side_compute", a, OVERLAP_R0, corr, stream=8))
            corr += 1
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "Synthetic GPU"}], "traceEvents": events}
    if distributed:
        doc["distributedInfo"] = {"backend": "nccl", "rank": r, "world_size": ranks}
    if host:
        doc["host_name"] = host
    return doc


def write_run(folder: Path, names=None, **kw) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for r in range(3):
        name = names[r] if names else f"synthetic_rank-{r}.json.gz"
        doc = synthetic_rank_doc(r, **{k: (v[r] if isinstance(v, tuple) else v) for k, v in kw.items()})
        (folder / name).write_bytes(gzip.compress(json.dumps(doc).encode()))
    return folder


def test_rank_from_file_names():
    assert rank_from_name("vllm-worker-rank-3.1712345.pt.trace.json.gz") == (3, "rank-N / rank_N")
    assert rank_from_name("job_rank_12_step5.json") == (12, "rank-N / rank_N")
    assert rank_from_name("sglang-1700-TP-1-DP-0-PP-0-EP-0.trace.json.gz")[0] == 1
    assert rank_from_name("frank-2.json") is None  # "rank" inside a word is not a rank
    assert rank_from_name("trace.json.gz") is None


def test_synthetic_run_known_straggler_skew_and_waits(tmp_path):
    ranked = load_ranks(write_run(tmp_path / "run"))
    assert [f.rank for f in ranked.files] == [0, 1, 2]
    assert {f.rank_source for f in ranked.files} == {"distributedInfo"}
    assert ranked.same_clock and ranked.warnings == ()
    result = analyze_ranks(ranked)
    assert result.alignment == "request+index"
    steps, rs = result.steps, result.rank_steps.set_index(["step", "rank"])
    assert len(steps) == STEPS
    # Steps tile each rank's time line (end = next start), so all but the last last PERIOD us on every rank and
    # end OFFSET apart; the last ends with its work, the all-reduce, at the same instant on every rank.
    assert steps["skew_ns"].tolist() == [10_000] * (STEPS - 1) + [0]
    assert steps["step_ns"].tolist()[:-1] == [1_000_000] * (STEPS - 1)
    for r in range(3):
        wait_us = LATEST - arrival(r)  # 205, 195, 0
        comm_us = LATEST + XFER - arrival(r)  # 225, 215, 20
        exposed_us = comm_us - (OVERLAP_R0 if r == 0 else 0)
        for i in range(STEPS):
            assert rs.loc[(i, r), "wait_ns"] == pytest.approx(wait_us * 1000)
            assert rs.loc[(i, r), "comm_ns"] == round(comm_us * 1000)
            assert rs.loc[(i, r), "exposed_comm_ns"] == round(exposed_us * 1000)
    assert steps["slowest_rank"].tolist() == [2] * STEPS
    straggler = [f for f in result.findings if f.id == "straggler-rank"]
    assert len(straggler) == 1 and straggler[0].evidence["rank"] == 2
    # non-waiting time: rank 2 the whole 1000 us, ranks 0/1 1000 - 205 and 1000 - 195, median 800 -> 20 % more
    assert straggler[0].evidence["excess_pct"] == pytest.approx(20.0)
    out = multi_rank_contract(ranked, result)
    assert [r["rank"] for r in out["ranks"]] == [0, 1, 2]
    run = out["run"]
    assert run["ranks"] == 3 and run["aligned_steps"] == STEPS and run["slowest_rank"] == 2
    assert run["skew_us"]["p50"] == pytest.approx(10.0)
    total_comm = sum(LATEST + XFER - arrival(r) for r in range(3)) * STEPS
    total_time = sum(r["dur_ns"] for r in result.rank_steps.to_dict("records")) / 1000
    assert run["comm_pct"] == pytest.approx(100 * total_comm / total_time)
    assert run["exposed_comm_pct"] == pytest.approx(100 * (total_comm - OVERLAP_R0 * STEPS) / total_time)
    json.dumps(out, allow_nan=False)


def test_different_hosts_compare_durations(tmp_path):
    # rank 1 on another host, its clock 5 s off: waits come from collective durations, skew from step durations
    ranked = load_ranks(write_run(tmp_path / "run", host=("a", "b", "a"), clock_shift_us=(0.0, 5e6, 0.0)))
    assert not ranked.same_clock and "hosts" in ranked.clock_note
    result = analyze_ranks(ranked)
    rs = result.rank_steps.set_index(["step", "rank"])
    for r in range(3):
        assert rs.loc[(2, r), "wait_ns"] == pytest.approx((LATEST - arrival(r)) * 1000)
    assert result.steps["skew_ns"].tolist()[:-1] == [0] * (STEPS - 1)  # every rank's steps last PERIOD


def test_rank_from_name_when_no_metadata_and_warnings(tmp_path):
    names = ("job-TP-0-DP-0-PP-0-EP-0.json.gz", "job-TP-1-DP-0-PP-0-EP-0.json.gz", "job-TP-2-DP-0-PP-0-EP-0.json.gz")
    ranked = load_ranks(write_run(tmp_path / "sg", names=names, distributed=False))
    assert [f.rank for f in ranked.files] == [0, 1, 2]
    assert all(f.rank_source.startswith("file name") for f in ranked.files)
    # world sizes that differ, and time ranges that do not overlap, are read anyway with warnings
    odd = write_run(tmp_path / "odd", ranks=(3, 4, 3), clock_shift_us=(0.0, 1e7, 0.0), host=None)
    ranked = load_ranks(odd)
    text = " ".join(ranked.warnings)
    assert "world sizes differ" in text and "do not overlap" in text and not ranked.same_clock
    dup = write_run(tmp_path / "dup", names=("a_rank-0.json", "b_rank-0.json", "c_rank-1.json"), distributed=False)
    assert "appear more than once" in " ".join(load_ranks(dup).warnings)


def test_step_count_mismatch_warns(tmp_path):
    folder = write_run(tmp_path / "run")
    doc = synthetic_rank_doc(1)
    last = format_marker("decode", 0, STEPS - 1, 1, 1)
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e["name"] != last]
    (folder / "synthetic_rank-1.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
    result = analyze_ranks(load_ranks(folder))
    assert len(result.steps) == STEPS - 1
    assert any("different numbers of steps" in w for w in result.warnings)


def test_tp2_cpu_sample_is_one_run_with_communication_each_step():
    ranked = load_ranks(TP_SAMPLE)
    assert [f.rank for f in ranked.files] == [0, 1] and ranked.warnings == () and ranked.same_clock
    run_json = json.loads((TP_SAMPLE / "run.json").read_text())
    per_forward = run_json["tensor_parallel"]["all_reduces_per_forward"]
    forwards = 1 + run_json["markers"]["decode"]
    for t in ranked.timelines:  # the all-reduces are really there: c10d ops on the main thread, gloo's work
        names = t.events["name"].astype(str)
        assert (names == "c10d::allreduce_").sum() == per_forward * forwards
        assert (names == "gloo:all_reduce").sum() == per_forward * forwards
        assert len(collective_ops(t)) == per_forward * forwards
    result = analyze_ranks(ranked)
    assert len(result.steps) == forwards and result.alignment == "request+index"
    decode = result.rank_steps[result.rank_steps["kind"] == "decode"]
    assert len(decode) == 2 * (forwards - 1)
    assert (decode["comm_ns"] > 0).all()
    assert (result.rank_steps["wait_ns"] >= 0).all()
    run = multi_rank_contract(ranked, result)["run"]
    assert run["ranks"] == 2 and run["aligned_steps"] == forwards and 0 < run["comm_pct"] < 100
    assert run["slowest_rank"] in (0, 1)


def test_hta_two_rank_training_pair_groups_as_one_run():
    files = find_trace_files(HTA_2RANK)
    assert len(files) == 2
    ranked = load_ranks(HTA_2RANK)
    assert [f.rank for f in ranked.files] == [0, 1]
    assert any("2 of a world of 128" in w for w in ranked.warnings)
    result = analyze_ranks(ranked)
    assert len(result.steps) == 0  # a training job: no generation steps
    for r, t in zip(result.ranks, ranked.timelines, strict=False):
        ev = t.events
        nccl = ev[(ev["kind"] == "kernel") & ev["name"].astype(str).str.contains("nccl", case=False)]
        assert len(nccl) > 0
        row = result.totals.set_index("rank").loc[r]
        assert row["collectives"] == len(nccl)  # one stream each, no nesting among kernels
        assert 0 < row["exposed_comm_ns"] <= row["comm_ns"] <= nccl["dur"].sum()
    run = multi_rank_contract(ranked, result)["run"]
    assert run["ranks"] == 2 and run["aligned_steps"] == 0 and run["comm_pct"] > 0
    # no step aligns: the run says it could not judge, it does not claim "no straggler"
    assert [f.id for f in result.findings] == ["ranks-not-judged"]
    assert "Could not judge" in result.findings[0].title


def test_run_folder_json_and_bad_rank_file(tmp_path):
    from stepscope.analysis.front_door import NO_CACHE, open_run
    from stepscope.parsers.errors import TraceError

    out = open_run(TP_SAMPLE, cache=NO_CACHE).report
    text = json.dumps(out, allow_nan=False)
    assert [r["rank"] for r in out["ranks"]] == [0, 1]
    single_keys = {"format", "device", "events", "segmentation", "requests", "steps", "summary", "findings"}
    assert all(single_keys <= set(r) for r in out["ranks"])
    assert {"ranks", "aligned_steps", "step_time_ms", "skew_us", "comm_pct", "exposed_comm_pct", "slowest_rank"} <= set(
        out["run"]
    )
    assert "NaN" not in text
    folder = write_run(tmp_path / "run")
    (folder / "rank-9.json").write_bytes(b"{not json")
    with pytest.raises(TraceError, match=r"rank-9\.json"):
        open_run(folder, cache=NO_CACHE)
