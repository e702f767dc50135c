"""Issue 39, item 4: thousands of distinct names of many kilobytes are analysed like short ones. Behaviour only (the
time is measured by bench/long_names_bench.py): the answer of a SYNTHETIC trace with long names (tests/
synthetic_long_names.py) equals the answer with short names, patterns see a bounded prefix of a name, and the
short name's bracket removal gives what a walk of every character gives."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from stepscope.analysis import kernel_names
from stepscope.analysis.names import CUT, MATCH_CHARS, match_text, name_matches
from stepscope.analysis.trace_facts import engine_of
from tests.conftest import ROOT
from tests.synthetic_long_names import long_name, synthetic_long_names_gz


def _analyze(path: Path, cache: Path) -> dict:
    env = dict(os.environ, STEPSCOPE_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-m", "app.cli", "analyze", str(path), "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=600,
    )
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    return json.loads(out.stdout)


def test_a_small_upload_of_long_distinct_names_answers_as_with_short_names(tmp_path):
    """5,000 distinct kernel names of 8 KB (and as many host ops'), gzip'd under 1 MB: the steps, their kernels and
    the categories are those of the same trace with short names."""
    long_gz = tmp_path / "long.json.gz"
    long_gz.write_bytes(synthetic_long_names_gz(kernels=5000, name_bytes=8192))
    short_gz = tmp_path / "short.json.gz"
    short_gz.write_bytes(synthetic_long_names_gz(kernels=5000, name_bytes=40))
    assert long_gz.stat().st_size < 1 << 20
    long, short = _analyze(long_gz, tmp_path / "c1"), _analyze(short_gz, tmp_path / "c2")
    assert len(long["steps"]) == len(short["steps"]) == 100  # 5,000 kernels in forwards of 50
    assert [s["kernels"] for s in long["steps"]] == [s["kernels"] for s in short["steps"]] == [50] * 100
    assert long["events"] == short["events"]
    categories = long["steps"][-1].get("categories", {})
    assert categories == short["steps"][-1].get("categories", {})


def test_the_generator_gives_distinct_names_of_the_length_asked():
    names = [long_name(i, 8192) for i in range(3)]
    assert len(set(names)) == 3 and all(len(n) == 8192 for n in names)


def test_patterns_see_a_bounded_prefix_and_never_match_at_the_cut():
    tail = "x" * MATCH_CHARS + "vllm/worker.py"
    cut_at_word = "y" * (MATCH_CHARS - len("cudaMemcpy")) + "cudaMemcpy" + "z" * 50
    names = pd.Series(pd.Categorical(["cudaMemcpy", tail, cut_at_word, "vllm/engine.py"]))
    assert match_text(cut_at_word) == cut_at_word[:MATCH_CHARS] + CUT
    assert match_text("short") == "short"
    assert name_matches(names, r"cudaMemcpy$").tolist() == [True, False, False, False]  # "$" is not at the cut
    assert name_matches(names, r"vllm/").tolist() == [False, False, False, True]  # past the prefix: not seen
    assert engine_of(names)[0] == "vLLM"


def _reference(text: str, open_: str, close: str) -> str:
    """The bracket removal walked character by character (what kernel_names did before)."""
    out, depth = [], 0
    for ch in text:
        if ch == open_:
            depth += 1
        elif ch == close and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


@pytest.mark.parametrize("seed", range(4))
def test_bracket_removal_equals_a_walk_of_every_character(seed):
    rng = random.Random(seed)
    texts = ["".join(rng.choice("ab <>()::") for _ in range(rng.randint(0, 80))) for _ in range(2000)]
    texts += ["f<" * 40 + "x" + ">" * 40 + "(int)", "a<" * 30 + "b", "c>" * 5 + "<d", long_name(seed, 8192)]
    for text in texts:
        for open_, close in (("<", ">"), ("(", ")")):
            assert kernel_names._drop_nested(text, open_, close) == _reference(text, open_, close), text[:80]


def test_a_long_kernel_name_keeps_its_short_name():
    name = "void cutlass::Kernel2<cutlass_80_tensorop_s16816gemm_relu_f16_64x64_32x6_tn_align8>(" + "T, " * 3000 + ")"
    assert kernel_names.short_name(name) == kernel_names.short_name(name[:4000])
    assert "gemm" in kernel_names.short_name(name)
