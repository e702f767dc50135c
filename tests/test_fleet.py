"""batch/fleet.py: which traces of a batch are outliers (per group), which are slowest, which rows may be opened."""

from __future__ import annotations

import hashlib

import pandas as pd

from stepscope.batch.fleet import batch_folders, load_fleet, openable_trace, slowest


def _write(folder, rows):
    folder.mkdir(parents=True)
    pd.DataFrame(rows).to_parquet(folder / "traces.parquet")


def _row(key, itl, device="A", status="ok", ttft=1.0):
    return {
        "key": key,
        "path": f"/x/{key}.json",
        "status": status,
        "error": None if status == "ok" else "bad",
        "device": device,
        "model": "m",
        "mode": "eager",
        "itl_p50_ms": itl,
        "ttft_ms": ttft,
        "gpu_busy_pct": 50.0,
        "kernels_per_decode_step": 10.0,
    }


def test_outliers_are_judged_within_their_group(tmp_path):
    # group A: 10, 11, 12, 13, 100 -> Q1 11, Q3 13, fence 13 + 1.5 * 2 = 16: only 100 is out
    # group B: three traces (too few to judge), one of them very slow: nothing flagged
    rows = [_row(f"a{i}", v) for i, v in enumerate([10, 11, 12, 13, 100])]
    rows += [_row(f"b{i}", v, device="B") for i, v in enumerate([1, 1, 50])]
    rows += [_row("err", None, status="error")]
    _write(tmp_path / "run1", rows)
    fleet = load_fleet(tmp_path / "run1")
    assert fleet.errors == 1
    flagged = fleet.traces.loc[fleet.traces["outlier"], "key"].tolist()
    assert flagged == ["a4"]
    assert "itl_p50_ms" in fleet.traces.set_index("key").loc["a4", "outlier_reason"]
    top = slowest(fleet, n=2)
    assert top["key"].tolist() == ["a4", "b2"]  # the two slowest; the outlier is among them already


def test_batch_folders_lists_only_outputs_under_the_root(tmp_path):
    _write(tmp_path / "one", [_row("k", 1.0)])
    (tmp_path / "not_a_batch").mkdir()
    assert [p.name for p in batch_folders(tmp_path)] == ["one"]
    assert batch_folders(tmp_path / "missing") == []


def test_a_row_opens_only_while_its_file_holds_the_analysed_bytes(tmp_path):
    trace = tmp_path / "t.json"
    trace.write_bytes(b'{"traceEvents": []}')
    key = hashlib.sha256(trace.read_bytes()).hexdigest()
    assert openable_trace(str(trace), key) == trace
    trace.write_bytes(b'{"traceEvents": [ ]}')
    assert openable_trace(str(trace), key) is None
    (tmp_path / "secret.txt").write_bytes(b"x")
    assert openable_trace(str(tmp_path / "secret.txt"), hashlib.sha256(b"x").hexdigest()) is None


def test_a_rank_row_opens_only_while_its_run_is_unchanged(tmp_path):
    import shutil
    from pathlib import Path

    from stepscope.batch.inputs import run_key

    run = tmp_path / "tp2"
    shutil.copytree(Path(__file__).resolve().parents[1] / "sample_traces" / "cpu_tiny-llama_tp2_eager", run)
    files = sorted(run.glob("rank-*"))
    key = run_key(files)[0]
    assert openable_trace(str(files[1]), key, rank=1) == files[1]
    assert openable_trace(str(files[1]), hashlib.sha256(files[1].read_bytes()).hexdigest(), rank=1) is None
    files[0].write_bytes(files[0].read_bytes() + b" ")  # the other rank changed: not the analysed run any more
    assert openable_trace(str(files[1]), key, rank=1) is None
