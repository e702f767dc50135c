"""Shared material for the app tests (test_app_pages, test_browser): a SYNTHETIC GPU trace with a
kernel named like an XSS probe, and the folder of fixture runs used when no samples are shipped."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

XSS_KERNEL = "<img src=x onerror=alert(1)>"
FIXTURE_SAMPLES = Path(__file__).resolve().parent / "fixtures" / "app_samples"


def synthetic_trace(decode_steps: int = 6, kernels_per_step: int = 5, gap_us: int = 40) -> dict:
    """A small Kineto-style GPU trace with stepscope markers and one kernel named like an XSS probe."""
    events: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}},
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}},
    ]
    ts = 1_000.0
    corr = 1
    for step in range(decode_steps + 1):
        kind = "prefill" if step == 0 else "decode"
        tokens = 16 if step == 0 else 1
        start = ts
        kernel_ts = ts + 5
        for k in range(kernels_per_step):
            name = XSS_KERNEL if k == 2 else f"synthetic_gemm_{k}"
            events.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    "pid": 1,
                    "tid": 1,
                    "ts": ts + k * 4,
                    "dur": 3,
                    "args": {"correlation": corr},
                }
            )
            dur = 30 if step == 0 else 8
            events.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": name,
                    "pid": 0,
                    "tid": 7,
                    "ts": kernel_ts,
                    "dur": dur,
                    "args": {"device": 0, "stream": 7, "correlation": corr},
                }
            )
            kernel_ts += dur + 2
            corr += 1
        end = kernel_ts + 2
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "pid": 1,
                "tid": 1,
                "ts": start,
                "dur": end - start,
                "name": f"stepscope.{kind}[request=0,index={step},tokens={tokens},batch=1]",
            }
        )
        ts = end + gap_us
    return {"traceEvents": events, "deviceProperties": [{"id": 0, "name": "Synthetic GPU", "numSms": 100}]}


def write_synthetic_trace(folder: Path, name: str = "synthetic") -> Path:
    """Write the synthetic trace as <folder>/<name>/trace.json.gz and return that path."""
    target = folder / name
    target.mkdir(parents=True, exist_ok=True)
    path = target / "trace.json.gz"
    path.write_bytes(gzip.compress(json.dumps(synthetic_trace()).encode()))
    (target / "run.json").write_text(json.dumps({"spec": {"mode": "eager", "device": "cuda"}, "device": "Synthetic"}))
    return path


def sample_folder(tmp_path: Path, monkeypatch, extra: tuple[Path, ...] = ()) -> Path:
    """A samples folder of the app-test fixtures (plus `extra` run folders) and an empty runs folder,
    both pointed at by the app's environment variables for this test."""
    folder = tmp_path / "samples"
    folder.mkdir()
    for sample in (*FIXTURE_SAMPLES.iterdir(), *extra):
        shutil.copytree(sample, folder / sample.name)
    monkeypatch.setenv("STEPSCOPE_SAMPLES_DIR", str(folder))
    monkeypatch.setenv("STEPSCOPE_RUNS_DIR", str(tmp_path / "runs"))
    return folder
