"""A checkout's bare folder names (app, parsers, ...) as aliases of the stepscope. modules.

In a checkout the project's folders sit at the repository root, where `python -m app.cli`, `python -m
collectors.run`, `streamlit run app/streamlit_app.py` and the tests reach them by their bare names, while the code
inside them reaches its neighbours by relative imports, which resolve under the stepscope. names (installed, the
folders live inside the stepscope package; stepscope/__init__.py makes a checkout look the same). A module under
two names would be two module objects: two copies of every class, exception type and cache. This finder makes
the bare name an alias of the stepscope. module instead, so `app.cli is stepscope.app.cli`.

Installed, nothing here runs: the folders are not on the path under bare names.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from pathlib import Path

PREFIX = "stepscope."


def package_folders(root: Path) -> tuple[str, ...]:
    """The repository's top-level packages (folders with an __init__.py) other than stepscope itself and tests."""
    return tuple(
        sorted(p.name for p in root.iterdir() if (p / "__init__.py").is_file() and p.name not in ("stepscope", "tests"))
    )


class _AliasSpec(importlib.machinery.ModuleSpec):
    """A bare name's spec whose parent is the stepscope. package: what `python -m app.cli` (runpy) sets as the
    running module's __package__, so its relative imports resolve under the stepscope. names too."""

    @property
    def parent(self) -> str:
        return PREFIX + super().parent


class _AliasLoader(importlib.abc.Loader):
    """Loads a bare name as the module already imported (or now imported) under its stepscope. name."""

    def __init__(self, real_name: str) -> None:
        self.real_name = real_name

    def create_module(self, spec: importlib.machinery.ModuleSpec):
        return importlib.import_module(self.real_name)

    def exec_module(self, module) -> None:
        """The real module ran when create_module imported it."""

    def get_code(self, fullname: str):
        """The real module's code, for runpy (`python -m collectors.run` runs it as __main__)."""
        real = importlib.util.find_spec(self.real_name)
        return None if real is None or real.loader is None else real.loader.get_code(self.real_name)


class BareNameFinder(importlib.abc.MetaPathFinder):
    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = frozenset(names)

    def find_spec(self, fullname: str, path=None, target=None):
        if fullname.partition(".")[0] not in self.names:
            return None
        real = importlib.util.find_spec(PREFIX + fullname)
        if real is None:
            return None
        package = real.submodule_search_locations is not None
        spec = _AliasSpec(fullname, _AliasLoader(PREFIX + fullname), origin=real.origin, is_package=package)
        if package:
            spec.submodule_search_locations = list(real.submodule_search_locations or [])
        return spec


def install(root: Path) -> None:
    """Put the finder first on sys.meta_path (once), and alias bare names imported before it was there."""
    if not any(isinstance(f, BareNameFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, BareNameFinder(package_folders(root)))


def alias_this(name: str) -> None:
    """Called by a package's __init__ imported under its bare name before `import stepscope`: the bare name
    becomes the stepscope. module (the import system hands out what sys.modules holds when __init__ returns)."""
    import stepscope  # noqa: F401  (installs the finder)

    sys.modules[name] = importlib.import_module(PREFIX + name)
