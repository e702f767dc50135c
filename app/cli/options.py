"""What the analyze and export commands share: the analysis options and reading + analysing a trace.

`read_and_analyze` is the one place a command turns a trace path into an Analysis: steps, gaps,
findings, the anatomy (categories per step, layers) and, when a model is known (run.json beside the
trace, else --model), the roofline figures that need it."""

from __future__ import annotations

import argparse
import math
import sys

MAX_GAP_THRESHOLD_US = 1e9  # 1000 s: any longer "gap" threshold would hide everything


def add_analysis_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gap-threshold-us", type=float, default=1.0, help="shortest idle interval reported")
    parser.add_argument("--step-regex", default=None, help="regex naming your own step annotations")
    parser.add_argument(
        "--categories",
        default=None,
        metavar="FILE",
        help='TOML file of category = ["regex", ...] rules for kernel/op categories, tried before the built-in ones',
    )
    parser.add_argument(
        "--model",
        default=None,
        metavar="PRESET",
        help="model for the per-category roofline when no run.json is beside the trace: a preset name, "
        "a model folder, config.json or run.json",
    )


def read_and_analyze(args: argparse.Namespace, notes: list[str] | None = None) -> tuple:
    """(Timeline, Analysis) for args.trace with the command's options. Raises TraceError or ValueError.

    The trace is read through the on-disk Timeline cache (trace_cache; `--no-cache` bypasses it). Notes for
    stderr go to `notes` when given (the analyze command caches them with its result), else are printed."""
    from ...trace_cache.timelines import load_trace_cached

    check_analysis_options(args)
    rules = _rules(args)  # before reading: a bad --categories or --model fails fast
    model = _model(args)
    # Read before importing analysis (and pandas): a big trace's decoding starts without them, and they are
    # imported while the forked child decodes.
    timeline = load_trace_cached(args.trace, use_cache=not getattr(args, "no_cache", False), meanwhile=_import_analysis)
    from ...analysis import AnalysisOptions, analyze

    options = AnalysisOptions(
        gap_threshold_ns=int(args.gap_threshold_us * 1000), step_regex=args.step_regex, category_rules=rules
    )
    result = analyze(timeline, options)
    return timeline, with_model(args.trace, timeline, result, model, notes)


def check_analysis_options(args: argparse.Namespace) -> None:
    """Option values argparse lets through but the analysis cannot use (inf, NaN, negative, huge). Raises ValueError."""
    threshold = args.gap_threshold_us
    if not (math.isfinite(threshold) and 0 <= threshold <= MAX_GAP_THRESHOLD_US):
        raise ValueError(f"--gap-threshold-us must be a number of microseconds from 0 to 1e9, not {threshold}")
    if args.step_regex is not None and len(args.step_regex) > 500:
        raise ValueError("--step-regex is longer than 500 characters")


def _import_analysis() -> None:
    """What analyze() and the report load (pandas included), imported while a big trace is decoded."""
    import importlib

    for module in ("stepscope.analysis.anatomy", "stepscope.analysis.report"):
        importlib.import_module(module)


def _rules(args: argparse.Namespace) -> tuple:
    if not getattr(args, "categories", None):
        return ()
    from ...analysis.categories import load_rules

    return load_rules(args.categories)  # ValueError: one line


def _model(args: argparse.Namespace):
    if not getattr(args, "model", None):
        return None
    from ...analysis.roofline.model_source import model_shape

    return model_shape(args.model)


def with_model(trace_path: str, timeline, result, model=None, notes: list[str] | None = None):
    """Expected-vs-measured findings and the per-category roofline when a run.json beside the trace
    names the model (and the device is known); else the per-category roofline for `model` (--model).
    Notes for stderr are appended to `notes` when given, else printed."""
    from ...analysis.anatomy import with_category_roofline
    from ...analysis.roofline import roofline_for_trace, timeline_device, with_roofline

    def note(text: str) -> None:
        if notes is None:
            print(text, file=sys.stderr)
        else:
            notes.append(text)

    try:
        roofline = roofline_for_trace(trace_path, result, *timeline_device(timeline))
    except ValueError as exc:  # the run.json beside the trace is optional: never fail the analysis over it
        note(f"note: no roofline: {' '.join(str(exc).split())}")
        roofline = None
    if roofline is not None:
        result = with_roofline(result, roofline)
        if model is not None:
            note("note: run.json beside the trace names the model; --model is not used")
        return with_category_roofline(result, roofline.shape, roofline.hardware)
    return with_category_roofline(result, model) if model is not None else result
