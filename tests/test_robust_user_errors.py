"""Issue 26, class 4: user errors that came out as internal errors, tracebacks or pandas messages.

SYNTHETIC inputs built here: a categories TOML and a model config nested 3000 deep, cache result entries whose tag
and checksum are valid but whose body is not a result, and rank folders in which one rank appears twice (by file
name, and by Kineto's distributedInfo).
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from stepscope.analysis.ranks import analyze_ranks
from stepscope.exporters.figures import rank_charts
from stepscope.parsers.ranks import load_ranks
from stepscope.trace_cache.keys import hash_text
from tests.bounded_cli import assert_sane_outcome, run_bounded
from tests.conftest import ROOT
from tests.test_ranks import synthetic_rank_doc

SAMPLE = ROOT / "sample_traces" / "cpu_tiny-llama_compile" / "trace.json.gz"
DEEP = 3000


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "run" / "trace.json.gz"
    path.parent.mkdir()
    shutil.copy(SAMPLE, path)
    return path


# --- nested 3000 deep


@pytest.mark.parametrize(
    "text", ["gemm = " + "[" * DEEP + "]" * DEEP, "gemm = " + "{a = " * DEEP + "}" * DEEP], ids=["arrays", "tables"]
)
def test_categories_file_nested_3000_deep_is_one_error_line(trace, tmp_path, text):
    rules = tmp_path / "rules.toml"
    rules.write_text(text + "\n")
    outcome = run_bounded("analyze", trace, "--categories", rules, cache_dir=tmp_path / "c")
    assert_sane_outcome(outcome)
    assert outcome.status == 2 and "nested too deeply" in outcome.error_lines[0]


def test_model_config_nested_3000_deep_is_one_error_line(trace, tmp_path):
    config = tmp_path / "config.json"
    config.write_text('{"hidden_size": ' + "[" * DEEP + "]" * DEEP + "}")
    outcome = run_bounded("analyze", trace, "--model", config, cache_dir=tmp_path / "c")
    assert_sane_outcome(outcome)
    assert outcome.status == 2 and "nested too deeply" in outcome.error_lines[0]


# --- a cached result entry that is not a result


def _forged_bodies(real: dict) -> list[str]:
    """Bodies a checksum cannot tell from a result: JSON of the wrong shape, wrong types deep inside, not JSON."""
    wrong_step = json.loads(json.dumps(real))
    wrong_step["steps"][0]["kernels"] = "many"
    wrong_anatomy = json.loads(json.dumps(real))
    wrong_anatomy["summary"]["anatomy"] = {"categories": {"gemm": {"kernels": 1, "time_us": "x"}}}
    wrong_roofline = json.loads(json.dumps(real))
    wrong_roofline["summary"]["anatomy"]["roofline"] = {"status": "ok"}
    missing = {k: v for k, v in real.items() if k != "segmentation"}
    return [
        "[]",
        "{}",
        '"x"',
        "null",
        '{"format": 1}',
        json.dumps(missing),
        json.dumps(wrong_step),
        json.dumps(wrong_anatomy),
        json.dumps(wrong_roofline),
        "[" * DEEP + "]" * DEEP,
        "not json at all",
    ]


def test_a_forged_cache_result_is_a_miss_in_text_and_json(trace, tmp_path):
    cache = tmp_path / "cache"
    first = run_bounded("analyze", trace, "--json", cache_dir=cache)
    assert first.status == 0, first.stderr
    real = json.loads(first.stdout)
    (entry,) = (cache / "results").iterdir()
    text_answer = run_bounded("analyze", trace, cache_dir=tmp_path / "other-cache")
    for body in _forged_bodies(real):
        header = json.dumps({"tag": "stepscope-result/1", "sum": hash_text(body), "notes": []})
        for mode in ((), ("--json",)):
            entry.write_bytes((header + "\n" + body).encode())
            outcome = run_bounded("analyze", trace, *mode, cache_dir=cache)
            assert_sane_outcome(outcome)
            assert outcome.status == 0, (body[:80], outcome.stderr)
            if mode:
                assert json.loads(outcome.stdout) == real, body[:80]
            else:
                assert outcome.stdout == text_answer.stdout, body[:80]


def test_a_cached_timeline_whose_metadata_is_nested_3000_deep_is_a_miss(trace, tmp_path):
    """An Arrow entry that opens but whose metadata JSON the decoder cannot take (RecursionError) is rebuilt."""
    from tests.fuzz_surfaces import _with_metadata

    cache = tmp_path / "cache"
    assert run_bounded("analyze", trace, "--json", cache_dir=cache).status == 0
    (entry,) = (cache / "timelines").iterdir()
    entry.write_bytes(_with_metadata(entry.read_bytes(), "[" * DEEP + "]" * DEEP))
    other = ("--json", "--gap-threshold-us", "2")  # a result not cached: the Timeline entry is read
    outcome = run_bounded("analyze", trace, *other, cache_dir=cache)
    assert_sane_outcome(outcome)
    clean = run_bounded("analyze", trace, *other, cache_dir=tmp_path / "clean")
    assert outcome.status == 0 and json.loads(outcome.stdout) == json.loads(clean.stdout)


def test_results_of_the_shipped_samples_have_the_shape(tmp_path):
    from stepscope.trace_cache.results import is_analyze_result

    for name in ("cpu_tiny-llama_eager", "cpu_tiny-llama_compile"):
        outcome = run_bounded("analyze", ROOT / "sample_traces" / name / "trace.json.gz", "--json", cache_dir=tmp_path)
        assert outcome.status == 0 and is_analyze_result(outcome.stdout)  # a real result is never a miss


# --- the same rank twice


def _write(folder: Path, name: str, doc: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(gzip.compress(json.dumps(doc).encode()))


def _same_rank_twice_by_name(folder: Path) -> Path:
    """SYNTHETIC: three ranks' traces, two of them named rank-0, without distributedInfo."""
    for r, name in enumerate(("a_rank-0.json.gz", "b_rank-0.json.gz", "c_rank-1.json.gz")):
        _write(folder, name, synthetic_rank_doc(r, distributed=False))
    return folder


def _same_rank_twice_by_metadata(folder: Path) -> Path:
    """SYNTHETIC: three files whose distributedInfo says rank 1 twice (their names say nothing)."""
    for i, r in enumerate((0, 1, 1)):
        doc = synthetic_rank_doc(r)
        doc["distributedInfo"]["rank"] = r
        _write(folder, f"worker{i}.json.gz", doc)
    return folder


@pytest.mark.parametrize("build", [_same_rank_twice_by_name, _same_rank_twice_by_metadata])
def test_a_rank_twice_is_read_with_a_warning(tmp_path, build):
    folder = build(tmp_path / "ranks")
    for mode in ((), ("--json",)):
        outcome = run_bounded("analyze", folder, *mode, cache_dir=tmp_path / "c")
        assert_sane_outcome(outcome)
        assert outcome.status == 0 and "appear more than once" in outcome.stdout
    report = json.loads(run_bounded("analyze", folder, "--json", cache_dir=tmp_path / "c").stdout)
    ranks = [r["rank"] for r in report["ranks"]]
    assert len(ranks) == 3 == len(set(ranks))  # one row per file, each under a rank of its own
    # the Ranks page's figures (the same RankRun): a heatmap row and a lane group per rank
    ranked = load_ranks(folder)
    run = analyze_ranks(ranked)
    heat = rank_charts.rank_step_heatmap(run.rank_steps, "step time")
    assert len(heat.data[0].y) == 3
    rank_charts.rank_itl_lines(run.rank_steps)
    from stepscope.analysis.rank_collectives import iteration_windows

    window = iteration_windows(run.rank_steps, run.collectives).iloc[1]
    rank_charts.ranks_window(
        run.ranks, ranked.timelines, run.analyses, (window["start_ns"], window["end_ns"]), {}, run.collectives.rows, "1"
    )


def test_distinct_ranks_keep_their_numbers_and_source(tmp_path):
    folder = tmp_path / "ok"
    for r in (2, 0, 1):
        _write(folder, f"w{r}.json.gz", synthetic_rank_doc(r))
    ranked = load_ranks(folder)
    assert [f.rank for f in ranked.files] == [0, 1, 2] and {f.rank_source for f in ranked.files} == {"distributedInfo"}
    assert not [w for w in ranked.warnings if "more than once" in w]
