"""Issue 39 item 2: a bound covers every twin of its input. The Run page refuses a typed prompt past
STEPSCOPE_MAX_PROMPT_TOKENS when Run is pressed (whatever the text box's own cap); the command line's `run` and
`sweep` apply the page's bounds (and one on requests) in one `error:` line, exit 2, unless --no-limits.

Inputs are built here: long prompts of generated text, huge counts.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from stepscope.app import exposure
from stepscope.collectors.run import build_parser, limits_problem
from stepscope.contracts import settings
from tests.app_pages import page_test
from tests.app_samples import sample_folder

REPO = Path(__file__).resolve().parents[1]
TIMEOUT_S = 90


def _cli(*args: str, tmp_path: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """The timeout is a hang guard: a refusal comes before any model is built."""
    cmd = [sys.executable, "-m", "app.cli", *args, "--out", str(tmp_path / "runs")]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120, env=env)


def _one_error_line(proc: subprocess.CompletedProcess, setting: str) -> None:
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and setting in lines[0], proc.stderr[-2000:]


@pytest.mark.parametrize(
    ("args", "setting"),
    [
        (["run", "--requests", "100000"], "STEPSCOPE_MAX_REQUESTS"),
        (["run", "--warmup", "100000"], "STEPSCOPE_MAX_REQUESTS"),
        (["run", "--new-tokens", "1000000"], "STEPSCOPE_MAX_NEW_TOKENS"),
        (["run", "--batch", "100000"], "STEPSCOPE_MAX_BATCH"),
        (["run", "--prompt-tokens", "1000000"], "STEPSCOPE_MAX_PROMPT_TOKENS"),
        (["run", "--prompt", "stepscope " * 10_000], "STEPSCOPE_MAX_PROMPT_TOKENS"),
        (["sweep", "--max-tokens", "10000000"], "STEPSCOPE_MAX_PROMPT_TOKENS"),
        (["sweep", "--points", "1000000"], "STEPSCOPE_MAX_REQUESTS"),
        (["sweep", "--repeats", "1000000"], "STEPSCOPE_MAX_REQUESTS"),
        (["sweep", "--batch", "100000"], "STEPSCOPE_MAX_BATCH"),
    ],
)
def test_the_command_line_refuses_past_the_bounds_in_one_line(tmp_path, args, setting):
    proc = _cli(*args, "--device", "cpu", tmp_path=tmp_path)
    _one_error_line(proc, setting)
    assert "--no-limits" in proc.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_a_raised_setting_or_no_limits_lets_the_same_run_through(monkeypatch):
    args = ["--requests", "100", "--prompt", "x" * 9000]
    assert "STEPSCOPE_MAX_REQUESTS" in limits_problem(build_parser().parse_args(args))
    assert limits_problem(build_parser().parse_args([*args, "--no-limits"])) is None
    monkeypatch.setenv("STEPSCOPE_MAX_REQUESTS", "100")
    assert "STEPSCOPE_MAX_PROMPT_TOKENS" in limits_problem(build_parser().parse_args(args))
    monkeypatch.setenv("STEPSCOPE_MAX_PROMPT_TOKENS", "9000")
    assert limits_problem(build_parser().parse_args(args)) is None


def test_a_typed_prompt_is_priced_by_its_bytes():
    bound = settings.run_bound("prompt_tokens")
    counts = {"new_tokens": 1, "batch": 1}
    assert settings.run_limits_problem(counts, "a" * bound) is None  # a preset: one token a byte, exactly
    assert settings.run_limits_problem(counts, "a" * (bound + 1)) is not None
    assert settings.run_limits_problem(counts, "é" * (bound // 2 + 1)) is not None  # two bytes each
    tokenized = settings.TOKENIZER_BYTES_PER_TOKEN * bound
    assert settings.run_limits_problem(counts, "a" * tokenized, tokenizer=True) is None
    assert settings.run_limits_problem(counts, "a" * (tokenized + 1), tokenizer=True) is not None
    assert settings.run_limits_problem(counts, "\ud800" * 10) is None  # a lone surrogate is priced, not a crash


def test_the_run_page_refuses_a_typed_prompt_past_the_bound(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    sample_folder(tmp_path, monkeypatch)
    monkeypatch.delenv(exposure.ALLOW_REMOTE_ENV, raising=False)
    monkeypatch.setenv("STEPSCOPE_MAX_PROMPT_TOKENS", "64")
    monkeypatch.setenv("STEPSCOPE_RUNS_DIR", str(tmp_path / "runs"))
    at = page_test("run", TIMEOUT_S).run()
    next(t for t in at.text_input if t.label.startswith("Prompt")).set_value("tokens " * 100)
    next(b for b in at.button if b.label == "Run").click().run()
    assert not at.exception
    refused = [e.value.replace("\\", "") for e in at.error if e.value.startswith("Run refused:")]
    assert len(refused) == 1 and "STEPSCOPE_MAX_PROMPT_TOKENS" in refused[0], [e.value for e in at.error]
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
