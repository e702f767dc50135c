"""Regression tests for the analysis defect classes of issue 16 on small SYNTHETIC inputs built here.

Classes: 1 (unbounded integers from names), 2 (malformed Input Dims), 4 (negative timestamps),
5 (degenerate steps: every rate finite or null), 9 (many requests: vectorised), 11 (hostile run.json),
14 (bad option values), and the sanity layer that turns any remaining nonsense into a named warning.
Expected numbers are worked out by hand from the generated events, not read from the code under test.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time

import numpy as np
import pandas as pd
import pytest

from stepscope.analysis import analyze
from stepscope.analysis.model import Analysis, Segmentation
from stepscope.analysis.sanity import check_analysis
from stepscope.analysis.summary import Summary
from stepscope.parsers import parse_trace_bytes
from tests.fuzz_inputs import SAMPLE_RUN, SAMPLE_TRACE, check_contract
from tests.synthetic_traces import annotation, cpu_op, doc, kernel, launch, many_tiny_requests, synthetic_generation


def _analyze(events):
    return analyze(parse_trace_bytes(json.dumps(doc(events)).encode()))


def _finite_summary(summary) -> None:
    for key, value in dataclasses.asdict(summary).items():
        if isinstance(value, float):
            assert math.isfinite(value), key


# --- class 1


@pytest.mark.parametrize(
    "name",
    [
        "stepscope.decode[request=" + "9" * 20 + ",index=1,tokens=1,batch=1]",
        f"stepscope.decode[request=0,index={2**63},tokens=1,batch=1]",
        "execute_context_" + "9" * 20 + "(1_5)_generation_1(0)",
        "step[DECODE bs=" + "9" * 20 + "]",
        f"ProfilerStep#{2**64}",
    ],
)
def test_a_step_name_with_a_huge_number_is_not_a_step_and_is_warned(name):
    events = [annotation(name, 0.0, 20.0), launch(1.0, 2.0, 1), kernel("k", 3.0, 4.0, 1)]
    result = _analyze(events)
    assert result.segmentation.method == "none" or len(result.steps) == 0
    assert any("too large to be counts" in w for w in result.segmentation.warnings)


# --- class 2


@pytest.mark.parametrize(
    "dims",
    [
        None,
        5,
        "x",
        [[[1]]],
        [[1000, 8], [-1, 4]],
        [[1000, 8], ["a", 1]],
        [[1000, 8], 7],
        [[1000, 8], [2**70]],
        [[1000, 8], [1.5]],
    ],
)
def test_malformed_embedding_shape_is_ignored_and_counted(dims):
    events = synthetic_generation(decode_steps=3)
    first = next(e for e in events if e["name"] == "aten::embedding")
    # a second lookup inside the prefill (say, a position embedding) whose shape record is broken
    events.append(cpu_op("aten::embedding", first["ts"] + 0.5, 0.5, dims=dims))
    result = _analyze(events)
    # the 4 token lookups (one prefill + three decode) still make 4 steps; the broken one is ignored
    assert len(result.steps) == 4
    assert result.steps["kind"].tolist() == ["prefill", "decode", "decode", "decode"]
    if dims is not None:
        assert any("1 aten::embedding shape records malformed" in w for w in result.segmentation.warnings)
    assert (result.steps["tokens"].dropna() >= 0).all()


# --- class 4


def test_negative_timestamps_give_the_same_busy_share_as_positive_ones():
    events = synthetic_generation(decode_steps=4)
    shifted = json.loads(json.dumps(events))
    for e in shifted:
        e["ts"] -= 1_000_000.0
    base, neg = _analyze(events).summary, _analyze(shifted).summary
    # kernels: 5 per forward x 10 us, copies 1 us; the share is the same whatever the clock's origin
    assert 0 < neg.gpu_busy_pct <= 100
    assert neg.gpu_busy_pct == pytest.approx(base.gpu_busy_pct)
    assert (_analyze(shifted).steps["gpu_idle_ns"] >= 0).all()


# --- class 5


def test_zero_length_decode_steps_give_no_infinite_rate():
    events = []
    for i in range(4):  # four back-to-back forwards on a zero-duration everything
        kind = "prefill" if i == 0 else "decode"
        events.append(annotation(f"stepscope.{kind}[request=0,index={i},tokens=1,batch=1]", 100.0, 0.0))
    events.append(kernel("k", 100.0, 0.0, 1))
    result = _analyze(events)
    _finite_summary(result.summary)
    assert result.summary.decode_tokens_per_s is None


# --- class 9


def test_thousands_of_tiny_requests_are_analysed_fast():
    events = many_tiny_requests(3000)
    timeline = parse_trace_bytes(json.dumps(doc(events)).encode())
    start = time.perf_counter()
    result = analyze(timeline)
    elapsed = time.perf_counter() - start
    assert result.summary.prefill_steps == 3000 and result.summary.decode_steps == 3000
    # each request: prefill marker at t, kernel ends at t + 7 us -> TTFT 7 us... the token is the later of the
    # kernel's end (t+7) and the marker's end (t+8): 8 us = 0.008 ms for every request
    ttft = result.summary.ttft_ms_by_request
    assert len(ttft) == 3000 and set(np.round(list(ttft.values()), 6)) == {0.008}
    assert elapsed < 10, f"{elapsed:.1f} s"  # the bound for any input under 10 MB (bench prints the time)


# --- class 11


@pytest.mark.parametrize(
    "patch",
    [
        {"spec": [1, 2]},
        {"device": ["H100"]},
        {"model": {"config": {"hidden_size": 1e308}}},
        {"model": {"config": {"num_hidden_layers": -4}}},
        {"model": {"config": {"vocab_size": "many"}}},
        {"prompt_len": 1e300},
    ],
)
def test_hostile_run_json_gives_a_note_and_no_roofline(patch):
    run = json.loads(SAMPLE_RUN.read_text())
    run["device"], run["device_type"] = "NVIDIA H100 80GB HBM3", "cuda"
    _, good, _ = check_contract(SAMPLE_TRACE.read_bytes(), "trace.json.gz", json.dumps(run).encode())
    assert "roofline" in json.dumps([f["id"] for f in json.loads(good)["findings"]])  # the control: it can fail
    for key, value in patch.items():
        if key == "model":
            run["model"]["config"].update(value["config"])
        else:
            run[key] = value
    status, out, err = check_contract(SAMPLE_TRACE.read_bytes(), "trace.json.gz", json.dumps(run).encode())
    assert status == 0
    assert "roofline" not in json.dumps([f["id"] for f in json.loads(out)["findings"]])
    assert "note: no roofline: run.json beside the trace is invalid" in err


def test_the_shipped_run_json_passes_the_schema():
    from stepscope.contracts.run_schema import run_record_problems

    assert run_record_problems(json.loads(SAMPLE_RUN.read_text())) == []


# --- class 14


@pytest.mark.parametrize(
    "argv",
    [
        ["analyze", "TRACE", "--gap-threshold-us", "inf"],
        ["analyze", "TRACE", "--gap-threshold-us", "nan"],
        ["analyze", "TRACE", "--gap-threshold-us", "-1"],
        ["analyze", "TRACE", "--gap-threshold-us", "abc"],
        ["analyze", "TRACE", "--step-regex", "("],
        ["analyze", "TRACE", "--bogus"],
        ["roofline", "--model", "tiny-llama", "--gpu", "H100", "--hbm-gbps", "inf"],
        ["roofline", "--model", "tiny-llama", "--gpu", "H100", "--prompt-tokens", str(10**30)],
    ],
)
def test_bad_option_values_give_one_error_line(argv, tmp_path, capsys):
    from stepscope.app.cli.main import main

    trace = tmp_path / "t.json"
    trace.write_text(json.dumps(doc(synthetic_generation(decode_steps=2))))
    with pytest.raises(SystemExit) if "--bogus" in argv or "abc" in argv else _nothing() as raised:
        status = main([str(trace) if a == "TRACE" else a for a in argv])
    if raised is not None and hasattr(raised, "value"):
        status = raised.value.code
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and err[0].startswith("error: "), err
    assert "internal error" not in err[0]


class _nothing:  # noqa: N801 - a context manager that catches nothing
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


# --- sanity layer


def test_sanity_layer_names_each_violation_and_nulls_impossible_numbers():
    steps = pd.DataFrame(
        {
            "kind": ["decode", "decode"],
            "request": [0, 0],
            "index": [0, 1],
            "start_ns": [100, 300],
            "end_ns": [200, 250],
            "tokens": pd.array([1, -3], dtype="Int64"),
            "gpu_busy_ns": [50, 10],
            "gpu_idle_ns": [50, -60],
        }
    )
    gaps = pd.DataFrame({"start_ns": [0], "end_ns": [-5], "dur_ns": [-5]})
    analysis = Analysis(
        steps=steps,
        gaps=gaps,
        summary=Summary(
            decode_tokens_per_s=math.inf, gpu_busy_pct=1443.0, ttft_ms=-2.0, itl_ms={"p50": math.nan}, decode_steps=2
        ),
        findings=(),
        segmentation=Segmentation("test", 1.0),
        top_kernels=pd.DataFrame(),
    )
    checked = check_analysis(analysis)
    s = checked.summary
    assert s.decode_tokens_per_s is None and s.gpu_busy_pct is None and s.ttft_ms is None
    assert s.itl_ms is None and s.decode_steps == 2
    text = " | ".join(checked.segmentation.warnings)
    for phrase in (
        "decode_tokens_per_s",
        "gpu_busy_pct",
        "ttft_ms",
        "1 steps end before they start (first: step 1)",
        "1 steps have negative GPU idle time",
        "1 steps have a negative token count",
        "1 idle gaps have a negative duration",
    ):
        assert phrase in text, phrase


def test_sanity_layer_leaves_a_sane_analysis_alone():
    result = _analyze(synthetic_generation(decode_steps=3))
    assert not any(w.startswith("sanity check") for w in result.segmentation.warnings)
    assert check_analysis(result) is result


def test_cpu_op_helper_in_use():
    assert cpu_op("x", 1.0, 1.0)["cat"] == "cpu_op"


def test_run_json_with_invalid_utf8_is_as_if_absent():
    run = SAMPLE_RUN.read_bytes().replace(b'"schema"', b'"sch\xedma"', 1)
    status, _, err = check_contract(SAMPLE_TRACE.read_bytes(), "trace.json.gz", run)
    assert status == 0 and "error" not in err
