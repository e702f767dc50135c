"""Issue 26, class 3: user regexes are matched in linear time (RE2), with one clear line for what RE2 refuses.

SYNTHETIC inputs built here: a generation whose annotations and kernel names almost match a pattern that makes a
backtracking engine take exponential time (`^(a+)+$` on 35 a's and a "!"), given as --step-regex, in a
categories TOML and as the app's step-regex setting (the same analyze() on the server thread).
"""

from __future__ import annotations

import json
import time

import pandas as pd
import pytest

from stepscope.analysis import AnalysisOptions, analyze
from stepscope.analysis.categories import categorize, load_rules
from stepscope.analysis.user_patterns import UserPatternError, compile_user_pattern
from stepscope.app.analysis_settings import REGEX_KEY, current_options
from stepscope.parsers import parse_trace_bytes
from tests.bounded_cli import assert_sane_outcome, in_child, run_bounded
from tests.synthetic_traces import annotation, doc, kernel, launch, synthetic_generation, write

EVIL = r"^(a+)+$"
ALMOST = "a" * 35 + "!"  # 2^35 ways for a backtracking engine to fail


def _hostile_generation() -> list[dict]:
    """SYNTHETIC: a generation with annotations and a kernel named ALMOST."""
    events = synthetic_generation(decode_steps=4)
    events += [annotation(ALMOST, 1000.0 + 200 * i, 50.0) for i in range(5)]
    events += [launch(5000.0, 2.0, 900), kernel(ALMOST, 5003.0, 4.0, 900)]
    return events


def _bounded(seconds: float, fn, *args):
    """(fn(*args), seconds it took), run in a child that is killed past `seconds`."""
    start = time.perf_counter()
    value = in_child(seconds, fn, *args)
    return value, time.perf_counter() - start


def test_step_regex_on_the_command_line_answers_within_the_bound(tmp_path):
    trace = write(tmp_path / "synthetic.json", _hostile_generation())
    outcome = run_bounded("analyze", trace, "--json", "--step-regex", EVIL, cache_dir=tmp_path / "c")
    assert_sane_outcome(outcome)
    assert outcome.status == 0
    report = json.loads(outcome.stdout)
    assert any("no annotation matches the step regex" in w for w in report["segmentation"]["warnings"])


def test_categories_rule_on_the_command_line_answers_within_the_bound(tmp_path):
    trace = write(tmp_path / "synthetic.json", _hostile_generation())
    rules = tmp_path / "rules.toml"
    rules.write_text(f"gemm = ['{EVIL}']\n")
    outcome = run_bounded("analyze", trace, "--json", "--categories", rules, cache_dir=tmp_path / "c")
    assert_sane_outcome(outcome)
    assert outcome.status == 0


def test_the_apps_step_regex_setting_answers_within_the_bound():
    timeline = parse_trace_bytes(json.dumps(doc(_hostile_generation())).encode())
    options = current_options({REGEX_KEY: EVIL})  # what every page analyses with
    analysis, seconds = _bounded(10, analyze, timeline, options)
    assert analysis.segmentation.method != "user-regex" and seconds < 10


def test_a_user_pattern_matches_the_way_the_rules_expect():
    kinds = compile_user_pattern(r"^my_step_(?P<kind>prefill|decode)_(?P<tokens>\d+)")
    hit = kinds.search("my_step_decode_4")
    assert hit.groupdict() == {"kind": "decode", "tokens": "4"} and hit.span() == (0, 16)
    assert kinds.pattern.startswith("^my_step_") and kinds.flags == 0  # what a cache key is made of
    assert compile_user_pattern("(?i)NCCL").search("ncclKernel_AllReduce")
    assert compile_user_pattern("b").search("\udcffb").span() == (1, 2)  # a lone surrogate: positions kept
    rx = "my_" + "a" * 100_000
    _, seconds = _bounded(10, compile_user_pattern(EVIL).search, "a" * 100_000 + "!")
    assert seconds < 2 and compile_user_pattern(rx[:40]).search(rx)


@pytest.mark.parametrize(
    ("pattern", "words"),
    [
        (r"(a)\1", "backreferences are not supported"),
        (r"(?P<k>a)(?P=k)", "backreferences are not supported"),
        (r"step(?=_decode)", "lookahead and lookbehind are not supported"),
        (r"(?<!pre)fill", "lookahead and lookbehind are not supported"),
        ("(unclosed", "missing )"),
        ("\udcff", "not valid UTF-8"),
        ("a" * 3000, "longer than"),
    ],
)
def test_what_re2_refuses_is_one_clear_line(pattern, words):
    with pytest.raises(UserPatternError, match=words.replace("(", r"\(").replace(")", r"\)")) as info:
        compile_user_pattern(pattern, "--step-regex")
    assert "\n" not in str(info.value) and len(str(info.value)) < 400


@pytest.mark.parametrize("pattern", [r"(a)\1", r"step(?=_decode)"])
def test_refused_constructs_are_exit_2_on_the_command_line(tmp_path, pattern):
    trace = write(tmp_path / "synthetic.json", synthetic_generation(decode_steps=2))
    outcome = run_bounded("analyze", trace, "--step-regex", pattern, cache_dir=tmp_path / "c")
    assert_sane_outcome(outcome)
    assert outcome.status == 2 and "not supported" in outcome.error_lines[0]
    assert "re2.cc" not in outcome.stderr  # RE2's own C++ log line is not printed


def test_categories_rules_are_re2_and_still_come_first(tmp_path):
    rules_file = tmp_path / "rules.toml"
    rules_file.write_text(f"communication = ['^my_allreduce', '{EVIL}']\n")
    rules = load_rules(rules_file)
    assert all(rule.pattern.flags == 0 and rule.user for rule in rules)
    (_, cats), _ = _bounded(10, categorize, pd.Series(["my_allreduce_x", ALMOST, "aaaa", "aten::mm"]), rules)
    assert list(cats) == ["communication", "other", "communication", "gemm"]
    rules_file.write_text("gemm = ['(a)\\1']\n")  # a TOML literal string: (a)\1
    with pytest.raises(ValueError, match="backreferences are not supported"):
        load_rules(rules_file)


def test_analysis_options_keep_a_step_regex_as_text():
    assert AnalysisOptions(step_regex=EVIL).step_regex == EVIL  # the cache keys hold the text, not an object
