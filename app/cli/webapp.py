"""`app [--logdir DIR] [--port N] [--headless]`: start the Streamlit app (as `streamlit run app/streamlit_app.py`).

Runs Streamlit's own command line in a child process with this interpreter, so the app gets a fresh
Streamlit runtime and Ctrl-C stops both. Runs made on the Run page go to --logdir (STEPSCOPE_RUNS_DIR), and
Analyze's log-directory picker lists and opens the traces under it from disk: the app reads it as
`streamlit run app/streamlit_app.py -- --logdir DIR` does (the script argument, and STEPSCOPE_LOGDIR).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .errors import EXIT_INTERRUPTED

APP_SCRIPT = Path(__file__).resolve().parents[1] / "streamlit_app.py"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    app = subparsers.add_parser(
        "app",
        help="start the web app (Analyze, Run, Compare) in the browser",
        description="Start Stepscope's Streamlit app. Ctrl-C stops it.",
    )
    app.add_argument(
        "--logdir",
        default="runs",
        metavar="DIR",
        help="where the Run page keeps its runs, where past runs are listed, and the folder whose "
        "traces Analyze lists and opens from disk (default: ./runs)",
    )
    app.add_argument("--port", type=int, default=None, help="port to serve on (Streamlit's default: 8501)")
    app.add_argument("--headless", action="store_true", help="do not open a browser")
    app.set_defaults(handler=run_app)
    return app


def logdir_path(args: argparse.Namespace) -> Path:
    return Path(args.logdir).expanduser().resolve()


def streamlit_command(args: argparse.Namespace) -> list[str]:
    command = [sys.executable, "-m", "streamlit", "run", str(APP_SCRIPT), "--browser.gatherUsageStats", "false"]
    command += ["--client.toolbarMode", "viewer"]  # no Deploy button (.streamlit/config.toml says why)
    # what .streamlit/config.toml sets, for an installed app run from any folder (the file is read from the cwd)
    command += ["--server.fileWatcherType", "none", "--runner.postScriptGC", "false"]
    if args.port is not None:
        command += ["--server.port", str(args.port)]
    if args.headless:
        command += ["--server.headless", "true"]
    return [*command, "--", "--logdir", str(logdir_path(args))]  # the script's own argument (app.logdir)


def run_app(args: argparse.Namespace) -> int:
    from ..logdir import LOGDIR_ENV

    logdir = str(logdir_path(args))
    env = dict(os.environ, STEPSCOPE_RUNS_DIR=logdir, **{LOGDIR_ENV: logdir})
    command = streamlit_command(args)
    if os.name == "posix":  # become the server: a signal sent to this process (kill, a supervisor) reaches it
        sys.stdout.flush()
        os.execve(command[0], command, env)
    try:
        import subprocess

        return subprocess.call(command, env=env)
    except KeyboardInterrupt:  # the child got the same Ctrl-C and stops on its own
        return EXIT_INTERRUPTED
