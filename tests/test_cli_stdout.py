"""A command's answer reaches standard output whole, or the command ends with 141 when its reader leaves: with
stdout buffered or not (PYTHONUNBUFFERED makes one raw write take only part of a big answer), cold or from the
answer cache. Traces here are SYNTHETIC (tests/synthetic_traces.py)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stepscope.app.cli import stdout

ROOT = Path(__file__).resolve().parents[1]


class _Trickle(io.RawIOBase):
    """A raw stdout that takes at most 1,000 bytes a write, as a pipe may."""

    def __init__(self) -> None:
        self.got = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        part = bytes(data[:1000])
        self.got += part
        return len(part)


def test_every_byte_is_written_when_each_write_takes_only_part(monkeypatch):
    raw = _Trickle()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding="utf-8", write_through=True))
    text = "{" + "x" * 250_000 + "é}\n"
    stdout.write_text(text)
    assert raw.got.decode() == text


@pytest.mark.parametrize("unbuffered", ["1", ""], ids=["unbuffered", "buffered"])
def test_a_reader_that_leaves_early_ends_the_command_with_141_cold_and_warm(tmp_path, unbuffered):
    from tests.synthetic_traces import write
    from tests.test_report_html import synthetic_steps

    trace = write(tmp_path / "many_steps.json", synthetic_steps(3_000))  # about 1 MB of JSON: many pipe buffers
    env = dict(os.environ, STEPSCOPE_CACHE_DIR=str(tmp_path / "cache"), PYTHONUNBUFFERED=unbuffered)
    command = [sys.executable, "-m", "app.cli", "analyze", str(trace), "--json"]
    whole = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, check=True).stdout
    assert len(whole) > 500_000 and whole.endswith(b"}\n")
    for _ in ("cold", "warm"):  # the first run cached the answer: both later runs are warm, the first was whole
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdout.read(1) == b"{"
        proc.stdout.close()
        stderr = proc.stderr.read().decode()
        assert proc.wait(timeout=120) == 141 and "Traceback" not in stderr, stderr
