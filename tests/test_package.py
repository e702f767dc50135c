"""Packaging: what `pip install .` would install, the extras, the notebook API and README's example.

The wheel is built here without network (no build isolation: the installed setuptools), and its file list
checked: the folders live under stepscope/, nothing at the top level that could clash with another
project's `app` or `parsers`, and the samples ride along so the installed app has its default.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile

import pytest

from tests.conftest import ROOT

README = ROOT / "README.md"


def test_core_dependencies_pin_no_torch():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = " ".join(project["dependencies"]).lower()
    assert not re.search(r"\b(torch|transformers|ray)\b", core)
    extras = project["optional-dependencies"]
    assert any(d.startswith("torch") for d in extras["collect"]) and any(
        d.startswith("transformers") for d in extras["collect"]
    )
    assert any(d.startswith("ray") for d in extras["ray"])
    assert project["scripts"]["stepscope"] == "stepscope.app.cli.main:run"


@pytest.fixture(scope="module")
def wheel_files(tmp_path_factory) -> list[str]:
    """Build from a copy of what the package is made of (setuptools writes build/ beside its sources)."""
    pytest.importorskip("setuptools")
    source = tmp_path_factory.mktemp("source")
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "runs", "build", "*.egg-info")
    packages = [p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file() and p.name != "tests"]
    for name in [*packages, "sample_traces"]:
        shutil.copytree(ROOT / name, source / name, ignore=skip, symlinks=True)  # stepscope/: its links
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    out = tmp_path_factory.mktemp("wheel")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation", "-q", "-w", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=out,
    )
    if result.returncode != 0:
        pytest.fail(result.stderr[-2000:])
    (wheel,) = out.glob("stepscope-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def test_wheel_puts_every_folder_under_stepscope(wheel_files):
    tops = {name.split("/")[0] for name in wheel_files}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"stepscope"}
    for module in (
        "stepscope/__init__.py",
        "stepscope/api/__init__.py",
        "stepscope/app/cli/main.py",
        "stepscope/app/cli/compare.py",
        "stepscope/app/streamlit_app.py",
        "stepscope/app/views/analyze.py",
        "stepscope/exporters/figures/timeline.py",
        "stepscope/analysis/roofline/__init__.py",
        "stepscope/analysis/metrics.py",
        "stepscope/parsers/__init__.py",
        "stepscope/exporters/__init__.py",
        "stepscope/collectors/run.py",
        "stepscope/contracts/__init__.py",
        "stepscope/batch/cli.py",
        "stepscope/trace_cache/timelines.py",
        "stepscope/app/cli_cached.py",
    ):
        assert module in wheel_files, module
    for sample in ("cpu_tiny-llama_eager", "cpu_tiny-llama_compile"):
        assert f"stepscope/sample_traces/{sample}/trace.json.gz" in wheel_files
        assert f"stepscope/sample_traces/{sample}/run.json" in wheel_files
    assert "stepscope/exporters/vendor/plotly-basic-4.1.1.min.js" in wheel_files  # the HTML report's plotly.js
    assert not any(name.startswith("stepscope/tests/") for name in wheel_files)


def _readme_example() -> str:
    text = README.read_text()
    match = re.search(r"<!-- notebook-example -->\s*```python\n(.*?)```\s*<!-- /notebook-example -->", text, re.S)
    assert match, "README has no notebook example between its markers"
    return match.group(1)


def test_readme_notebook_example_runs(tmp_path):
    """README's example, as written, from a folder holding the samples (so its relative paths work)."""
    (tmp_path / "sample_traces").symlink_to(ROOT / "sample_traces")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run(
        [sys.executable, "-c", _readme_example()], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ms per token" in result.stdout and "torch.compile raised decode tokens/s" in result.stdout
    report = tmp_path / "eager_report.html"
    assert report.exists() and report.stat().st_size <= 1_500_000


def test_api_numbers_match_the_cli(tmp_path):
    import json

    import stepscope

    sample = ROOT / "sample_traces" / "cpu_tiny-llama_eager" / "trace.json.gz"
    trace = stepscope.load(sample)
    cli = subprocess.run(
        [sys.executable, "-m", "app.cli", "analyze", str(sample), "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    summary = json.loads(cli.stdout)["summary"]
    assert trace.summary["itl_ms"] == pytest.approx(summary["itl_ms"])
    assert trace.summary["decode_steps"] == summary["decode_steps"] == len(trace.steps[trace.steps["kind"] == "decode"])
    frames = stepscope.frames(trace)
    assert set(frames) == {"events", "steps", "gaps", "top_kernels", "findings", "memory"}
    assert len(frames["events"]) == json.loads(cli.stdout)["events"]
    assert trace.name == "cpu_tiny-llama_eager"


def test_importing_the_package_is_light():
    """`import stepscope` (run before any stepscope.<folder> import) loads no pandas, numpy or torch."""
    code = "import sys, stepscope; print(sorted({m.split('.')[0] for m in sys.modules} & {'pandas', 'numpy', 'torch'}))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
    assert callable(__import__("stepscope").load)  # and the API is there on first use
