"""The analyze command keeps DESIGN.md's contract: JSON shape, exit status 2 and one error line."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT, real_trace
from tests.synthetic_traces import synthetic_generation, write

STEP_KEYS = {
    "kind",
    "request",
    "index",
    "start_us",
    "end_us",
    "tokens",
    "kernels",
    "launches",
    "gpu_busy_us",
    "gpu_idle_us",
    "categories",
    "memory_allocated_end_bytes",
    "memory_peak_bytes",
    "sequences",
    "prefill_tokens",
    "decode_sequences",
    "gpu_lead_us",
    "gpu_tail_us",
}  # categories: issue 12's; memory_*: issue 25's (null without memory events); sequences ...: issue 24's;
# gpu_lead_us, gpu_tail_us: issue 29's (2026-12-01)
SUMMARY_KEYS = {
    "prefill_steps",
    "decode_steps",
    "ttft_ms",
    "itl_ms",
    "decode_tokens_per_s",
    "gpu_busy_pct",
    "kernels_per_decode_step",
    "launches_per_decode_step",
    "gpu_idle_per_decode_step_us",
    "anatomy",
    "memory",
    "model_proposal",  # added by issue 45 (2026-12-03)
    "mixed_steps",
    "verify_steps",
    "draft_steps",
    "speculative",
    "gaps",
    # issue 29's (2026-12-01): per-step figures of the main step kind
    "step_kind",
    "steps_of_kind",
    "step_ms",
    "tokens_per_step",
    "tokens_per_s",
    "kernels_per_step",
    "launches_per_step",
    "gpu_idle_per_step_us",
    "gpu_lead_per_step_us",
    "gpu_tail_per_step_us",
    *("ttft_ms_dist", "unknown_steps"),  # issue 38's (2026-12-03)
    *("served", "requests", "output_tokens", "run_tokens_per_s", "unknown_reasons"),  # issue 41's (2026-12-04)
    "batch_source",  # issue 44's (2026-12-04)
    "capture",
}  # anatomy: issue 12's; memory: 25's; mixed_steps, verify_steps, draft_steps, speculative: 24's; gaps: 23's


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_json_contract_on_a_synthetic_generation(tmp_path):
    path = write(tmp_path / "synthetic_generation.json", synthetic_generation(decode_steps=5))
    result = run_cli("analyze", str(path), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert set(report) == {
        "format",
        "device",
        "events",
        "segmentation",
        "requests",
        "steps",
        "summary",
        "findings",
        *("device_source", "engine", "engine_source"),  # added by issue 29 (2026-12-01)
        "on_gpu",  # added by issue 30 (2026-12-01)
        *("request_list", "front_end"),  # added by issue 38 (2026-12-03)
    }
    assert report["format"] == "kineto-json" and report["device"] == "Synthetic GPU"
    assert set(report["segmentation"]) == {"method", "confidence", "warnings", "evidence"}
    assert report["segmentation"]["evidence"] and all(isinstance(e, str) for e in report["segmentation"]["evidence"])
    assert report["steps"] and all(set(s) == STEP_KEYS for s in report["steps"])
    assert set(report["summary"]) == SUMMARY_KEYS
    assert set(report["summary"]["itl_ms"]) == {"p50", "p90", "p99", "mean", "max"}  # max: issue 38's
    finding_keys = {"id", "severity", "title", "detail", "cost_us", "cost_pct", "saving_us", "saving_pct"}  # 44's
    assert all(set(f) == finding_keys for f in report["findings"])
    assert [s["kind"] for s in report["steps"]] == ["prefill"] + ["decode"] * 5
    assert report["summary"]["memory"] is None  # no memory events in this trace


def test_memory_in_the_json_and_the_readable_output():
    capture = ROOT / "tests" / "data" / "captures" / "memory_fp32_b1_dynamic.json.gz"
    report = json.loads(run_cli("analyze", str(capture), "--json", "--no-cache").stdout)
    memory = report["summary"]["memory"]
    assert memory["device"] == "cpu" and memory["peak_reserved_bytes"] is None and memory["devices"] == []
    assert memory["kv_growth_bytes_per_token"] == pytest.approx(1024, rel=0.1)
    assert all(isinstance(s["memory_peak_bytes"], int) for s in report["steps"])
    text = run_cli("analyze", str(capture), "--no-cache").stdout
    assert "memory   cpu: peak allocated" in text and "KV       per decode step: measured 1.02 KiB" in text
    assert re.search(r"KV growth per decode step +1\.02 KiB", text)  # the registry's line (3 significant digits)


def test_start_us_is_on_the_input_clock(tmp_path):
    events = synthetic_generation(decode_steps=2)
    path = write(tmp_path / "synthetic.json", events)
    report = json.loads(run_cli("analyze", str(path), "--json").stdout)
    first_embedding = min(e["ts"] for e in events if e["name"] == "aten::embedding")
    assert report["steps"][0]["start_us"] == pytest.approx(first_embedding)


def test_a_trace_without_generation_is_a_success():
    result = run_cli("analyze", str(real_trace("param_linear_rtx2080ti.json.gz")), "--json")
    assert result.returncode == 0
    report = json.loads(result.stdout)
    assert report["segmentation"]["method"] == "none" and report["steps"] == []
    assert report["summary"]["gpu_busy_pct"] is not None


def test_readable_output(tmp_path):
    path = write(tmp_path / "synthetic.json", synthetic_generation(decode_steps=3))
    result = run_cli("analyze", str(path))
    assert result.returncode == 0
    assert "ITL p50" in result.stdout and "embedding-lookup" in result.stdout


@pytest.mark.parametrize(
    "content",
    [b"", b"\x00\x01\x02garbage", b'{"traceEvents": [', b'{"not": "a trace"}', b"\x1f\x8b\x08\x00truncated"],
    ids=["empty", "binary", "truncated", "not-a-trace", "bad-gzip"],
)
def test_bad_input_exits_2_with_one_error_line(tmp_path, content):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    result = run_cli("analyze", str(path), "--json")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:")
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_missing_file_and_bad_regex(tmp_path):
    result = run_cli("analyze", str(tmp_path / "missing.json"))
    assert result.returncode == 2 and result.stderr.startswith("error:")
    path = write(tmp_path / "synthetic.json", synthetic_generation(decode_steps=2))
    result = run_cli("analyze", str(path), "--step-regex", "(unclosed")
    assert result.returncode == 2 and "regex" in result.stderr


def test_an_unusable_run_json_beside_the_trace_does_not_fail_the_analysis(tmp_path):
    write(tmp_path / "trace.json", synthetic_generation(decode_steps=2))
    (tmp_path / "run.json").write_text(
        json.dumps({"model": {"config": {"model_type": "mixtral", "num_local_experts": 8}}})
    )
    result = run_cli("analyze", str(tmp_path / "trace.json"), "--json")
    assert result.returncode == 0
    assert json.loads(result.stdout)["steps"]


def test_every_subcommand_reports_user_errors_through_one_exit(capsys):
    from stepscope.app.cli.main import main

    cases = {
        ("roofline", "--model", "tiny-llama", "--gpu", "h100", "--batch", "0"): "error: --batch must be between 1 and",
        ("roofline", "--model", "no-such-model", "--gpu", "h100"): "error: model 'no-such-model' is neither",
        ("analyze", "no/such/trace.json"): "error: cannot open",
        ("export", "no/such/trace.json", "--perfetto", "x.pftrace"): "error: cannot open",
    }
    for argv, start in cases.items():
        assert main(list(argv)) == 2, argv
        captured = capsys.readouterr()
        assert captured.err.startswith(start) and captured.err.count("\n") == 1, captured.err
        assert captured.out == ""


def test_steps_carry_categories_and_user_rules_come_first(tmp_path):
    """synthetic_generation: 5 kernels of 10 us per step (kernel_0..kernel_4) and one D2H copy."""
    path = write(tmp_path / "synthetic.json", synthetic_generation(decode_steps=3, kernels_per_step=5, kernel_us=10.0))
    report = json.loads(run_cli("analyze", str(path), "--json").stdout)
    for step in report["steps"]:
        assert sum(c["kernels"] for c in step["categories"].values()) == step["kernels"] == 5
    rules = tmp_path / "mine.toml"
    rules.write_text('gemm = ["^kernel_[0-2]$"]\nnorm = "kernel_4"\n')
    result = run_cli("analyze", str(path), "--json", "--categories", str(rules))
    assert result.returncode == 0, result.stderr
    mine = json.loads(result.stdout)
    for step in mine["steps"]:
        assert step["categories"]["gemm"] == {"kernels": 3, "time_us": 30.0}
        assert step["categories"]["norm"] == {"kernels": 1, "time_us": 10.0}
        assert step["categories"]["memcpy"]["kernels"] == 0 and step["categories"]["memcpy"]["time_us"] > 0
    anatomy = mine["summary"]["anatomy"]
    assert anatomy["step_kind"] == "decode" and anatomy["categories"]["gemm"]["kernels"] == 3
    assert "needs a model" in anatomy["roofline"]["status"]


def test_model_flag_reaches_the_category_roofline_and_bad_flags_are_one_line(tmp_path):
    path = write(tmp_path / "synthetic.json", synthetic_generation(decode_steps=3))
    report = json.loads(run_cli("analyze", str(path), "--json", "--model", "tiny-llama").stdout)
    # the model is known now; the synthetic GPU is in no table, so the bandwidth is what is missing
    assert "memory bandwidth" in report["summary"]["anatomy"]["roofline"]["status"]
    bad = run_cli("analyze", str(path), "--model", "no-such-model")
    assert bad.returncode == 2 and bad.stderr.startswith("error:") and len(bad.stderr.splitlines()) == 1
    toml = tmp_path / "bad.toml"
    toml.write_text('bogus = ["x"]\n')
    bad = run_cli("analyze", str(path), "--categories", str(toml))
    assert bad.returncode == 2 and "unknown category 'bogus'" in bad.stderr and len(bad.stderr.splitlines()) == 1


def test_readable_output_has_the_category_table_and_layers():
    sample = ROOT / "sample_traces" / "cpu_tiny-llama_eager" / "trace.json.gz"
    result = run_cli("analyze", str(sample))
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "inside step" in text and "host ops" in text
    assert "layers   4 x" in text  # tiny-llama: 4 decoder layers (collectors/presets.py)
    assert "per-category roofline (tiny-llama" in text  # run.json beside the sample names the model


# -- a folder or glob of rank traces: DESIGN.md's {"ranks": [...], "run": {...}} --------------------------------

TP2 = ROOT / "sample_traces" / "cpu_tiny-llama_tp2_eager"
RUN_KEYS = {"ranks", "aligned_steps", "step_time_ms", "skew_us", "comm_pct", "exposed_comm_pct", "slowest_rank"}


def _collective_us_in_steps(trace_path, steps) -> tuple[float, float]:
    """(c10d all-reduce time inside the steps, total step time), in us, read straight from the trace JSON."""
    import gzip

    events = json.loads(gzip.decompress(trace_path.read_bytes()))["traceEvents"]
    colls = sorted(
        (e["ts"], e["ts"] + e["dur"]) for e in events if e.get("ph") == "X" and e["name"] == "c10d::allreduce_"
    )
    inside = sum(
        min(end, s["end_us"]) - max(start, s["start_us"])
        for s in steps
        for start, end in colls
        if start < s["end_us"] and end > s["start_us"]
    )
    return inside, sum(s["end_us"] - s["start_us"] for s in steps)


def test_folder_of_two_ranks_is_one_run_with_its_allreduces():
    result = run_cli("analyze", str(TP2), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert set(report) == {"ranks", "run"}
    assert [r["rank"] for r in report["ranks"]] == [0, 1]
    assert all({"format", "steps", "summary", "findings"} <= set(r) for r in report["ranks"])
    run = report["run"]
    assert set(run) >= RUN_KEYS and run["ranks"] == 2
    assert run["aligned_steps"] == len(report["ranks"][0]["steps"]) == len(report["ranks"][1]["steps"]) > 0
    # communication share recomputed from the raw events of both ranks (c10d::allreduce_ wraps gloo's work)
    inside, total = map(
        sum,
        zip(
            *(_collective_us_in_steps(TP2 / f"rank-{r['rank']}.trace.json.gz", r["steps"]) for r in report["ranks"]),
            strict=True,
        ),
    )
    assert inside > 0
    assert run["comm_pct"] == pytest.approx(100.0 * inside / total, rel=0.02)
    assert run["step_time_ms"]["p50"] <= run["step_time_ms"]["p90"]


def test_glob_of_the_hta_pair_groups_as_one_run_and_a_single_file_is_unchanged():
    folder = real_trace("hta_sampled_2rank")
    result = run_cli("analyze", str(folder / "*.json.gz"), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["run"]["ranks"] == 2 and sorted(r["rank"] for r in report["ranks"]) == [0, 1]
    assert report["run"]["comm_pct"] > 0  # NCCL kernels are really there
    single = run_cli("analyze", str(folder / "sampled_rank-0.json.gz"), "--json")
    assert single.returncode == 0 and "ranks" not in json.loads(single.stdout)


def test_readable_multi_rank_output():
    result = run_cli("analyze", str(TP2))
    assert result.returncode == 0, result.stderr
    assert "2 rank(s)" in result.stdout and "rank-1.trace.json.gz" in result.stdout
    assert "exposed communication" in result.stdout


def test_folder_errors_are_one_line(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "rank-0.json").write_bytes((TP2 / "rank-0.trace.json.gz").read_bytes())
    (bad / "rank-1.json").write_bytes(b'{"traceEvents": [')
    for source in (empty, bad, tmp_path / "*.nothing"):
        result = run_cli("analyze", str(source), "--json")
        assert result.returncode == 2, source
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:") and result.stdout == ""


def test_batch_subcommand_through_app_cli(tmp_path):
    source = tmp_path / "in"
    source.mkdir()
    for p in TP2.glob("*.gz"):
        (source / p.name).write_bytes(p.read_bytes())
    (source / "hostile.json").write_bytes(b"\x00junk")
    out = tmp_path / "out"
    result = run_cli("batch", str(source), "--out", str(out), "--workers", "1")
    assert result.returncode == 0, result.stderr
    import pandas as pd

    traces = pd.read_parquet(out / "traces.parquet")
    assert len(traces) == 3 and traces["error"].fillna("").astype(bool).sum() == 1
    bad = run_cli("batch", str(source), "--out", str(out), "--workers", "0")
    assert bad.returncode == 2 and bad.stderr.strip().startswith("error:") and len(bad.stderr.strip().splitlines()) == 1


def test_the_command_line_starts_reading_before_pandas_is_loaded(tmp_path):
    """Building the command parser (every subcommand's options and help) imports neither numpy, pandas nor the
    analysis: a big trace's decoding starts first (its child forked before numpy is loaded) and they are imported
    while both processes decode. A top-level import of pandas anywhere on that path would cost a cold `analyze` a
    quarter of a second, one of numpy a twentieth."""
    probe = (
        "import sys\n"
        "from stepscope.app.cli.main import build_parser\n"
        "build_parser()\n"
        "import stepscope.parsers.kineto.two_processes, stepscope.trace_cache.timelines, stepscope.analysis.gate\n"
        "import stepscope.app.cli.options, stepscope.parsers.ranks, stepscope.parsers.load\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pandas', 'numpy')\n"
        "             or m == 'stepscope.analysis.pipeline'))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_entry_point_flushes_and_returns_the_exit_code(tmp_path):
    """`python -m app.cli` leaves through os._exit (no teardown): the output must still be whole and the code kept."""
    trace = write(tmp_path / "trace.json", synthetic_generation(decode_steps=4))
    env = {**os.environ, "STEPSCOPE_CACHE_DIR": str(tmp_path / "cache")}
    ok = subprocess.run(
        [sys.executable, "-m", "app.cli", "analyze", str(trace), "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env=env,
    )
    assert ok.returncode == 0 and json.loads(ok.stdout)["summary"]["decode_steps"] == 4, ok.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "app.cli", "analyze", str(tmp_path / "missing.json")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env=env,
    )
    assert bad.returncode == 2 and bad.stderr.startswith("error:") and bad.stderr.count("\n") == 1
