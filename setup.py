"""Packages of the installed form: each top-level folder becomes stepscope.<folder> (see stepscope/__init__.py).

Computed here, not listed in pyproject.toml, so a new subpackage (any folder with an __init__.py under these)
is installed without editing a list. Metadata and dependencies are in pyproject.toml.
"""

from pathlib import Path

from setuptools import find_packages, setup

ROOT = Path(__file__).parent
SUBPACKAGES = ("contracts", "collectors", "parsers", "trace_cache", "analysis", "exporters", "batch", "app")
present = [name for name in SUBPACKAGES if (ROOT / name / "__init__.py").exists()]
packages = ["stepscope", "stepscope.sample_traces"]
for name in present:
    packages += [f"stepscope.{p}" for p in find_packages(include=[name, f"{name}.*"])]

setup(
    packages=packages,
    package_dir={
        "stepscope": "stepscope",
        "stepscope.sample_traces": "sample_traces",
        **{f"stepscope.{name}": name for name in present},
    },
    package_data={"stepscope.sample_traces": ["README.md", "*/trace.json.gz", "*/run.json"]},
)
