"""Regression gates for CI: `itl_p50_ms<=1.05x`, `kernels_per_decode_step<=+10`, `gpu_busy_pct>=-2`, `ttft_ms<50`.

A gate bounds one compared metric of trace B against baseline A. The bound's form says what is bounded:
- `Nx` (e.g. `1.05x`): the ratio B / A;
- `+N` / `-N` (an explicit sign): the delta B - A in the metric's own unit (points for a `_pct` metric);
- a bare number `N`: B itself, an absolute bound.
A metric the bound needs that is unknown (null) in A or B fails the gate with a line saying so, as does a
ratio whose baseline is 0: a CI gate that cannot be checked must not pass silently.

Metric names, units and values come from the registry (analysis.metrics), so every metric there can be
gated, not only the ones the Compare table shows. Pure Python: the CLI, a notebook or a CI script gate alike.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .metrics import BY_KEY, Metric

OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
}
_GATE = re.compile(
    r"^\s*(?P<key>[A-Za-z_][A-Za-z0-9_]*)\s*(?P<op><=|>=|<|>)\s*"
    r"(?P<sign>[+-])?(?P<number>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*(?P<x>[xX])?\s*$"
)
GATE_SYNTAX = "METRIC OP BOUND with OP one of <= >= < > and BOUND Nx (ratio B/A), +N or -N (delta B-A) or N (B)"


class GateError(ValueError):
    """A gate expression that cannot be parsed or names an unknown metric (the CLI's exit status 2)."""


@dataclass(frozen=True)
class Gate:
    expr: str  # as the user wrote it, stripped
    key: str
    op: str
    mode: str  # "ratio" | "delta" | "absolute"
    bound: float

    @property
    def what(self) -> str:
        return {"ratio": "B/A", "delta": "B-A", "absolute": "B"}[self.mode]


@dataclass(frozen=True)
class GateResult:
    gate: Gate
    ok: bool
    detail: str  # one line: the measured value against the bound, or why it could not be checked

    @property
    def expr(self) -> str:
        return self.gate.expr

    def line(self) -> str:
        return f"{'ok' if self.ok else 'FAIL'} {self.gate.expr}: {self.detail}"


def parse_gate(expr: str, known_keys: Iterable[str] = BY_KEY) -> Gate:
    """One expression -> Gate. Raises GateError naming what is wrong (and the known metrics for a typo)."""
    match = _GATE.match(expr or "")
    if not match:
        raise GateError(f"bad gate {expr!r}: expected {GATE_SYNTAX}, e.g. itl_p50_ms<=1.05x")
    key = match["key"]
    known = list(known_keys)
    if key not in known:
        raise GateError(f"bad gate {expr!r}: unknown metric {key!r}; known metrics: {', '.join(known)}")
    number = float(match["number"])
    if match["x"]:
        if match["sign"]:
            raise GateError(f"bad gate {expr!r}: a ratio bound has no sign (write 1.05x, not +1.05x)")
        mode = "ratio"
    else:
        mode = "delta" if match["sign"] else "absolute"
    bound = -number if match["sign"] == "-" else number
    if not math.isfinite(bound):
        raise GateError(f"bad gate {expr!r}: the bound is not a finite number")
    return Gate(expr.strip(), key, match["op"], mode, bound)


def parse_gates(exprs: Iterable[str], known_keys: Iterable[str] = BY_KEY) -> list[Gate]:
    known = list(known_keys)
    return [parse_gate(expr, known) for expr in exprs]


def _number(value: float) -> str:
    return f"{value:.4g}" if abs(value) < 1e6 else f"{value:,.0f}"


def evaluate_gate(gate: Gate, summary_a: object, summary_b: object) -> GateResult:
    """Check one gate on two summaries (analysis Summary objects or the JSON contract's summary mappings)."""
    m: Metric | None = BY_KEY.get(gate.key)
    if m is None:
        return GateResult(gate, False, f"{gate.key} is not a known metric")
    a, b = m.value(summary_a), m.value(summary_b)
    needs_a = gate.mode != "absolute"
    missing = [side for side, value, needed in (("A", a, needs_a), ("B", b, True)) if needed and math.isnan(value)]
    if missing:
        sides = " and ".join(missing)
        return GateResult(gate, False, f"{gate.key} is null in {sides}: no value to check, so it fails")
    if gate.mode == "ratio":
        if a == 0:
            return GateResult(gate, False, f"{gate.key} is 0 in A: the ratio B/A is undefined")
        measured = b / a
    elif gate.mode == "delta":
        measured = b - a
    else:
        measured = b
    ok = OPERATORS[gate.op](measured, gate.bound)
    shown = f"{measured:.3f}x" if gate.mode == "ratio" else f"{measured:+.4g}" if gate.mode == "delta" else _number(b)
    unit_text = f" {m.unit}" if m.unit else ""
    delta_unit = " pt" if m.unit == "%" else unit_text
    shown_unit = {"ratio": "", "delta": delta_unit, "absolute": unit_text}[gate.mode]
    bound = {"ratio": f"{gate.bound:g}x", "delta": f"{gate.bound:+g}", "absolute": f"{gate.bound:g}"}[gate.mode]
    a_text = f"{_number(a)}{unit_text}" if not math.isnan(a) else "null"
    detail = f"{gate.what} = {shown}{shown_unit} (A {a_text}, B {_number(b)}{unit_text}); bound {gate.op} {bound}"
    return GateResult(gate, bool(ok), detail)


def evaluate_gates(gates: Iterable[Gate], summary_a: object, summary_b: object) -> list[GateResult]:
    return [evaluate_gate(gate, summary_a, summary_b) for gate in gates]


def gate_help() -> str:
    """The metrics a gate may name, with units, for --help."""
    return ", ".join(f"{m.key} ({m.unit or 'count'})" for m in BY_KEY.values())
