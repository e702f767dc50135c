"""The Run page's "Live server" tab: profile a running vLLM server as `profile-server` does, then open the capture.

The capture runs as a child process (the CLI itself, collectors.live_server.CaptureChild, in a session of its own):
the app server never waits on a server's profiler, Stop sends it SIGINT (it still sends /stop_profile), and a closed
tab leaves it to finish on its own. Its `progress:` lines are shown as it goes; a failure is its one `error:` line.
The capture opens in Analyze, as files uploaded together do; a second capture of the same server opens in Compare
against the one before.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import streamlit as st

from stepscope.collectors.live_server import PROFILER_FLAG, CaptureChild
from stepscope.exporters.safe_text import for_markdown
from .navigation import ANALYZE_KEY, COMPARE_KEYS, go_to
from .trace_sources import runs_dir
from .uploads import register_upload_run

CHILD_KEY = "live_child"  # session state: (CaptureChild, out folder, url) of the capture running or just ended
LAST_KEY = "live_last"  # {url: source key} of the last capture of each server: the next one is compared with it
# `python -m stepscope` is the CLI both installed and in a checkout (stepscope/__main__.py), run from the folder
# holding the stepscope package: a checkout's root, or site-packages
PACKAGE_ROOT = Path(__file__).resolve().parents[1]
if not (PACKAGE_ROOT / "stepscope" / "__main__.py").is_file():  # installed: app/ lives inside stepscope/
    PACKAGE_ROOT = PACKAGE_ROOT.parent


def _form() -> list[str] | None:
    """The profile-server arguments of the form, once submitted."""
    with st.form("live_server"):
        left, right = st.columns(2)
        url = left.text_input("Server URL", "http://127.0.0.1:8000")
        trace_dir = left.text_input("Trace folder (the server's torch_profiler_dir)", placeholder="/srv/vllm-traces")
        workload = left.radio("Workload", ["N requests", "current traffic"], horizontal=True)
        duration = left.number_input("Current traffic for S seconds", 1, 3600, 10)
        requests = right.number_input("Requests", 1, 10000, 8)
        prompt = right.text_input("Prompt tokens A:B", "16:256")
        output = right.text_input("Output tokens A:B", "8:32")
        arrival = right.selectbox("Arrival", ["burst", "spread"])
        seed = right.number_input("Seed", 0, 2**31 - 1, 0)
        started = st.form_submit_button("Start", type="primary")
    if not started:
        return None
    args = [url.strip(), "--trace-dir", trace_dir.strip()]
    if workload == "current traffic":
        return [*args, "--duration", str(duration)]
    sizes = ["--prompt-tokens", prompt.strip(), "--output-tokens", output.strip()]
    return [*args, "--requests", str(requests), *sizes, "--arrival", arrival, "--seed", str(seed)]


def _start(args: list[str]) -> None:
    out = runs_dir() / f"{time.strftime('%Y%m%d-%H%M%S')}-live"
    argv = [sys.executable, "-m", "stepscope", "profile-server", *args, "--out", str(out)]
    child = CaptureChild(argv, out.with_name(out.name + ".log"), cwd=PACKAGE_ROOT)
    st.session_state[CHILD_KEY] = (child, out, args[0])


@st.fragment(run_every=1.0)
def _watch() -> None:
    held = st.session_state.get(CHILD_KEY)
    if held is None:
        return
    child, out, url = held
    progress = [line.removeprefix("progress: ") for line in child.lines() if line.startswith("progress: ")]
    code = child.returncode()
    if code is None:
        st.info(for_markdown(progress[-1] if progress else "starting"))
        if st.button("Stop", key="live_stop"):
            child.stop()
        return
    st.session_state.pop(CHILD_KEY, None)
    problem = child.failure()
    if problem is not None:
        st.error(f"Capture failed: {for_markdown(problem)}")
        if "404" in problem:
            st.code(PROFILER_FLAG, language="bash")
        return
    _open(out, url)


def _open(out: Path, url: str) -> None:
    files = [(p.name, p.read_bytes()) for p in sorted(out.iterdir()) if ".pt.trace.json" in p.name]
    result = register_upload_run(st.session_state, files)
    if result.key is None:
        st.error(f"The capture in {for_markdown(out)} could not be read: {for_markdown(result.error)}")
        return
    last = st.session_state.setdefault(LAST_KEY, {})
    before, last[url] = last.get(url), result.key
    if before is not None:
        st.session_state[COMPARE_KEYS] = (before, result.key)
        go_to("compare")
    st.session_state[ANALYZE_KEY] = result.key
    go_to("analyze")


def render() -> None:
    st.caption(
        "Profiles a running vLLM server: /start_profile, the workload, /stop_profile, then opens the files it wrote "
        f"(kept under {for_markdown(runs_dir())}). The server must run with the profiler on: "
        f"`{PROFILER_FLAG}`, its folder given here. Same as `stepscope profile-server URL --trace-dir DIR`."
    )
    if st.session_state.get(CHILD_KEY) is None:
        args = _form()
        if args is not None:
            _start(args)
    _watch()
