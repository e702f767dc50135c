"""The compiled scanner's build and load (parsers.scanner): a read uses it only once built for this source, never
waits for the build unless told to, and never loads code that is not what the build wrote."""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np
import pytest

from parsers import event_scan, scanned_piece, scanner


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """The build's files in a folder of this test's own (the checkout's build stays as it is)."""
    monkeypatch.setattr(scanner, "_folder", lambda: tmp_path)
    return tmp_path


def test_auto_reads_with_msgspec_until_built_and_off_never_uses_it(folder, monkeypatch):
    monkeypatch.setenv("STEPSCOPE_JSON_SCANNER", "auto")
    assert not scanner.built()
    assert not scanner.usable()  # not built: msgspec reads, nothing waits
    assert not list(folder.iterdir())  # and nothing was built during the read
    monkeypatch.setenv("STEPSCOPE_JSON_SCANNER", "off")
    assert not scanner.usable()


def test_wait_builds_first_and_the_built_code_reads(folder, monkeypatch):
    monkeypatch.setenv("STEPSCOPE_JSON_SCANNER", "wait")
    assert scanner.usable()
    code, description = scanner._files()
    about = json.loads(description.read_text())
    assert code.stat().st_size > 1000 and about["symbol"]
    loaded = scanner._load(code, description)
    piece = np.frombuffer(b'{"ph": "X", "name": "k", "ts": 2, "dur": 1, "pid": 3, "tid": 4}', dtype=np.uint8)
    scanned = scanned_piece.scan_piece(loaded, piece, 0, len(piece))
    assert scanned.names == ["k"] and scanned.ints[:, 0].tolist()[2:4] == [3, 4]
    monkeypatch.setenv("STEPSCOPE_JSON_SCANNER", "auto")
    assert scanner.built() and scanner.usable()


def test_code_that_is_not_what_the_build_wrote_is_never_loaded(folder, monkeypatch):
    monkeypatch.setenv("STEPSCOPE_JSON_SCANNER", "wait")
    assert scanner.usable()
    code, description = scanner._files()
    data = bytearray(code.read_bytes())
    data[len(data) // 2] ^= 0xFF
    code.write_bytes(bytes(data))
    assert scanner._load(code, description) is None
    code.write_bytes(b"")
    assert scanner._load(code, description) is None


def test_a_failed_build_is_said_once_and_not_retried(folder, monkeypatch):
    def broken():
        raise RuntimeError("no compiler here")

    monkeypatch.setattr(event_scan, "c_entry", broken)
    monkeypatch.setenv("STEPSCOPE_JSON_SCANNER", "wait")
    assert not scanner.usable()
    assert "no compiler here" in scanner._failed().read_text()
    started = []
    monkeypatch.setattr(scanner, "start_build", lambda: started.append(1))
    monkeypatch.setenv("STEPSCOPE_JSON_SCANNER", "auto")
    scanner.build_later()
    assert not started


def test_one_background_build_at_a_time(folder, monkeypatch):
    launched = []
    monkeypatch.setattr(scanner.subprocess, "Popen", lambda *a, **k: launched.append(a))
    assert scanner.start_build()
    assert not scanner.start_build()  # its lock is there
    assert len(launched) == 1
    lock = scanner._files()[1].with_suffix(".building")
    old = time.time() - scanner._STALE_BUILD_S - 60
    os.utime(lock, (old, old))  # a build that died long ago
    assert scanner.start_build()
    assert len(launched) == 2


def test_the_background_build_frees_its_lock_and_writes_the_files(folder, monkeypatch):
    lock = scanner._files()[1].with_suffix(".building")
    lock.write_text("")
    monkeypatch.setattr(sys, "argv", ["-c", str(lock)])
    scanner.build_locked()
    assert not lock.exists()
    assert scanner.built()


def test_a_build_that_does_not_load_is_built_again(folder, monkeypatch):
    """Files that are not what the build wrote (here: a description without the code's hash) are never loaded: the
    read goes on with msgspec and the next one finds no build, so the build runs again."""
    monkeypatch.setenv("STEPSCOPE_JSON_SCANNER", "wait")
    monkeypatch.setattr(scanner, "_LOADED", scanner._Loaded())  # this process has loaded nothing yet
    assert scanner.usable()
    monkeypatch.setattr(scanner, "_LOADED", scanner._Loaded())
    _, description = scanner._files()
    about = json.loads(description.read_text())
    del about["sha256"]
    description.write_text(json.dumps(about))
    assert scanner.load() is None
    assert not scanner.built()


def test_the_scanner_command_builds_it_and_says_so(folder, capsys, monkeypatch):
    from app.cli.main import main

    monkeypatch.setattr(scanner, "_LOADED", scanner._Loaded())
    assert main(["scanner"]) == 0
    assert "built the compiled scanner in" in capsys.readouterr().out
    assert main(["scanner"]) == 0
    assert "is built" in capsys.readouterr().out
    monkeypatch.setattr(scanner, "installed", lambda: False)
    monkeypatch.setattr(scanner, "built", lambda: False)
    assert main(["scanner"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: ") and error.count("\n") == 1 and "numba" in error
