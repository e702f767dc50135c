"""Profile a live vLLM server over HTTP: `/start_profile`, a workload (or the traffic it already has), `/stop_profile`,
and the trace files this capture wrote.

    info = probe("http://127.0.0.1:8000")                       # the model and max_model_len, from /v1/models
    capture = profile_server(info, Path("/srv/traces"), Workload(requests=6), progress=print)
    capture.files                                               # the new, complete trace files: open them as one run

Why here and not in the page or the CLI: both drive it (the Run page through a child process, `CaptureChild`, so
the app server never waits on a server's profiler). `/stop_profile` is sent whenever `/start_profile` succeeded,
whatever happens in between (a failed request, a timeout, Ctrl-C, the page's Stop: SIGINT to the child). Every
failure is a CollectorError of one line naming the cause and the fix. Standard library only: no HTTP client to add.
"""

from __future__ import annotations

import contextlib
import http.client
import itertools
import json
import os
import random
import signal
import statistics
import subprocess
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from .errors import CollectorError

PROFILER_FLAG = """--profiler-config '{"profiler":"torch","torch_profiler_dir":"/abs/dir"}'"""
TRACE_SUFFIXES = (".pt.trace.json.gz", ".pt.trace.json")
SPREAD_GAP_S = 0.25  # --arrival spread: one request every quarter second, so each arrives alone
# Prompts go as token ids (exactly so many tokens, no tokenizer in between): ids 8..507, which every vocabulary of
# 512 or more words holds and which no tokenizer reserves for its special tokens (0-7 in most)
FIRST_ID, ID_SPAN = 8, 500
Progress = Callable[[str], None]


@dataclass(frozen=True)
class Workload:
    """What the capture sends: `requests` streamed completions of sizes drawn from the ranges with `seed`, all at
    once (burst) or SPREAD_GAP_S apart (spread); or, with `duration_s`, nothing for that long (the server's own
    traffic is profiled)."""

    requests: int = 0
    prompt_tokens: tuple[int, int] = (16, 256)
    output_tokens: tuple[int, int] = (8, 32)
    arrival: str = "burst"
    seed: int = 0
    duration_s: float | None = None


@dataclass(frozen=True)
class PlannedRequest:
    at_s: float  # after the profiler started
    prompt_ids: tuple[int, ...]
    max_tokens: int


@dataclass(frozen=True)
class ServerInfo:
    url: str
    model: str
    max_model_len: int
    version: str | None


@dataclass
class ClientResult:
    """One request as the sender saw it (ms); `error` set when it failed (counted, not fatal)."""

    prompt_tokens: int
    max_tokens: int
    sent_s: float = 0.0  # after the profiler started
    ttft_ms: float | None = None
    itl_ms: dict | None = None  # {"p50", "p90"} between streamed chunks
    e2e_ms: float | None = None
    output_tokens: int | None = None  # the API's usage
    error: str | None = None


@dataclass
class Capture:
    info: ServerInfo
    workload: Workload
    files: list[Path]
    clients: list[ClientResult] = field(default_factory=list)
    started_wall_s: float = 0.0
    profiled_s: float = 0.0  # /start_profile answered .. /stop_profile sent
    stop_s: float = 0.0  # how long /stop_profile took (the server writing its traces)

    def record(self) -> dict:
        """capture.json: server, version, model, workload, times and the client's figures."""
        return {
            "server": {"url": self.info.url, "model": self.info.model, "max_model_len": self.info.max_model_len},
            "version": self.info.version,
            "workload": asdict(self.workload),
            "started_wall_s": self.started_wall_s,
            "profiled_s": round(self.profiled_s, 3),
            "stop_s": round(self.stop_s, 3),
            "files": [p.name for p in self.files],
            "requests_sent": len(self.clients),
            "requests_failed": sum(c.error is not None for c in self.clients),
            "clients": [asdict(c) for c in self.clients],
        }


def parse_range(text: str, flag: str) -> tuple[int, int]:
    """ "A:B" (or "A") as (A, B) with 1 <= A <= B; CollectorError with one line otherwise."""
    parts = str(text).split(":")
    try:
        lo, hi = (int(parts[0]), int(parts[-1])) if len(parts) <= 2 else (0, -1)
    except ValueError:
        lo, hi = 0, -1
    if not 1 <= lo <= hi:
        raise CollectorError(f"{flag} {text!r}: give A:B, two whole numbers with 1 <= A <= B (16:256)")
    return lo, hi


def plan_requests(workload: Workload, max_model_len: int) -> list[PlannedRequest]:
    """The requests to send, the same for the same seed: sizes drawn in the ranges, each clipped so that prompt and
    output fit the server's max_model_len (the output first keeps at most half of it)."""
    rng = random.Random(workload.seed)
    plan = []
    for i in range(workload.requests):
        prompt = rng.randint(*workload.prompt_tokens)
        new = rng.randint(*workload.output_tokens)
        new = max(1, min(new, max_model_len // 2))
        prompt = max(1, min(prompt, max_model_len - new))
        at_s = 0.0 if workload.arrival == "burst" else i * SPREAD_GAP_S
        ids = tuple(FIRST_ID + (97 * i + k) % ID_SPAN for k in range(prompt))  # no two prompts share a prefix
        plan.append(PlannedRequest(at_s, ids, new))
    return plan


# --- HTTP --------------------------------------------------------------------------------------------------------


def _split_url(url: str) -> tuple[str, str, int]:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CollectorError(f"{url!r} is not an http(s) URL of a server (http://127.0.0.1:8000)")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise CollectorError(f"{url!r}: the port is not a number") from None
    return parts.scheme, parts.hostname, port


def _connection(url: str, timeout_s: float) -> http.client.HTTPConnection:
    scheme, host, port = _split_url(url)
    kind = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
    return kind(host, port, timeout=timeout_s)


def _request(url: str, method: str, path: str, body: dict | None = None, timeout_s: float = 30.0) -> tuple[int, bytes]:
    """(status, body); CollectorError "cannot reach" when nothing answers, "timed out" when the answer is late."""
    conn = _connection(url, timeout_s)
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
        response = conn.getresponse()
        return response.status, response.read()
    except TimeoutError:
        raise CollectorError(f"{url}{path} did not answer within {timeout_s:.0f} s") from None
    except (OSError, http.client.HTTPException) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise CollectorError(
            f"cannot reach {url} ({reason}): is the server running, at that address and port?"
        ) from None
    finally:
        conn.close()


def probe(url: str, timeout_s: float = 30.0) -> ServerInfo:
    """The served model and its max_model_len from /v1/models, refusing a server that is not vLLM (vLLM says
    `owned_by: vllm` and gives `max_model_len`; SGLang and others do not)."""
    url = url.rstrip("/")
    status, body = _request(url, "GET", "/v1/models", timeout_s=timeout_s)
    try:
        entry = json.loads(body)["data"][0] if status == 200 else None
    except (ValueError, KeyError, IndexError, TypeError):
        entry = None
    if (
        not isinstance(entry, dict)
        or entry.get("owned_by") != "vllm"
        or not isinstance(entry.get("max_model_len"), int)
    ):
        raise CollectorError(
            f"{url} is not a vLLM server (its /v1/models answered {status} without a vLLM model): profile-server "
            "drives vLLM's /start_profile only (SGLang's differs: see README)"
        )
    version = None
    with contextlib.suppress(CollectorError, ValueError, AttributeError):
        status, body = _request(url, "GET", "/version", timeout_s=timeout_s)
        version = json.loads(body).get("version") if status == 200 else None
    return ServerInfo(url, str(entry.get("id")), int(entry["max_model_len"]), version)


def start_profile(url: str, timeout_s: float = 120.0) -> None:
    status, body = _request(url, "POST", "/start_profile", timeout_s=timeout_s)
    if status == 404:
        raise CollectorError(
            f"{url} has no profiler (/start_profile answered 404): start vLLM with {PROFILER_FLAG}, the folder "
            "being the one given as --trace-dir"
        )
    if status != 200:
        raise CollectorError(f"/start_profile answered {status}: {body[:200].decode(errors='replace')}")


def stop_profile(url: str, timeout_s: float) -> None:
    """vLLM answers once every process has written its trace (up to a minute is normal)."""
    try:
        status, body = _request(url, "POST", "/stop_profile", timeout_s=timeout_s)
    except CollectorError as exc:
        raise CollectorError(f"/stop_profile failed: {exc} (raise --stop-timeout if the server is slow)") from None
    if status != 200:
        raise CollectorError(f"/stop_profile answered {status}: {body[:200].decode(errors='replace')}")


def send_completion(info: ServerInfo, request: PlannedRequest, started: float, timeout_s: float) -> ClientResult:
    """One streamed /v1/completions of the planned token ids, greedy, exactly max_tokens long (ignore_eos), timed
    from the send to each chunk that carries text and to the end."""
    result = ClientResult(len(request.prompt_ids), request.max_tokens)
    body = {
        "model": info.model,
        "prompt": list(request.prompt_ids),
        "max_tokens": request.max_tokens,
        "min_tokens": request.max_tokens,
        "ignore_eos": True,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    chunks: list[float] = []
    conn = _connection(info.url, timeout_s)
    try:
        sent = time.monotonic()
        result.sent_s = sent - started
        conn.request(
            "POST", "/v1/completions", body=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        response = conn.getresponse()
        if response.status != 200:
            result.error = f"HTTP {response.status}: {response.read()[:200].decode(errors='replace')}"
            return result
        for raw in response:
            line = raw.strip()
            if not line.startswith(b"data:") or line[5:].strip() == b"[DONE]":
                continue
            chunk = json.loads(line[5:])
            if chunk.get("usage"):
                result.output_tokens = chunk["usage"].get("completion_tokens")
            if any(c.get("text") for c in chunk.get("choices") or ()):
                chunks.append(time.monotonic())
        result.e2e_ms = (time.monotonic() - sent) * 1e3
    except (OSError, http.client.HTTPException, ValueError) as exc:
        result.error = " ".join(str(exc).split())[:200] or type(exc).__name__
    finally:
        conn.close()
    if chunks:
        result.ttft_ms = (chunks[0] - sent) * 1e3
        gaps = [(b - a) * 1e3 for a, b in itertools.pairwise(chunks)]
        if gaps:
            deciles = statistics.quantiles(gaps, n=10, method="inclusive") if len(gaps) > 1 else [gaps[0]] * 9
            result.itl_ms = {"p50": statistics.median(gaps), "p90": deciles[8]}
    return result


# --- the capture -------------------------------------------------------------------------------------------------


def _snapshot(trace_dir: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_mtime_ns, p.stat().st_size) for p in trace_dir.iterdir() if p.is_file()}


def _complete_gzip(path: Path) -> bool:
    """A gzip stream read to its end (a file still being written stops short); a plain .json counts as complete."""
    if not path.name.endswith(".gz"):
        return True
    inflate = zlib.decompressobj(wbits=31)
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            inflate.decompress(block, 0)
            if inflate.eof:
                return True
    return inflate.eof


def find_capture(trace_dir: Path, before: dict[str, tuple[int, int]], wait_s: float) -> list[Path]:
    """The trace files that appeared (or changed) in trace_dir since `before`, once each is a complete gzip; waits
    up to wait_s for them to appear (a shared disk may show them late)."""
    deadline = time.monotonic() + wait_s
    while True:
        now = _snapshot(trace_dir)
        new = sorted(
            trace_dir / name
            for name, state in now.items()
            if name.endswith(TRACE_SUFFIXES) and before.get(name) != state
        )
        incomplete = [p for p in new if not _complete_gzip(p)]
        if new and not incomplete:
            break
        if time.monotonic() > deadline:
            if incomplete:
                raise CollectorError(
                    f"{incomplete[0].name} in {trace_dir} is still being written {wait_s:.0f} s after the stop "
                    "(raise --file-wait)"
                )
            raise CollectorError(
                f"no new trace file in {trace_dir} after /stop_profile: is it the server's torch_profiler_dir (its "
                "--profiler-config), on this machine or a shared disk?"
            )
        time.sleep(0.5)
    _check_one_capture(new)
    return new


def _check_one_capture(files: list[Path]) -> None:
    """One capture writes one file per worker rank (rank<N>.<id>...) and at most one per API server process: two of
    a rank mean two captures (another client's /start_profile) wrote into the folder meanwhile."""
    ranks: dict[str, str] = {}
    for path in files:
        if ".async_llm." in path.name:
            continue
        rank = path.name.split(".", 1)[0]
        if rank in ranks:
            raise CollectorError(
                f"two captures mixed in {path.parent}: {ranks[rank]} and {path.name} are both new; another client "
                "profiled the server meanwhile: capture again"
            )
        ranks[rank] = path.name


def profile_server(
    info: ServerInfo,
    trace_dir: Path,
    workload: Workload,
    *,
    stop_timeout_s: float = 300.0,
    request_timeout_s: float = 600.0,
    file_wait_s: float = 30.0,
    progress: Progress = lambda line: None,
) -> Capture:
    """Start the profiler, send the workload (or wait duration_s), stop it (always, once started) and find the files."""
    trace_dir = Path(trace_dir)
    if not trace_dir.is_dir():
        raise CollectorError(f"--trace-dir {trace_dir} is not a folder: give the server's torch_profiler_dir")
    plan = plan_requests(workload, info.max_model_len)
    before = _snapshot(trace_dir)
    capture = Capture(info, workload, [], started_wall_s=time.time())
    start_profile(info.url)
    started = time.monotonic()
    progress("profiler started")
    try:
        if plan:
            capture.clients = _send_all(info, plan, started, request_timeout_s, progress)
        else:
            _wait(workload.duration_s or 0.0, progress)
    finally:
        capture.profiled_s = time.monotonic() - started
        progress("waiting for the server to write its traces")
        stopping = time.monotonic()
        stop_profile(info.url, stop_timeout_s)
        capture.stop_s = time.monotonic() - stopping
    capture.files = find_capture(trace_dir, before, file_wait_s)
    return capture


def _send_all(
    info: ServerInfo, plan: list[PlannedRequest], started: float, timeout_s: float, progress: Progress
) -> list[ClientResult]:
    results: list[ClientResult | None] = [None] * len(plan)
    done = threading.Semaphore(0)

    def send(i: int, request: PlannedRequest) -> None:
        try:
            time.sleep(max(0.0, request.at_s - (time.monotonic() - started)))
            results[i] = send_completion(info, request, started, timeout_s)
        finally:
            done.release()

    for i, request in enumerate(plan):  # daemon: Ctrl-C does not wait for them (the profiler is stopped anyway)
        threading.Thread(target=send, args=(i, request), daemon=True).start()
    for k in range(1, len(plan) + 1):
        done.acquire()
        progress(f"requests {k} of {len(plan)} done")
    return [
        r or ClientResult(len(p.prompt_ids), p.max_tokens, error="not sent") for r, p in zip(results, plan, strict=True)
    ]


def _wait(seconds: float, progress: Progress) -> None:
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        time.sleep(min(left, 1.0))
        progress(f"profiling the server's traffic: {max(0.0, end - time.monotonic()):.0f} s left")


def keep_capture(capture: Capture, out: Path) -> list[Path]:
    """Copy the capture's files into `out` (a new or empty folder) with capture.json; returns the copies."""
    import shutil

    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CollectorError(f"--out {out} exists and is not an empty folder: name a new one")
    out.mkdir(parents=True, exist_ok=True)
    kept = []
    for path in capture.files:
        tmp = out / f".{path.name}.tmp"
        shutil.copyfile(path, tmp)
        kept.append(tmp.replace(out / path.name))
    tmp = out / ".capture.json.tmp"
    tmp.write_text(json.dumps(capture.record(), indent=1) + "\n")
    tmp.replace(out / "capture.json")
    return kept


# --- the page's child process ------------------------------------------------------------------------------------


class CaptureChild:
    """A capture run as a child process in a session of its own (the CLI: `profile-server ... --out DIR`), its
    output in a log file the page reads as it goes; `stop` sends SIGINT, so the child still sends /stop_profile."""

    def __init__(self, argv: list[str], log_path: Path, cwd: Path | None = None) -> None:
        self.log_path = Path(log_path)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:
            env = {**os.environ, "PYTHONUNBUFFERED": "1"}
            self.process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=cwd, env=env,
                start_new_session=True,
            )  # fmt: skip

    def lines(self) -> list[str]:
        try:
            return self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return []

    def returncode(self) -> int | None:
        return self.process.poll()

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGINT)

    def failure(self) -> str | None:
        """The child's one `error:` line once it failed, None while it runs or after it succeeded."""
        code = self.returncode()
        if code in (None, 0):
            return None
        errors = [line for line in self.lines() if line.startswith("error:")]
        return errors[-1].removeprefix("error:").strip() if errors else f"the capture exited with status {code}"
