"""One module, one object: in a checkout the bare folder names (app, parsers, ...) are the stepscope. modules.

Two names for one file used to be two module objects (two CollectorError classes, two caches); these tests fail
if a bare name ever loads a file a second time."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import stepscope
from stepscope._checkout import package_folders

ROOT = Path(__file__).resolve().parents[1]
# Modules that need an optional extra or start something when imported.
SKIP = {"batch.ray_runner", "app.cli.__main__"}


def _modules() -> list[str]:
    names = []
    for top in package_folders(ROOT):
        names.append(top)
        package = importlib.import_module(f"stepscope.{top}")
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{top}."):
            if info.name not in SKIP and not info.name.endswith("__main__"):
                names.append(info.name)
    return names


def test_the_package_folders_are_the_installed_ones():
    assert set(package_folders(ROOT)) >= {"analysis", "api", "app", "collectors", "contracts", "parsers"}
    assert "tests" not in package_folders(ROOT) and "stepscope" not in package_folders(ROOT)


@pytest.mark.parametrize("name", _modules())
def test_bare_and_stepscope_names_are_one_module(name):
    bare = importlib.import_module(name)
    assert bare is importlib.import_module(f"stepscope.{name}")
    assert bare.__name__ == f"stepscope.{name}"


def test_one_error_class_whatever_the_name():
    from collectors.errors import CollectorError
    from collectors.errors import CollectorError as Installed

    assert CollectorError is Installed


def test_a_bare_import_before_stepscope_is_aliased_too():
    """A fresh interpreter that imports a bare name first (as `python -m app.cli` does) still gets one module."""
    code = (
        "import sys\n"
        "import parsers.timeline, collectors.errors\n"
        "import stepscope.parsers.timeline, stepscope.collectors.errors\n"
        "assert parsers.timeline is stepscope.parsers.timeline\n"
        "assert collectors.errors.CollectorError is stepscope.collectors.errors.CollectorError\n"
        "assert sys.modules['parsers'] is sys.modules['stepscope.parsers']\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


@pytest.mark.parametrize("module", ["app.cli", "collectors.run", "stepscope"])
def test_module_entry_points_run(module):
    out = subprocess.run(
        [sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "usage:" in out.stdout


def test_stepscope_api_is_reached_lazily():
    assert callable(stepscope.load) and "load" in dir(stepscope)


@pytest.mark.parametrize("name", [n for n in _modules() if hasattr(importlib.import_module(n), "__path__")])
def test_no_package_attribute_shadows_a_submodule(name):
    """`from .main import main` in a package would be undone by the first bare import of the submodule (the import
    system sets the submodule on its parent): a package's attribute named like a submodule must be that module."""
    package = importlib.import_module(name)
    for info in pkgutil.iter_modules(package.__path__):
        value = vars(package).get(info.name)
        if value is not None:
            assert value is importlib.import_module(f"{name}.{info.name}"), f"{name}.{info.name}"
