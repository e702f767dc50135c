"""A cache key that cannot forget: every field of the options, the model, the device, the limits and the run.json
are in it by construction, and an input without a plain-data form makes an answer uncacheable, never served.

Traces here are SYNTHETIC (tests/synthetic_traces.py) unless named.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from stepscope.analysis.categories import Rule
from stepscope.analysis.front_door import NOTHING_GIVEN, CachePolicy, Given, answer_key, open_report, resolve_model
from stepscope.analysis.options import AnalysisOptions
from stepscope.analysis.result_key import NotKeyableError, key_material, result_key
from stepscope.parsers.limits import ReadLimits
from stepscope.trace_cache.store import CacheStore
from tests.synthetic_traces import synthetic_generation, write

ROOT = Path(__file__).resolve().parents[1]


def _changed(field: dataclasses.Field, value):
    """Another valid value of an options field."""
    if isinstance(value, bool):
        return not value
    if field.name == "batch":  # None by default: a batch typed by the user
        return 8
    if isinstance(value, int):
        return value + 1000
    if isinstance(value, float):
        return value * 1.5 if field.name != "host_bound_idle_share" else value / 2
    if field.name == "step_regex":
        return "^my_step_"
    if field.name == "category_rules":
        return (Rule("gemm", re.compile("^kernel_0$"), "mine.toml"),)
    raise AssertionError(f"no other value known for options field {field.name}: add one here")


@pytest.mark.parametrize("field", dataclasses.fields(AnalysisOptions), ids=lambda f: f.name)
def test_every_field_of_the_options_changes_the_key(field):
    base = AnalysisOptions()
    other = dataclasses.replace(base, **{field.name: _changed(field, getattr(base, field.name))})
    assert result_key(options=other) != result_key(options=base)


def test_a_field_added_to_the_options_is_in_the_key_without_editing_the_key():
    tomorrow = dataclasses.make_dataclass(
        "AnalysisOptions", [("new_knob", int, dataclasses.field(default=0))], bases=(AnalysisOptions,), frozen=True
    )
    assert result_key(options=tomorrow(new_knob=0)) != result_key(options=tomorrow(new_knob=1))
    assert "new_knob" in key_material(tomorrow())


def test_the_model_the_device_and_the_limits_are_in_the_key(tmp_path):
    trace = write(tmp_path / "trace.json", synthetic_generation(decode_steps=2))
    limits = ReadLimits.from_env()
    keys = {
        answer_key(trace, AnalysisOptions(), NOTHING_GIVEN, limits),
        answer_key(trace, AnalysisOptions(), Given(resolve_model("tiny-llama")), limits),
        answer_key(trace, AnalysisOptions(), Given(resolve_model("tiny-llama")), limits),  # the same: one key
        answer_key(trace, AnalysisOptions(), Given(resolve_model("llama-3-8b")), limits),
        answer_key(trace, AnalysisOptions(), NOTHING_GIVEN, dataclasses.replace(limits, max_events=10)),
    }
    assert len(keys) == 4


def test_a_value_without_a_plain_form_is_never_cached(tmp_path):
    class Opaque:
        pass

    with pytest.raises(NotKeyableError):
        key_material(Opaque())
    trace = write(tmp_path / "trace.json", synthetic_generation(decode_steps=2))
    options = dataclasses.replace(AnalysisOptions(), category_rules=(Opaque(),))
    assert answer_key(trace, options, NOTHING_GIVEN, ReadLimits.from_env()) is None
    store = CacheStore(tmp_path / "cache")
    first = open_report(trace, AnalysisOptions(), cache=CachePolicy(store=store))
    second = open_report(trace, AnalysisOptions(), cache=CachePolicy(store=store))
    assert not first.cached and second.cached and second.text == first.text


def _cli(args, cache: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, STEPSCOPE_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )


def _annotated_trace(tmp_path: Path) -> Path:
    """SYNTHETIC: a host-bound generation with a user annotation per forward (for --step-regex)."""
    events = synthetic_generation(decode_steps=4)
    starts = sorted(e["ts"] for e in events if e["name"] == "aten::embedding")
    for i, start in enumerate(starts):
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"my_step_{i}",
                "pid": 100,
                "tid": 100,
                "ts": start,
                "dur": 50,
            }
        )
    return write(tmp_path / "trace.json", events)


def test_the_cli_never_gives_the_first_answer_for_a_second_value_of_any_option(tmp_path):
    """Two values of each option through one cache: each answer is the one a cache-less run gives for that value,
    and the two differ (each option shows in the output it changes)."""
    trace = _annotated_trace(tmp_path)
    rules = tmp_path / "rules.toml"
    rules.write_text('gemm = ["^kernel_0$"]\n')
    pairs = {
        "--gap-threshold-us": ("1", "20"),
        "--step-regex": (None, "^my_step_"),
        "--categories": (None, rules),
        "--model": (None, "tiny-llama"),
        "--gpu": ("H100", "A100 80GB"),
    }
    cache = tmp_path / "cache"
    for option, values in pairs.items():
        outputs = []
        for value in values:
            extra = [] if value is None else [option, value]
            if option == "--gpu":
                extra += ["--model", "llama-3-8b"]  # a device matters for a model's roofline
            cached = _cli(["analyze", trace, "--json", *extra], cache)
            fresh = _cli(["analyze", trace, "--json", "--no-cache", *extra], tmp_path / "other-cache")
            assert cached.returncode == 0 and fresh.returncode == 0, cached.stderr + fresh.stderr
            assert json.loads(cached.stdout) == json.loads(fresh.stdout), option
            outputs.append(cached.stdout)
        assert outputs[0] != outputs[1], f"{option} changed nothing in the output"
        again = _cli(["analyze", trace, "--json"] + ([] if values[0] is None else [option, values[0]]), cache)
        if option != "--gpu":
            assert again.stdout == outputs[0], option  # the first value's answer is still its own


@pytest.mark.parametrize("timelines", [True, False], ids=["timeline-cache", "no-timeline-cache"])
def test_a_copy_of_an_answered_trace_is_answered_from_the_cache_without_analysis(tmp_path, monkeypatch, timelines):
    """The copy is not in the stat index: with the Timeline cache its hash is taken while it is read (and the read
    stops at the cached entry), without it the file is hashed first; either way the answer comes from the cache."""
    import stepscope.analysis.front_door as front_door

    trace = write(tmp_path / "trace.json", synthetic_generation(decode_steps=2))
    copy = tmp_path / "copy" / "trace.json"
    copy.parent.mkdir()
    copy.write_bytes(trace.read_bytes())
    policy = CachePolicy(store=CacheStore(tmp_path / "cache"), timelines=timelines)
    first = open_report(trace, AnalysisOptions(), cache=policy)

    def no_analysis(*args, **kwargs):
        raise AssertionError("analysed again")

    monkeypatch.setattr(front_door, "_analysed", no_analysis)
    again = open_report(copy, AnalysisOptions(), cache=policy)
    assert again.cached and again.text == first.text
