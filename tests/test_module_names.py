"""One name per module: stepscope.<folder>.<module>, found by the ordinary import system in a checkout.

In a checkout stepscope/ holds a symbolic link to each top-level folder (stepscope/__init__.py); these tests fail
if a folder lacks its link, if a product file brings back an import finder or an aliasing preamble, or if running
the command line as `python -m app.cli` loads a product module a second time under its bare folder name."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

import stepscope

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = sorted(
    p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file() and p.name not in ("stepscope", "tests")
)
SAMPLE = ROOT / "sample_traces" / "cpu_tiny-llama_eager" / "trace.json.gz"
# Modules that need an optional extra or start something when imported.
SKIP = {"stepscope.batch.ray_runner"}


def _modules() -> list[str]:
    names = []
    for top in FOLDERS:
        package = importlib.import_module(f"stepscope.{top}")
        names.append(package.__name__)
        for info in pkgutil.walk_packages(package.__path__, prefix=f"stepscope.{top}."):
            if info.name not in SKIP and not info.name.endswith("__main__"):
                names.append(info.name)
    return names


def test_every_package_folder_has_its_link_in_stepscope():
    assert set(FOLDERS) >= {"analysis", "api", "app", "collectors", "contracts", "parsers"}
    for name in [*FOLDERS, "sample_traces"]:
        link = ROOT / "stepscope" / name
        assert link.is_symlink() and link.resolve() == (ROOT / name).resolve(), name


@pytest.mark.parametrize("name", _modules())
def test_every_module_has_its_stepscope_name_and_file(name):
    module = importlib.import_module(name)
    assert module.__name__ == name
    relative = Path(*name.split(".")[1:])
    expected = ROOT / relative / "__init__.py" if hasattr(module, "__path__") else ROOT / relative.with_suffix(".py")
    assert Path(module.__file__).resolve() == expected.resolve()


def test_no_product_file_installs_an_import_finder_or_aliases_itself():
    for top in [*FOLDERS, "stepscope"]:
        for path in (ROOT / top).rglob("*.py"):
            text = path.read_text()
            for marker in ("sys.meta_path", "alias_this", "__path__.append", "__path__ +="):
                assert marker not in text, f"{path.relative_to(ROOT)}: {marker}"
            assert not re.search(r"sys\.modules\[[^]]+\]\s*=[^=]", text), f"{path.relative_to(ROOT)} sets a module"


def test_python_m_app_cli_loads_no_product_module_under_a_bare_name():
    """runpy imports the bare packages on the way (app, app.cli: empty of definitions); nothing else is bare."""
    code = (
        "import os, runpy, sys\n"
        "def leave(status):\n    raise SystemExit(status)\n"
        "os._exit = leave\n"  # the command's fast exit would skip the print below
        f"sys.argv = ['app.cli', 'analyze', {str(SAMPLE)!r}, '--json', '--no-cache']\n"
        "try:\n    runpy.run_module('app.cli', run_name='__main__', alter_sys=True)\n"
        "except SystemExit:\n    pass\n"
        f"folders = {FOLDERS!r}\n"
        "bare = sorted(n for n in sys.modules if n.split('.')[0] in folders)\n"
        "defined = sorted(f'{n}.{k}' for n in bare for k, v in vars(sys.modules[n]).items()\n"
        "                 if not k.startswith('__') and type(v) is not type(sys))\n"
        "print('BARE', bare, defined, file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert '"steps"' in out.stdout
    line = next(x for x in out.stderr.splitlines() if x.startswith("BARE"))
    assert line == "BARE ['app', 'app.cli'] []", line


@pytest.mark.parametrize("module", ["app.cli", "collectors.run", "stepscope"])
def test_module_entry_points_run(module):
    out = subprocess.run(
        [sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "usage:" in out.stdout


def test_stepscope_api_is_reached_lazily():
    assert callable(stepscope.load) and "load" in dir(stepscope)


def _imports_between_folders() -> set[tuple[str, str]]:
    """(importer, imported) for every import statement in the product that names another top-level folder."""
    pairs = set()
    for top in FOLDERS:
        for path in (ROOT / top).rglob("*.py"):
            parts = ["stepscope", *path.relative_to(ROOT).with_suffix("").parts]
            importer = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            package = parts[:-1]
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom):
                    base = package[: len(package) - node.level + 1] if node.level else []
                    names = [".".join([*base, *([node.module] if node.module else [])])]
                elif isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                else:
                    continue
                for name in names:
                    if name.startswith("stepscope.") and name.split(".")[1] != top:
                        pairs.add((importer, name))
    return pairs


def test_the_import_graph_has_every_import_between_the_folders():
    """What a plain import-graph tool (grimp, under import-linter) draws is what the code says."""
    graph = grimp.build_graph("stepscope", cache_dir=None)
    pairs = _imports_between_folders()
    assert len(pairs) > 100  # before the stepscope. names, grimp drew almost none
    missing = [
        (importer, imported)
        for importer, imported in sorted(pairs)
        if not any(
            m == imported or m.startswith(imported + ".") for m in graph.find_modules_directly_imported_by(importer)
        )
    ]
    assert not missing, missing[:5]
