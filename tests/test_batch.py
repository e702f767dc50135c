"""Batch analysis: ~20 inputs (real traces, shipped samples, hostile files) -> Parquet tables, locally and on Ray.

Local and Ray must give identical tables (rows sorted by key, timing and path columns left out); hostile files
become error rows with one-line reasons; a second run resumes without redoing work; a worker killed mid-batch
(a test hook makes the first task os._exit) loses nothing.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from stepscope.batch.cli import main as batch_main
from stepscope.batch.runner import run_batch
from stepscope.batch.work import PATH_FIELDS, TIMING_FIELDS

ROOT = Path(__file__).resolve().parents[1]
REAL = Path("/work/shared/real_traces")
if not REAL.is_dir():
    REAL = ROOT.parent / "shared" / "real_traces"
SAMPLES = ROOT / "sample_traces"

HOSTILE = {
    "empty.json": b"",
    "junk.json.gz": b"\x1f\x8b" + b"\x00garbage" * 10,  # gzip magic, then nonsense
    "truncated.json": b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "d',
    "not_a_trace.json": json.dumps({"hello": "world"}).encode(),
    "deep.json": b'{"traceEvents": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
}


def build_inputs(folder: Path) -> dict:
    """Copy the real traces and samples, add one re-compressed copy (new bytes, same trace), one exact duplicate
    (same bytes: analysed once) and the hostile files. Returns what a correct batch must produce."""
    folder.mkdir()
    for i, p in enumerate(sorted(REAL.rglob("*.json*"))):
        shutil.copy(p, folder / f"{i:02d}_{p.name}")
    for run in sorted(p for p in SAMPLES.iterdir() if p.is_dir()):  # run folders keep their run.json
        shutil.copytree(run, folder / "samples" / run.name)
    eager = SAMPLES / "cpu_tiny-llama_eager" / "trace.json.gz"
    (folder / "recompressed.json.gz").write_bytes(gzip.compress(gzip.decompress(eager.read_bytes()), mtime=1))
    shutil.copy(eager, folder / "duplicate.json.gz")
    for name, data in HOSTILE.items():
        (folder / name).write_bytes(data)
    files = [p for p in folder.rglob("*") if p.is_file() and p.name != "run.json"]
    # the shipped tensor-parallel sample keeps its rank-N files together: one input, one row per rank
    tp2 = folder / "samples" / "cpu_tiny-llama_tp2_eager"
    single = [p for p in files if p.parent != tp2]
    keys = {hashlib.sha256(p.read_bytes()).hexdigest() for p in single}
    tp2_ranks = len(list(tp2.glob("rank-*")))
    return {
        "files": len(files),
        "distinct": len(keys) + 1,
        "rows": len(keys) + tp2_ranks,
        "tp2": tp2,
        "tp2_ranks": tp2_ranks,
        "errors": len(HOSTILE),
        "eager_key": hashlib.sha256(eager.read_bytes()).hexdigest(),
    }


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("batch") / "in"
    return folder, build_inputs(folder)


@pytest.fixture(scope="module")
def local_out(inputs, tmp_path_factory):
    folder, _ = inputs
    out = tmp_path_factory.mktemp("local") / "out"
    report = run_batch(str(folder), str(out), workers=2, progress=None)
    return out, report


def comparable(out: Path) -> dict:
    tables = {}
    for name in ("traces", "steps", "gaps", "categories"):
        t = pq.read_table(out / f"{name}.parquet").to_pandas()
        t = t.drop(columns=[c for c in (*TIMING_FIELDS, *PATH_FIELDS) if c in t.columns])
        by = ["key", "rank", "step", "category"] if name == "categories" else list(t.columns[:2])
        tables[name] = t.sort_values(by, kind="stable").reset_index(drop=True)
    return tables


def test_local_batch_rows_errors_and_steps(inputs, local_out):
    _, expect = inputs
    out, report = local_out
    assert expect["files"] >= 20
    assert report.inputs == expect["distinct"] <= expect["files"] - 1  # exact duplicates are one input
    traces = pq.read_table(out / "traces.parquet").to_pandas()
    assert expect["tp2_ranks"] == 2
    assert len(traces) == expect["rows"] and traces["key"].nunique() == expect["distinct"]
    assert not traces.duplicated(["key", "rank"]).any()
    errors = traces[traces["status"] == "error"]
    assert len(errors) == expect["errors"] == report.errors
    assert sorted(Path(p).name for p in errors["path"]) == sorted(HOSTILE)
    assert all(e and "\n" not in e and len(e) <= 300 for e in errors["error"])
    eager = traces.set_index("key").loc[expect["eager_key"]]
    assert eager["copies"] == 2 and eager["mode"] == "eager" and eager["model"] == "preset:tiny-llama"
    steps = pq.read_table(out / "steps.parquet").to_pandas()
    run = json.loads((SAMPLES / "cpu_tiny-llama_eager" / "run.json").read_text())
    expected_steps = run["markers"]["prefill"] + run["markers"]["decode"]
    assert (steps["key"] == expect["eager_key"]).sum() == expected_steps == eager["steps"]
    per_key = steps.groupby(["key", steps["rank"].fillna(-1)]).size()
    ok = traces[traces["status"] == "ok"]
    assert all(
        per_key.get((k, -1 if r != r else r), 0) == n
        for k, r, n in zip(ok["key"], ok["rank"], ok["steps"], strict=True)
    )
    assert len(pq.read_table(out / "gaps.parquet")) > 0
    assert not list(out.glob(".*partial"))


def _root_host_op_us(trace: Path, lo_us: float, hi_us: float) -> float:
    """Total duration of the outermost host ops (per thread) starting in [lo, hi), read from the raw JSON: the
    self times of all ops nested under them add up to exactly this."""
    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    by_thread: dict = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op":
            by_thread.setdefault(e["tid"], []).append((e["ts"], -e["dur"]))
    total = 0.0
    for ops in by_thread.values():
        end = -1.0
        for ts, neg_dur in sorted(ops):
            if ts >= end:  # not inside an earlier op: an outermost one
                total += -neg_dur if lo_us <= ts < hi_us else 0.0
            end = max(end, ts - neg_dur)
    return total


def test_categories_table_is_the_median_decode_steps_anatomy(inputs, local_out):
    _, expect = inputs
    out, _ = local_out
    cats = pq.read_table(out / "categories.parquet").to_pandas()
    steps = pq.read_table(out / "steps.parquet").to_pandas()
    traces = pq.read_table(out / "traces.parquet").to_pandas()
    assert set(cats["key"]) <= set(traces.loc[traces["status"] == "ok", "key"])
    eager = cats[cats["key"] == expect["eager_key"]]
    assert eager["step"].nunique() == 1 and set(eager["step_kind"]) == {"decode"}
    assert {"gemm", "attention", "norm"} <= set(eager["category"])
    row = steps[(steps["key"] == expect["eager_key"]) & (steps["step"] == int(eager["step"].iloc[0]))].iloc[0]
    decode = steps[(steps["key"] == expect["eager_key"]) & (steps["kind"] == "decode")]
    spans = (decode["end_us"] - decode["start_us"]).sort_values().to_numpy()
    assert spans[0] <= row["end_us"] - row["start_us"] <= spans[-1]
    raw = _root_host_op_us(SAMPLES / "cpu_tiny-llama_eager" / "trace.json.gz", row["start_us"], row["end_us"])
    assert eager["time_us"].sum() == pytest.approx(raw, rel=1e-6)


def test_a_folder_of_ranks_is_one_input_with_a_rank_column(local_out):
    out, _ = local_out
    traces = pq.read_table(out / "traces.parquet").to_pandas()
    run = traces[traces["path"].str.contains("cpu_tiny-llama_tp2_eager")].sort_values("rank")
    assert run["key"].nunique() == 1 and run["rank"].tolist() == [0, 1]
    assert [Path(p).name for p in run["path"]] == ["rank-0.trace.json.gz", "rank-1.trace.json.gz"]
    assert (run["status"] == "ok").all() and (run["comm_pct"] > 0).all()
    assert (run["mode"] == "eager").all()
    # each rank's share of communication recomputed from its steps and its raw c10d all-reduces
    steps = pq.read_table(out / "steps.parquet").to_pandas()
    for rank, path in zip(run["rank"], run["path"], strict=True):
        mine = steps[(steps["key"] == run["key"].iloc[0]) & (steps["rank"] == rank)]
        events = json.loads(gzip.decompress(Path(path).read_bytes()))["traceEvents"]
        colls = [
            (e["ts"], e["ts"] + e["dur"]) for e in events if e.get("ph") == "X" and e["name"] == "c10d::allreduce_"
        ]
        inside = sum(
            max(0.0, min(b, hi) - max(a, lo))
            for lo, hi in zip(mine["start_us"], mine["end_us"], strict=True)
            for a, b in colls
        )
        share = 100.0 * inside / (mine["end_us"] - mine["start_us"]).sum()
        assert run.set_index("rank").loc[rank, "comm_pct"] == pytest.approx(share, rel=0.02)


def test_resume_skips_done_work(inputs, local_out):
    folder, expect = inputs
    out, _ = local_out
    before = {p.name: p.stat().st_mtime_ns for p in out.glob("*.parquet")}
    report = run_batch(str(folder), str(out), workers=2, progress=None)
    assert report.analysed == 0 and report.skipped == expect["distinct"]
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("*.parquet")} == before


def test_resume_after_cut_short_flush_redoes_only_missing(inputs, local_out, tmp_path):
    folder, expect = inputs
    out = tmp_path / "out"
    shutil.copytree(local_out[0], out)
    traces = pq.read_table(out / "traces.parquet")
    eager = expect["eager_key"]
    keep = [k != eager for k in traces.column("key").to_pylist()]
    pq.write_table(traces.filter(keep), out / "traces.parquet")  # steps of `eager` on disk, its traces row not
    seen = []
    report = run_batch(str(folder), str(out), workers=1, progress=None, on_progress=lambda *a: seen.append(a))
    assert seen == [(1, 1, 0)]
    assert report.analysed == 1 and report.skipped == expect["distinct"] - 1
    steps = pq.read_table(out / "steps.parquet").to_pandas()
    assert (steps["key"] == eager).sum() == 32  # not doubled
    assert comparable(out)["steps"].equals(comparable(local_out[0])["steps"])


def test_killed_local_worker_loses_nothing(inputs, local_out, tmp_path):
    folder, _ = inputs
    hook = tmp_path / "hook"
    hook.mkdir()
    out = tmp_path / "out"
    run_batch(str(folder), str(out), workers=2, progress=None, crash_once_dir=str(hook))
    assert (hook / "crashed-once").exists()  # a worker really died
    a, b = comparable(out), comparable(local_out[0])
    for name in a:
        assert a[name].equals(b[name]), name


def test_cli_batch_and_bad_source(inputs, tmp_path, capsys):
    folder, _ = inputs
    assert batch_main(["batch", str(folder / "0*"), "--out", str(tmp_path / "o"), "--workers", "1"]) == 0
    assert "analysed" in capsys.readouterr().out
    assert batch_main(["batch", str(tmp_path / "nothing"), "--out", str(tmp_path / "o2")]) == 2
    assert capsys.readouterr().err.startswith("error:")


def test_unreachable_ray_address_is_one_line_error(inputs, tmp_path, capsys):
    pytest.importorskip("ray")
    folder, _ = inputs
    assert batch_main(["batch", str(folder), "--out", str(tmp_path / "o"), "--ray", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error:") and "127.0.0.1:1" in err[-1]


def test_ray_matches_local_and_survives_a_killed_worker(inputs, local_out, tmp_path):
    ray = pytest.importorskip("ray")
    folder, expect = inputs
    hook = tmp_path / "hook"
    hook.mkdir()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        report = run_batch(
            str(folder), str(tmp_path / "out"), ray_address="auto", progress=None, crash_once_dir=str(hook)
        )
    finally:
        ray.shutdown()
    assert report.runner == "ray" and report.analysed == expect["distinct"] and report.errors == expect["errors"]
    assert (hook / "crashed-once").exists()  # one task's worker died and Ray retried it
    a, b = comparable(tmp_path / "out"), comparable(local_out[0])
    for name in a:
        assert a[name].equals(b[name]), name
