"""Where traces come from: shipped samples, past runs of the collectors, and uploads.

A source is named by a stable key ("sample:<folder>", "run:<folder>",
"upload:<sha256>") so session state can remember a choice across pages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from stepscope.contracts import settings
from stepscope.contracts.run_record import RunRecord, read_run_record

REPO = Path(__file__).resolve().parents[1]
TRACE_FILE = "trace.json.gz"


@dataclass(frozen=True)
class TraceSource:
    key: str
    label: str
    origin: str  # sample | run | upload
    path: Path | None = None  # None for uploads: their bytes live in session state
    run_info: RunRecord | None = field(default=None, compare=False, hash=False)  # the run.json beside the trace

    @property
    def mode(self) -> str:
        """The collectors' mode (eager, cuda-graph, compile) from run.json, else guessed from the name."""
        spec_mode = self.run_info.mode if self.run_info is not None else None
        if spec_mode:
            return spec_mode
        name = self.label.lower()
        for mode in ("cuda-graph", "compile", "eager"):
            if mode in name or mode.replace("-", "_") in name:
                return mode
        return ""


def samples_dir() -> Path:
    return settings.path("STEPSCOPE_SAMPLES_DIR", REPO / "sample_traces")


def runs_dir() -> Path:
    return settings.runs_dir(REPO / "runs")


def fleet_root() -> Path:
    """Where the Fleet page may open batch outputs (and write new ones): STEPSCOPE_FLEET_ROOT, else the runs
    folder. The page lists folders under it and never takes a typed path."""
    return settings.path("STEPSCOPE_FLEET_ROOT", runs_dir())


def _folder_sources(root: Path, origin: str, newest_first: bool) -> list[TraceSource]:
    if not root.is_dir():
        return []
    folders = sorted((p for p in root.iterdir() if not p.name.startswith(".")), reverse=newest_first)
    return [
        TraceSource(f"{origin}:{p.name}", p.name, origin, p / TRACE_FILE, read_run_record(p))
        for p in folders
        if (p / TRACE_FILE).is_file()
    ]


def sample_sources() -> list[TraceSource]:
    return _folder_sources(samples_dir(), "sample", newest_first=False)


def run_sources() -> list[TraceSource]:
    """Past runs, newest first (run folder names start with a timestamp)."""
    return _folder_sources(runs_dir(), "run", newest_first=True)


def upload_source(sha256: str, name: str) -> TraceSource:
    return TraceSource(f"upload:{sha256}", name, "upload")


def all_sources(uploads: dict[str, str] | None = None, upload_runs: dict[str, str] | None = None) -> list[TraceSource]:
    """Samples, then runs, then uploads ({sha256: file name}), then files uploaded together as one run ({sha256 over
    them: label}: app.uploads.RUN_PREFIX keys)."""
    uploaded = [upload_source(sha, name) for sha, name in (uploads or {}).items()]
    uploaded += [TraceSource(f"upload-run:{sha}", label, "upload") for sha, label in (upload_runs or {}).items()]
    return sample_sources() + run_sources() + uploaded


def default_source(sources: list[TraceSource]) -> TraceSource | None:
    """What Analyze opens with: a sample, an eager one when there is one, so a newcomer sees a full picture."""
    samples = [s for s in sources if s.origin == "sample"] or list(sources)
    eager = [s for s in samples if s.mode == "eager"]
    return (eager or samples or [None])[0]


def default_pair(sources: list[TraceSource]) -> tuple[TraceSource, TraceSource] | None:
    """Compare's default: eager vs cuda-graph, else eager vs compile, else the first two traces."""
    for origin in ("sample", "run", None):
        pool = [s for s in sources if origin is None or s.origin == origin]
        eager = [s for s in pool if s.mode == "eager"]
        for other_mode in ("cuda-graph", "compile"):
            others = [s for s in pool if s.mode == other_mode]
            if eager and others:
                return eager[0], others[0]
    return (sources[0], sources[1]) if len(sources) >= 2 else None
