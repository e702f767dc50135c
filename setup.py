"""Packages of the installed form: each top-level folder becomes stepscope.<folder> (see stepscope/__init__.py).

Computed here, not listed in pyproject.toml, so a new package (any top-level folder with an __init__.py, other
than stepscope itself and tests) is installed without editing a list; stepscope/_checkout.py finds the same
folders in a checkout. Metadata and dependencies are in pyproject.toml.
"""

from pathlib import Path

from setuptools import find_packages, setup

ROOT = Path(__file__).parent
present = sorted(
    p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file() and p.name not in ("stepscope", "tests")
)
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
    package_data={
        "stepscope.sample_traces": ["README.md", "*/trace.json.gz", "*/run.json"],
        "stepscope.exporters": ["vendor/*"],  # plotly.js's basic bundle for the HTML report (exporters/plotly_bundle)
    },
)
