"""Fingerprint every frame and value analyze() returns, to check that speed work changes none of them.

The CLI JSON (bench/analysis_identity.py) does not show every frame the app reads (top_kernels, the
anatomy's per-work frame, dtypes), so this records those too, in-process:

    python bench/analysis_frames_identity.py save /tmp/frames_before.json
    python bench/analysis_frames_identity.py check /tmp/frames_before.json

A frame's fingerprint is its dtypes, its index and a hash of each column's values (categoricals by value).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from analysis_identity import inputs  # noqa: E402

from stepscope.analysis import AnalysisOptions, analyze  # noqa: E402
from stepscope.parsers.load import load_trace  # noqa: E402


def fingerprint(value: object) -> object:
    """A JSON-able summary of a value that changes whenever the value (or a frame's dtype) does."""
    if isinstance(value, pd.DataFrame):
        cols = {str(c): [_dtype(value[c].dtype), _hash(value[c])] for c in value.columns}
        return {"frame": [str(value.index.dtype), _hash(pd.Series(value.index)), cols]}
    if isinstance(value, pd.Series):
        return {"series": [_dtype(value.dtype), _hash(value)]}
    if isinstance(value, pd.Categorical):
        return {"categorical": [_dtype(value.dtype), _hash(pd.Series(value))]}
    if isinstance(value, np.ndarray):
        return {"array": [str(value.dtype), hashlib.sha1(np.ascontiguousarray(value).tobytes()).hexdigest()]}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {type(value).__name__: {f.name: fingerprint(getattr(value, f.name)) for f in dataclasses.fields(value)}}
    if isinstance(value, dict):
        return {"dict": [[repr(k), fingerprint(v)] for k, v in value.items()]}
    if isinstance(value, (list, tuple)):
        return {type(value).__name__: [fingerprint(v) for v in value]}
    return repr(value)


def _dtype(dtype: object) -> str:
    """The dtype, with a categorical's categories (their dtype and order) spelled out."""
    if isinstance(dtype, pd.CategoricalDtype):
        cats = dtype.categories
        return f"category[{cats.dtype}, ordered={dtype.ordered}]:{hashlib.sha1(repr(list(cats)).encode()).hexdigest()}"
    return repr(dtype)


def _hash(series: pd.Series) -> str:
    hashed = pd.util.hash_pandas_object(series, index=False).to_numpy()
    return hashlib.sha1(hashed.tobytes()).hexdigest()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["save", "check"])
    parser.add_argument("file", type=Path)
    args = parser.parse_args()
    found = {}
    files = [p for p in inputs() if p.is_file()]
    for folder in (p for p in inputs() if p.is_dir()):  # the loader takes files: each trace file inside
        files += sorted(p for p in folder.rglob("*") if p.is_file() and p.name.endswith((".json", ".json.gz")))
    for path in files:
        key = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
        try:
            result = analyze(load_trace(path), AnalysisOptions())
        except Exception as exc:  # a folder the loader does not take is recorded, not fatal
            found[key] = f"error: {type(exc).__name__}: {exc}"
            continue
        found[key] = fingerprint(result)
    if args.mode == "save":
        args.file.write_text(json.dumps(found, indent=1))
        print(f"saved {len(found)} inputs")
        return 0
    saved = json.loads(args.file.read_text())
    bad = 0
    for key, value in found.items():
        same = json.loads(json.dumps(value)) == saved.get(key)
        bad += not same
        print(f"{'same   ' if same else 'DIFFERS'} {key}")
        if not same:
            _explain(saved.get(key), json.loads(json.dumps(value)), key)
    return 1 if bad else 0


def _explain(old: object, new: object, where: str) -> None:
    """Print the paths at which two fingerprints differ."""
    if isinstance(old, dict) and isinstance(new, dict):
        for k in old.keys() | new.keys():
            if old.get(k) != new.get(k):
                _explain(old.get(k), new.get(k), f"{where}.{k}")
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            if a != b:
                _explain(a, b, f"{where}[{i}]")
    else:
        print(f"    {where}: {str(old)[:200]} -> {str(new)[:200]}")


if __name__ == "__main__":
    sys.exit(main())
