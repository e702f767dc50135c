"""Shared fixtures. Real traces come from ../shared/real_traces (see its PROVENANCE.md for sources)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

REAL_TRACES = ROOT.parent / "shared" / "real_traces"
# The on-disk trace cache of everything the tests run goes to a throwaway folder, not ~/.cache/stepscope.
os.environ.setdefault("STEPSCOPE_CACHE_DIR", tempfile.mkdtemp(prefix="stepscope-test-cache-"))


def real_trace(name: str) -> Path:
    path = REAL_TRACES / name
    if not path.exists():
        pytest.skip(f"{path} is not on this machine")
    return path


@pytest.fixture
def real_traces_dir() -> Path:
    if not REAL_TRACES.is_dir():
        pytest.skip("../shared/real_traces is not on this machine")
    return REAL_TRACES
