"""Property-based fuzzing of the whole CLI path over the three trace formats and run.json (issue 16).

Inputs are SYNTHETIC and generated here (tests/fuzz_inputs.py): structure-aware traces with hostile
values, sometimes byte-mutated. Each must get a sane answer (finite numbers, steps in order, busy within
span) or exit status 2 with one `error:` line that is not an internal error; never another exception.
Bounded for CI (about a minute or two on two cores), with a fixed seed and no per-example deadline.
bench/fuzz.py runs the same properties for much longer.

Issue 26's surfaces (tests/fuzz_surfaces.py): rank folders (repeated, hostile and missing ranks, members that are
not files), --logdir trees with names that are not UTF-8 or hold bidi controls, damaged cache entries (which must
never change the answer), run.json sidecars that are not files or are too large or deep, and user regexes (RE2).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings

from tests import fuzz_inputs as fi
from tests import fuzz_surfaces as fs

SCALE = float(os.environ.get("STEPSCOPE_FUZZ_SCALE", "1"))  # bench/fuzz.py raises it


def _settings(examples: int):
    return settings(
        max_examples=max(1, int(examples * SCALE)),
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )


@_settings(400)
@given(fi.kineto_trace_bytes())
def test_fuzz_kineto_json(data: bytes) -> None:
    fi.check_contract(data, "trace.json")


@_settings(300)
@given(fi.perfetto_trace_bytes())
def test_fuzz_perfetto(data: bytes) -> None:
    fi.check_contract(data, "trace.pftrace")


@_settings(250)
@given(fi.nsys_sqlite_bytes())
def test_fuzz_nsys_sqlite(data: bytes) -> None:
    fi.check_contract(data, "report.sqlite")


@_settings(80)
@given(fi.run_json_bytes())
def test_fuzz_run_json_beside_a_trace(data: bytes) -> None:
    # the trace is valid: whatever the run.json holds, the answer is the analysis (a note at most), never exit 2
    assert fi.check_contract(fi.SAMPLE_TRACE.read_bytes(), "trace.json.gz", run_json=data)[0] == 0


@_settings(40)
@given(fs.rank_folders())
def test_fuzz_rank_folders(members) -> None:
    fs.check_rank_folder(members)


@_settings(40)
@given(fs.logdir_trees())
def test_fuzz_logdir_names(files) -> None:
    fs.check_logdir_tree(files)


@_settings(40)
@given(fs.cache_damage())
def test_fuzz_cache_entries(damage) -> None:
    fs.check_cache_damage(damage)


@_settings(6)
@given(fs.long_name_traces())
def test_fuzz_long_names(drawn) -> None:
    fs.check_long_names(drawn)


@_settings(30)
@given(fs.sidecars())
def test_fuzz_sidecars(sidecar) -> None:
    fs.check_sidecar(sidecar)


@_settings(60)
@given(fs.user_regexes())
def test_fuzz_user_regexes(pattern: str) -> None:
    fs.check_user_regex(pattern)
