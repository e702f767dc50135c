"""The compiled scanner in Numba's public cache (parsers/kineto/compiled.py): used only where it is compiled for this
source, compiled in the foreground the first time (said on stderr), and a damaged cache never breaks a read: a
failed load clears the folder and the read's pieces are msgspec's; `stepscope scanner` compiles it again.

The damaged caches are SYNTHETIC: copies of this machine's compiled cache (conftest compiles it) with their files
truncated, replaced by garbage or by valid data of another shape, in a folder of each test's own.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys

import pytest

from parsers.kineto import compiled
from parsers.kineto import pieces as split_decode
from parsers.kineto.reader import read_chrome_trace_file
from tests.conftest import ROOT
from tests.test_split_decode import _assert_same, _doc_bytes, _events, _serial


@pytest.fixture
def cache_copy(tmp_path, monkeypatch):
    """This machine's compiled scanner copied into a cache folder of the test's own (XDG_CACHE_HOME)."""
    if not compiled.ready():
        compiled.compile_now()
    source = compiled.folder()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    shutil.copytree(source, compiled.folder())
    assert compiled.ready()
    return compiled.folder()


def _loads_in_a_fresh_process() -> bool:
    """compiled.load() in a process of its own (this one may hold the scanner already), as a read's other process."""
    done = subprocess.run(
        [sys.executable, "-c", "from parsers.kineto import compiled; print(compiled.load() is not None)"],
        cwd=ROOT,
        env={**os.environ, **compiled.child_environment()},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    return done.stdout.strip() == "True"


def _files(folder, pattern: str) -> list:
    return sorted(folder.rglob(f"*{pattern}"))


def test_the_copied_cache_loads(cache_copy):
    assert _loads_in_a_fresh_process()
    assert compiled.ready()


@pytest.mark.parametrize(
    "damage",
    ["index garbage", "index of another shape", "data truncated", "data of another shape"],
)
def test_a_damaged_numba_cache_is_cleared_and_not_loaded(cache_copy, damage):
    # the entry point's own files: its callees' code is linked into its cached library
    index, data = _files(cache_copy, "scan_into*.nbi")[0], _files(cache_copy, "scan_into*.nbc")[0]
    if damage == "index garbage":
        index.write_bytes(b"\x00garbage" * 10)
    elif damage == "index of another shape":
        version = pickle.loads(index.read_bytes())  # the index starts with Numba's version, then the entries
        index.write_bytes(pickle.dumps(version) + pickle.dumps({"not": "an index"}))
    elif damage == "data truncated":
        data.write_bytes(data.read_bytes()[:40])
    else:
        data.write_bytes(pickle.dumps(("a", "tuple", "of", "another", "shape")))
    assert not _loads_in_a_fresh_process()
    assert not cache_copy.exists()  # cleared: the next big read compiles it again
    assert not compiled.ready()


@pytest.mark.parametrize(
    "text",
    ["", '{"key": ', "[1, 2, 3]", '{"key": 5}', '{"key": "k", "files": "x"}', "null", '"a string"'],
    ids=["empty", "truncated", "a list", "a number key", "files not a map", "null", "a string"],
)
def test_a_description_of_another_shape_means_not_ready(cache_copy, text):
    (cache_copy / "ready.json").write_text(text)
    assert not compiled.ready()


def test_a_description_whose_files_are_not_there_means_not_ready(cache_copy):
    _files(cache_copy, ".nbc")[0].unlink()
    assert not compiled.ready()
    about = json.loads((cache_copy / "ready.json").read_text())
    about["files"] = {name: size + 1 for name, size in about["files"].items()}
    (cache_copy / "ready.json").write_text(json.dumps(about))
    assert not compiled.ready()


def test_a_big_read_with_a_damaged_cache_answers_as_msgspec_and_clears_it(cache_copy, tmp_path, monkeypatch):
    monkeypatch.setattr(split_decode, "MIN_SPLIT_BYTES", 0)
    monkeypatch.setattr(split_decode, "PIECE_BYTES", 4096)
    monkeypatch.setattr(compiled, "SCAN_MIN_BYTES", 0)
    monkeypatch.setenv("STEPSCOPE_PARSE_WORKERS", "2")
    monkeypatch.setenv("STEPSCOPE_JSON_SCANNER", "auto")
    for data_file in _files(cache_copy, ".nbc"):
        data_file.write_bytes(b"\x00" * data_file.stat().st_size)  # the sizes ready.json lists: a load is tried
    data = _doc_bytes(_events(400), traceName="tail")
    path = tmp_path / "trace.json"
    path.write_bytes(data)
    _assert_same(read_chrome_trace_file(path), _serial(data, monkeypatch))
    assert not cache_copy.exists()


def test_a_missing_cache_is_compiled_in_the_foreground_once_and_a_failure_is_not_retried(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("STEPSCOPE_JSON_SCANNER", "auto")
    calls = []

    def failing() -> float:
        calls.append(1)
        compiled.folder().mkdir(parents=True, exist_ok=True)
        raise RuntimeError("no compiler here")

    monkeypatch.setattr(compiled, "compile_now", failing)
    assert not compiled.wanted(compiled.SCAN_MIN_BYTES)
    assert "compiling the JSON scanner" in capsys.readouterr().err
    assert not compiled.wanted(compiled.SCAN_MIN_BYTES)  # recorded: reads do not try again
    assert calls == [1]
    assert not compiled.wanted(compiled.SCAN_MIN_BYTES - 1)  # small files: msgspec's, nothing asked
    monkeypatch.setenv("STEPSCOPE_JSON_SCANNER", "off")
    assert not compiled.wanted(1 << 40)


def test_the_scanner_command_compiles_again_and_says_so(tmp_path, monkeypatch, capsys):
    from app.cli.main import main

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    compiled.folder().mkdir(parents=True)
    (compiled.folder() / "failed.txt").write_text("an earlier failure\n")
    calls = []

    def fake_compile() -> float:
        calls.append(compiled.folder())
        compiled.clear()
        return 1.5

    monkeypatch.setattr(compiled, "compile_now", fake_compile)
    assert main(["scanner"]) == 0
    assert "compiled the scanner in 1.5 s" in capsys.readouterr().out and calls
    assert not (compiled.folder() / "failed.txt").exists()

    def broken() -> float:
        raise RuntimeError("no compiler here")

    monkeypatch.setattr(compiled, "compile_now", broken)
    assert main(["scanner"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: ") and error.count("\n") == 1 and "no compiler here" in error
