"""Configuration in one place: every STEPSCOPE_* variable is read by contracts/settings.py alone, and README lists
each one with its default (the table there is the module's)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from stepscope.contracts import settings

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
FOLDERS = [p for p in ROOT.iterdir() if (p / "__init__.py").is_file() and p.name not in ("stepscope", "tests")]
SOURCES = [p for top in FOLDERS for p in top.rglob("*.py")]


def _env_reads(tree: ast.AST, constants: dict[str, str]) -> list[str]:
    """The variable names a module reads from the environment (os.environ.get/[]/getenv with a literal or a
    module-level string constant)."""
    names = []
    for node in ast.walk(tree):
        target = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            func = ast.unparse(node.func)
            if func in ("os.environ.get", "os.getenv", "environ.get"):
                target = node.args[0]
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value) in ("os.environ", "environ"):
            target = node.slice
        if isinstance(target, ast.Constant) and isinstance(target.value, str):
            names.append(target.value)
        elif isinstance(target, ast.Name) and target.id in constants:
            names.append(constants[target.id])
    return names


def _constants(tree: ast.Module) -> dict[str, str]:
    return {
        t.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
        for t in node.targets
        if isinstance(t, ast.Name)
    }


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_only_the_settings_module_reads_stepscope_variables(path):
    if path == ROOT / "contracts" / "settings.py":
        return
    tree = ast.parse(path.read_text(), str(path))
    read = [n for n in _env_reads(tree, _constants(tree)) if n.startswith("STEPSCOPE_")]
    assert not read, f"{path.relative_to(ROOT)} reads {read}: read it through contracts/settings.py"


def test_every_setting_the_code_names_is_in_the_table():
    named = set()
    for path in SOURCES:
        named |= set(re.findall(r"\bSTEPSCOPE_[A-Z_]+\b", path.read_text()))
    assert named <= settings.NAMES, sorted(named - settings.NAMES)


@pytest.mark.parametrize("setting", settings.SETTINGS, ids=lambda s: s.name)
def test_readme_lists_every_setting_with_its_default(setting):
    assert f"| `{setting.name}` | {setting.default} |" in README


def test_an_unknown_name_is_refused():
    with pytest.raises(KeyError):
        settings.raw("STEPSCOPE_NO_SUCH_THING")


def test_values_are_read_when_asked(monkeypatch):
    monkeypatch.setenv("STEPSCOPE_MAX_BATCH", " 12 ")
    assert settings.positive_int("STEPSCOPE_MAX_BATCH", 64) == 12
    monkeypatch.setenv("STEPSCOPE_MAX_BATCH", "-3")
    assert settings.positive_int("STEPSCOPE_MAX_BATCH", 64) == 64
    monkeypatch.setenv("STEPSCOPE_ALLOW_REMOTE_RUNS", "Yes")
    assert settings.flag("STEPSCOPE_ALLOW_REMOTE_RUNS")
    monkeypatch.delenv("STEPSCOPE_RUNS_DIR", raising=False)
    monkeypatch.setenv("STEPSCOPE_LOGDIR", "/tmp/logs")
    assert settings.runs_dir("runs") == Path("/tmp/logs")  # one folder of traces, as TensorBoard's --logdir
