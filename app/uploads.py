"""Uploads kept in session state so a trace survives switching pages.

The handler is a plain function (no widgets) so tests can drive it directly:
AppTest cannot drop a file on st.file_uploader.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass

from stepscope.analysis.front_door import TraceBytes
from stepscope.parsers import TraceError
from stepscope.parsers.limits import MiB, ReadLimits
from .analysis_settings import current_given, current_options
from .cache import LoadedTrace, load_bytes, load_folder, sha256_of_bytes

UPLOADS_KEY = "uploads"  # session state: {sha256: (file name, bytes)}
RUN_UPLOADS_KEY = "upload_runs"  # session state: {sha256 over the files: (label, ((file name, bytes), ...))}
RUN_PREFIX = "upload-run:"  # a source key of files uploaded together (one run: a serving folder's files)
ACCEPTED_TYPES = ["json", "gz", "pftrace", "perfetto-trace", "sqlite"]  # what parsers read; sniffed by content


@dataclass(frozen=True)
class UploadResult:
    key: str | None  # the trace source key when the upload parsed
    error: str | None  # the one-line reason when it did not


def size_limit_text() -> str:
    limits = ReadLimits.from_env()
    return (
        "Kineto JSON (.json/.json.gz), Perfetto (.pftrace) or Nsight Systems SQLite export (.sqlite), "
        f"up to {limits.max_file_bytes // MiB:,} MB per file "
        f"and {limits.max_decompressed_bytes // MiB:,} MB unzipped (STEPSCOPE_MAX_FILE_MB / "
        "STEPSCOPE_MAX_DECOMPRESSED_MB raise it)."
    )


def register_upload(state: MutableMapping, name: str, data: bytes) -> UploadResult:
    """Parse an upload once; remember it when it is a readable trace, else say why not."""
    sha = sha256_of_bytes(data)
    uploads = state.setdefault(UPLOADS_KEY, {})
    if sha not in uploads:
        try:
            load_bytes(name, data)
        except TraceError as exc:
            return UploadResult(None, f"{name[:200]}: {exc}")
        except MemoryError:
            return UploadResult(None, f"{name[:200]}: out of memory while reading the trace")
        except Exception as exc:  # any reader or analysis failure: one line, and the open trace stays open
            detail = " ".join(str(exc).split())[:200]
            return UploadResult(None, f"{name[:200]}: could not be read ({type(exc).__name__}: {detail})")
        uploads[sha] = (name, data)
    return UploadResult(f"upload:{sha}", None)


def upload_names(state: MutableMapping) -> dict[str, str]:
    return {sha: name for sha, (name, _) in state.get(UPLOADS_KEY, {}).items()}


def load_upload(state: MutableMapping, sha: str) -> LoadedTrace:
    name, data = state[UPLOADS_KEY][sha]
    return load_bytes(name, data, current_options(state), current_given(state))


def register_upload_run(state: MutableMapping, files: list[tuple[str, bytes]]) -> UploadResult:
    """Files uploaded together as one run (a serving engine's profile folder: its worker ranks and its API server's
    trace), read as `analyze DIR` reads the folder; remembered when they open, else why not (one line)."""
    files = sorted(files)
    sha = sha256_of_bytes(b"".join(f"{name}\0".encode("utf-8", "surrogateescape") + data for name, data in files))
    runs = state.setdefault(RUN_UPLOADS_KEY, {})
    label = f"{len(files)} files uploaded together ({', '.join(name[:60] for name, _ in files[:3])}"
    label += ", ...)" if len(files) > 3 else ")"
    if sha not in runs:
        try:
            load_folder([TraceBytes(name, data) for name, data in files], name=label)
        except TraceError as exc:
            return UploadResult(None, f"{label[:200]}: {exc}")
        except MemoryError:
            return UploadResult(None, f"{label[:200]}: out of memory while reading the traces")
        except Exception as exc:  # any reader or analysis failure: one line, and the open trace stays open
            detail = " ".join(str(exc).split())[:200]
            return UploadResult(None, f"{label[:200]}: could not be read ({type(exc).__name__}: {detail})")
        runs[sha] = (label, tuple(files))
    return UploadResult(RUN_PREFIX + sha, None)


def upload_run_names(state: MutableMapping) -> dict[str, str]:
    return {sha: label for sha, (label, _) in state.get(RUN_UPLOADS_KEY, {}).items()}


def load_upload_run(state: MutableMapping, sha: str) -> LoadedTrace:
    label, files = state[RUN_UPLOADS_KEY][sha]
    members = [TraceBytes(name, data) for name, data in files]
    return load_folder(members, current_options(state), current_given(state), label)
