"""The compiled event scanner (parsers.event_scan) as machine code a read loads in milliseconds: its build, and
whether a read may use it.

Why machine code, not Numba's own cache: a process that loads a function from Numba's cache first imports Numba and
its typing registries (measured here: 0.55-0.8 s a process, scipy included where it is installed), and both decoding
processes pay it, while loading the same code with llvmlite alone takes about 40 ms. So a build, run once per
machine and source (Numba compiles the scanner's C entry point, several seconds), writes the object code and what it
needs from the process (its undefined symbols, all of them CPython's own or never called); a read loads that file into
an llvmlite MCJIT engine and calls the entry point through ctypes, which releases the GIL while it runs.

A read never waits for that build. The scanner is used once a build has finished for this exact source, Numba,
llvmlite, Python and CPU (the files' names carry that key); until then a big read decodes with msgspec as before, and
starts the build in a background process when it is done, for the reads after it. The app starts the build when it
starts. STEPSCOPE_JSON_SCANNER chooses: `auto` (that), `off` (msgspec only), `wait` (build first if need be:
benchmarks and tests that time or test the scanner itself).

Where the files live: beside the module, in its __pycache__, when that folder is writable (a checkout), else in the
user's cache folder (~/.cache/stepscope-scanner); apart from the trace cache (STEPSCOPE_CACHE_DIR), which a "cold"
benchmark empties: the compiled scanner belongs to the installation, not to the traces read.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from ..contracts import settings
from .scan_layout import ENTRY_ARGS

SETTING = "STEPSCOPE_JSON_SCANNER"
MODES = ("auto", "off", "wait")
_SOURCES = [Path(__file__).resolve().with_name(name) for name in ("event_scan.py", "scan_layout.py")]
_STALE_BUILD_S = 900.0  # a build lock this old belongs to a build that died
_FORMAT = b"object+description/2"  # what a build writes: a new layout is a new key, never read as the old
_C_TYPES = {"i": ctypes.c_int64, "b": ctypes.c_void_p, "p": ctypes.c_void_p, "f": ctypes.c_void_p}
_ENTRY_TYPE = ctypes.CFUNCTYPE(ctypes.c_int64, *(_C_TYPES[kind] for _, kind in ENTRY_ARGS))


def mode() -> str:
    value = (settings.raw(SETTING) or "auto").lower()
    return value if value in MODES else "auto"


def installed() -> bool:
    """Whether Numba and llvmlite, which build and load the scanner, are here."""
    return importlib.util.find_spec("numba") is not None and importlib.util.find_spec("llvmlite") is not None


@functools.cache
def _key() -> str:
    """What the machine code depends on: the source's bytes, Numba, llvmlite, Python and this CPU. Once per process:
    its code does not change under it (the app does not reload its modules)."""
    import llvmlite.binding as llvm

    parts = [_FORMAT, *(path.read_bytes() for path in _SOURCES)]
    parts += [importlib.metadata.version(name).encode() for name in ("numba", "llvmlite")]
    parts += [sys.version.encode(), llvm.get_host_cpu_name().encode(), llvm.get_host_cpu_features().flatten().encode()]
    return hashlib.sha256(b"\0".join(parts)).hexdigest()[:24]


def _folder() -> Path:
    in_tree = _SOURCES[0].parent / "__pycache__"
    with contextlib.suppress(OSError):
        in_tree.mkdir(exist_ok=True)
        if os.access(in_tree, os.W_OK):
            return in_tree
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "stepscope-scanner"


def _files() -> tuple[Path, Path]:
    """(the object code, its description: the entry's symbol, the symbols it needs, the code's hash); the second is
    written last."""
    stem = _folder() / f"event_scan-{_key()}"
    return stem.with_suffix(".o"), stem.with_suffix(".json")


def _failed() -> Path:
    """Written when a build of this key failed (its error inside): no read starts another."""
    return _files()[1].with_suffix(".failed")


def built() -> bool:
    """Whether a build of this source has finished here."""
    try:
        return installed() and _files()[1].is_file()
    except (OSError, ImportError):
        return False


def usable() -> bool:
    """Whether a read may use the scanner now: built already, or built here first (mode `wait`)."""
    chosen = mode()
    if chosen == "off" or not installed():
        return False
    if not built():
        if chosen == "auto" or _failed().exists():
            return False
        try:
            build()
        except Exception as exc:  # any failure of the compiler: msgspec reads, and it is said once
            _record_failure(exc)
            return False
    return load() is not None


def build_later() -> None:
    """After a read that could not use the scanner: start its build in the background (mode `auto`, Numba
    installed, not built), for the reads after it. Started after the read, not during it: the compile would take a
    core from the decoding."""
    if mode() == "auto" and installed() and not built() and not _failed().exists():
        start_build()


# --- the build ------------------------------------------------------------------------------------------------


def _target_machine():
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    features = llvm.get_host_cpu_features().flatten()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(), features=features, opt=3, reloc="pic")


def build() -> Path:
    """Compile the scanner's C entry point with Numba and write its object code for this machine (see the module)."""
    import llvmlite.binding as llvm

    from . import event_scan

    entry = event_scan.c_entry()
    module = llvm.parse_assembly(entry.inspect_llvm())
    module.verify()
    needed = {f.name for f in module.functions if f.is_declaration and not f.name.startswith("llvm.")}
    needed |= {g.name for g in module.global_variables if g.is_declaration}
    code, description = _files()
    code.parent.mkdir(parents=True, exist_ok=True)
    machine_code = _target_machine().emit_object(module)
    _write_whole(code, machine_code)
    about = {
        "symbol": entry.native_name,
        "needs": sorted(needed),
        "sha256": hashlib.sha256(machine_code).hexdigest(),
        "built": time.strftime("%Y-%m-%d %H:%M"),
    }
    _write_whole(description, json.dumps(about).encode())
    if _load(code, description) is None:  # what is built must load here, or no read ever tries it
        description.unlink()
        raise RuntimeError("the built scanner does not load")
    return code


def _record_failure(exc: BaseException) -> None:
    with contextlib.suppress(OSError):
        _write_whole(_failed(), f"{type(exc).__name__}: {exc}\n".encode())


def _write_whole(path: Path, data: bytes) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.write_bytes(data)
    os.replace(temporary, path)  # whole or not at all


def start_build() -> bool:
    """Start a background build unless one runs (a lock file, stale after _STALE_BUILD_S); whether one started."""
    try:
        lock = _files()[1].with_suffix(".building")
        lock.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            if time.time() - lock.stat().st_mtime > _STALE_BUILD_S:
                lock.unlink()
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except (OSError, ImportError):
        return False  # a build runs, or nothing can be written here: msgspec reads on
    os.close(fd)
    root = Path(sys.modules[__name__.split(".")[0]].__file__ or "").resolve().parents[1]  # the folder holding it
    code = f"import sys; sys.path.insert(0, {str(root)!r}); from {__name__} import build_locked; build_locked()"
    try:
        subprocess.Popen(
            [sys.executable, "-P", "-c", code, str(lock)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # not tied to the reader: it finishes even when the reader has left
        )
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(lock)
        return False
    return True


def build_locked() -> None:
    """The background build (its lock file is the last argument): build, then free the lock whatever happened."""
    try:
        build()
    except Exception as exc:  # recorded, so that no read starts this build again
        _record_failure(exc)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(sys.argv[-1])


# --- loading --------------------------------------------------------------------------------------------------


class Scanner:
    """The loaded entry point (scan_layout.ENTRY_ARGS), kept with the engine that holds its code."""

    def __init__(self, function, keep: list) -> None:
        self.function = function
        self._keep = keep  # the engine and the stubs: the code lives as long as they do

    def __call__(self, *args) -> int:
        return int(self.function(*args))


class _Loaded:
    """This process's loaded scanner, by key, behind a lock (a server's sessions may read at once)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.scanners: dict[str, Scanner | None] = {}


_LOADED = _Loaded()


def load() -> Scanner | None:
    """The scanner's entry point, loaded from the built object code once per process; None when it cannot be."""
    try:
        key = _key()
    except (OSError, ImportError):
        return None
    with _LOADED.lock:
        if key not in _LOADED.scanners:
            code, description = _files()
            _LOADED.scanners[key] = loaded = _load(code, description)
            if loaded is None:  # not what the build wrote (it checked its own): built again for the next reads
                with contextlib.suppress(OSError):
                    description.unlink()
        return _LOADED.scanners[key]


def _never_called() -> None:
    os.abort()  # a runtime symbol the scanner's code names but cannot reach (see _load): a bug, loudly


_STUB = ctypes.CFUNCTYPE(None)(_never_called)


def _load(code: Path, description: Path) -> Scanner | None:
    import llvmlite.binding as llvm

    try:
        about = json.loads(description.read_text())
        machine_code = code.read_bytes()
        if hashlib.sha256(machine_code).hexdigest() != about["sha256"]:
            return None  # not the code the build wrote: never handed to the loader
        engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), _target_machine())
        process = ctypes.CDLL(None)
        for name in about["needs"]:
            # CPython's own functions and exception objects (the entry's wrapper names them for errors it never
            # raises); Numba's runtime (NRT_*) is named by reference-count code that never runs on these arrays,
            # which have no owner to count: a stub that aborts
            if llvm.address_of_symbol(name):
                continue  # known already (Numba, loaded in this process, registers its runtime)
            found = getattr(process, name, None)
            address = ctypes.cast(found, ctypes.c_void_p).value if found is not None else None
            llvm.add_symbol(name, address or ctypes.cast(_STUB, ctypes.c_void_p).value)
        engine.add_object_file(llvm.ObjectFileRef.from_data(machine_code))
        engine.finalize_object()
        address = engine.get_function_address(about["symbol"])
    except (OSError, ValueError, KeyError, RuntimeError):
        return None
    if not address:
        return None
    return Scanner(_ENTRY_TYPE(address), [engine])
