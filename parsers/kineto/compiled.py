"""The compiled event scanner (parsers/kineto/scan.py): compiled by Numba and kept in Numba's own cache.

Why only for big files, and only in the other decoding process: loading the scanner means importing Numba and
loading its cache (measured here: 0.6-1.0 s a process, README "Speed and memory"), which a scan at about half
msgspec's cost per event repays only on files of a few hundred MB (SCAN_MIN_BYTES). So this process never imports
Numba: the other decoding process (parsers/kineto/two_processes.py) is then a fresh interpreter given Numba's cache
folder in its environment (NUMBA_CACHE_DIR, the setting Numba documents), loads the scanner (`load`) and scans its
pieces, while this one decodes with msgspec; the shared queue balances the two.

Where Numba's cache lives: `folder()`, the user's cache folder ($XDG_CACHE_HOME, else ~/.cache) / stepscope/numba,
never the package, and not under STEPSCOPE_CACHE_DIR (a "cold" read empties that; the compiled code belongs to the
machine, not to the traces). The first big read on a machine compiles the scanner in the foreground, saying so on
stderr (a minute or so of one core): a process of its own runs `@njit(cache=True)`'s compile and writes
`ready.json` (the source's key and the cache's files); later reads check that file and load from the cache. A
damaged cache costs one read's scanner, never the read: a failed load clears the folder and that read's pieces are
msgspec's; the next read compiles again. `stepscope scanner` clears and compiles now. STEPSCOPE_JSON_SCANNER=off:
msgspec only.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

from ...contracts import settings

SETTING = "STEPSCOPE_JSON_SCANNER"
MODES = ("auto", "off", "wait")  # wait: the same as auto (the compile is always in the foreground)
SCAN_MIN_BYTES = 256 << 20  # files below this are msgspec's alone (see the module)
_SOURCES = [Path(__file__).resolve().with_name(name) for name in ("scan.py", "fields.py")]
_READY = "ready.json"
_FAILED = "failed.txt"


def mode() -> str:
    value = (settings.raw(SETTING) or "auto").lower()
    return value if value in MODES else "auto"


def installed() -> bool:
    return importlib.util.find_spec("numba") is not None


def folder() -> Path:
    """Numba's cache folder for the scanner (see the module)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "stepscope" / "numba"


def child_environment() -> dict[str, str]:
    """What a process that loads or compiles the scanner gets in its environment."""
    return {"NUMBA_CACHE_DIR": str(folder())}


def _key() -> str:
    """What the cached code depends on: the sources (their bytes, and the stamp Numba checks: mtime and size),
    Numba and Python."""
    parts = [path.read_bytes() for path in _SOURCES]
    stamp = _SOURCES[0].stat()
    parts += [f"{stamp.st_mtime}:{stamp.st_size}".encode(), importlib.metadata.version("numba").encode()]
    parts.append(sys.version.encode())
    return hashlib.sha256(b"\0".join(parts)).hexdigest()[:24]


def ready() -> bool:
    """Whether Numba's cache holds this scanner: ready.json of this key, its files all there at their sizes."""
    try:
        about = json.loads((folder() / _READY).read_text())
        files = about["files"] if isinstance(about, dict) and about.get("key") == _key() else None
        if not isinstance(files, dict) or not files:
            return False
        return all(isinstance(size, int) and (folder() / name).stat().st_size == size for name, size in files.items())
    except (OSError, ValueError, TypeError, KeyError, importlib.metadata.PackageNotFoundError):
        return False


def wanted(size: int, progress=None) -> bool:
    """Whether the other process of a read of `size` bytes should scan: the setting allows it, the file is big
    enough, Numba is here and the scanner is in its cache, compiled now (in the foreground, said on stderr) the
    first time. A compile that failed is not tried again by reads (`stepscope scanner` does)."""
    if mode() == "off" or size < SCAN_MIN_BYTES or not installed():
        return False
    if ready():
        return True
    if (folder() / _FAILED).exists():
        return False
    print(
        f"stepscope: compiling the JSON scanner for this machine, once (Numba; about a minute), into {folder()}",
        file=sys.stderr,
        flush=True,
    )
    if progress is not None:
        progress(0.0)
    try:
        compile_now()
    except RuntimeError as exc:
        with contextlib.suppress(OSError):
            (folder() / _FAILED).write_text(f"{exc}\n")
        print(f"stepscope: the JSON scanner could not be compiled ({exc}): msgspec reads", file=sys.stderr)
        return False
    return True


def clear() -> None:
    """Remove Numba's cache folder for the scanner (a damaged cache, or a compile asked for)."""
    shutil.rmtree(folder(), ignore_errors=True)


def compile_now() -> float:
    """Clear the folder and compile the scanner into it, in a process of its own that ends with the compile; the
    seconds it took. Raises RuntimeError with the reason when it fails."""
    clear()
    folder().mkdir(parents=True, exist_ok=True)
    root = Path(sys.modules[__name__.split(".")[0]].__file__ or "").resolve().parents[1]  # the folder holding it
    code = f"import sys; sys.path.insert(0, {str(root)!r}); from {__name__} import build; build()"
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-P", "-c", code],
        env={**os.environ, **child_environment()},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0 or not ready():
        lines = (done.stderr or "").strip().splitlines()
        raise RuntimeError(lines[-1][:200] if lines else f"exit status {done.returncode}")
    return time.perf_counter() - start


def build() -> None:
    """Run in the process compile_now starts: compile every entry point of the scanner (Numba writes its cache),
    then write ready.json with the files Numba wrote."""
    from . import scanned

    scanner = _import_scan()
    scanned.warm_up(scanner)
    files = {
        str(path.relative_to(folder())): path.stat().st_size
        for path in folder().rglob("*")
        if path.suffix in (".nbi", ".nbc")
    }
    about = json.dumps({"key": _key(), "files": files, "built": time.strftime("%Y-%m-%d %H:%M")})
    temporary = folder() / f".{_READY}.{os.getpid()}"
    temporary.write_text(about)
    os.replace(temporary, folder() / _READY)  # whole or not at all


def load() -> ModuleType | None:
    """The scanner loaded from Numba's cache in this process (the other decoding process, whose environment names
    the folder), or None: on any failure the folder is cleared (the next read compiles it again)."""
    try:
        from . import scanned

        scanner = _import_scan()
        scanned.warm_up(scanner)  # every entry point loaded (from the cache) and run once
        return scanner
    except Exception:  # a damaged cache: whatever Numba or its unpickling raises
        clear()
        return None


def _import_scan() -> ModuleType:
    if os.environ.get("NUMBA_CACHE_DIR") != str(folder()):
        raise RuntimeError("Numba's cache folder is not the scanner's")  # never a cache beside the package
    from . import scan

    return scan
