"""A CPU run's roofline device is measured once and stored, so every process (every door) gives the same answer:
the capture machine's own figures from run.json when it has them, else this machine's, labelled as such."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from stepscope.analysis.roofline.machine import capture_machine, cpu_hardware, stored_figures_digest, this_machine
from stepscope.contracts.run_record import RunRecord

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_traces" / "cpu_tiny-llama_eager" / "trace.json.gz"


def _figures_in_a_new_process(cache: Path) -> dict:
    code = (
        "import json\nfrom stepscope.analysis.roofline.machine import this_machine\n"
        "h = this_machine('CPU')\nprint(json.dumps([h.memory_bytes_per_s, h.flops_per_s, h.source]))\n"
    )
    env = dict(os.environ, STEPSCOPE_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_this_machine_is_measured_once_and_read_back_by_every_process(tmp_path):
    first = _figures_in_a_new_process(tmp_path)
    second = _figures_in_a_new_process(tmp_path)
    assert first == second  # measured figures would differ by 10-20% between two measurements
    assert "this machine" in first[2] and "not the capture machine" in first[2]
    (stored,) = (tmp_path / "machine").iterdir()
    assert json.loads(stored.read_text())["memory_bytes_per_s"] == first[0]


def test_the_capture_machines_figures_win(monkeypatch, tmp_path):
    monkeypatch.setenv("STEPSCOPE_CACHE_DIR", str(tmp_path))
    record = RunRecord(extra={"machine": {"memory_bytes_per_s": 2.5e10, "flops_per_s": 4e11, "host": "capture-box"}})
    hardware = cpu_hardware(record, "Xeon")
    assert (hardware.memory_bytes_per_s, hardware.flops_per_s) == (2.5e10, 4e11)
    assert "capture-box" in hardware.source and "run.json" in hardware.source
    assert not (tmp_path / "machine").exists()  # nothing measured here
    for bad in ({"memory_bytes_per_s": -1, "flops_per_s": 4e11}, {"memory_bytes_per_s": True, "flops_per_s": 1e9}, []):
        assert capture_machine(RunRecord(extra={"machine": bad}), "Xeon") is None


def test_a_damaged_stored_file_is_measured_again(monkeypatch, tmp_path):
    monkeypatch.setenv("STEPSCOPE_CACHE_DIR", str(tmp_path))
    assert stored_figures_digest() == "none"
    good = this_machine("CPU")
    (stored,) = (tmp_path / "machine").iterdir()
    digest = stored_figures_digest()
    assert digest.startswith("sha256-")
    stored.write_text('{"memory_bytes_per_s": "fast"}')
    again = this_machine("CPU")
    assert again.memory_bytes_per_s > 1e8 and stored_figures_digest() != digest
    assert good.kind == again.kind == "cpu"


def test_the_samples_roofline_is_the_same_in_two_processes(tmp_path):
    """Issue 29's drifting roofline: the shipped sample's roofline findings, in two processes, are identical."""
    env = dict(os.environ, STEPSCOPE_CACHE_DIR=str(tmp_path))
    runs = [
        subprocess.run(
            [sys.executable, "-m", "app.cli", "analyze", str(SAMPLE), "--json", "--no-cache"],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        for _ in range(2)
    ]
    assert all(r.returncode == 0 for r in runs), runs[0].stderr
    a, b = (json.loads(r.stdout) for r in runs)
    roofline = [f for f in a["findings"] if "roofline" in f["id"]]
    assert roofline and roofline == [f for f in b["findings"] if "roofline" in f["id"]]
    assert a["summary"]["anatomy"]["roofline"] == b["summary"]["anatomy"]["roofline"]
