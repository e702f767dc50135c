"""The analysis options every trace-reading command takes, and turning them into the front door's inputs.

Argument handling only: the commands open traces through analysis/front_door.py, which reads, analyses, applies
the model and builds the contract. Standard library at import (argparse): the warm `analyze` path defines its
arguments with these same functions before numpy or pandas is loaded.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stepscope.analysis.front_door import CachePolicy
    from stepscope.analysis.options import AnalysisOptions


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
    parser.add_argument(
        "--gpu",
        default=None,
        metavar="NAME",
        help="the GPU the trace ran on, for the roofline when the trace does not name it (a GPU table row: H100, "
        "MI300X, ...; `roofline --help` lists them)",
    )
    parser.add_argument(
        "--batch",
        type=int,
        default=None,
        metavar="N",
        help="sequences per step, for a trace that does not say (no input shapes, no engine annotations): per-token "
        "figures then rest on it and say it was typed (without it they are null)",
    )
    parser.add_argument("--no-cache", action="store_true", help="do not use the cache (STEPSCOPE_CACHE_DIR)")


def analysis_options(args: argparse.Namespace) -> AnalysisOptions:
    """The options object of a command's flags. ValueError (one line) for a bad value or categories file."""
    from stepscope.analysis.options import AnalysisOptions

    rules = ()
    if args.categories:
        from stepscope.analysis.categories import load_rules

        rules = load_rules(args.categories)
    return AnalysisOptions.from_us(
        args.gap_threshold_us, step_regex=args.step_regex, category_rules=rules, batch=getattr(args, "batch", None)
    )


def cache_policy(args: argparse.Namespace) -> CachePolicy:
    from stepscope.analysis.front_door import NO_CACHE, USE_CACHE

    return NO_CACHE if args.no_cache else USE_CACHE


def given_args(args: argparse.Namespace) -> dict:
    """The front door's keyword arguments for what the user says of the trace: model, device, cache policy."""
    return {"model": args.model, "device": args.gpu, "cache": cache_policy(args)}
