"""Regexes a user gives (--step-regex, the app's step-regex setting, categories TOML rules), compiled for RE2.

Why RE2: Python's `re` backtracks, so a pattern like `^(a+)+$` takes exponential time on a 35-character name
that almost matches, and the app runs the step regex on the server thread. RE2 (google-re2) matches in time
linear in the name's length, whatever the pattern. It refuses the constructs that need backtracking
(backreferences such as `\\1` or `(?P=name)`, lookahead and lookbehind); those get one clear line. The syntax
is otherwise Python's for what Stepscope's users write (`(?P<kind>...)`, `(?i)`, classes, anchors); `\\d`, `\\w`
and `\\b` are ASCII-only, and `$` matches only at the very end.

The built-in rules (analysis/categories.py, the annotation families) stay on Python's `re`: they are
Stepscope's own, checked against 100k-character names, and some need its features.

A UserPattern looks like a compiled `re.Pattern` to its callers: `.pattern` (the text) and `.flags` (always 0:
flags live inline, as `(?i)`), which is what a cache key is made of, and `search` / `match` / `fullmatch`
returning match objects with `group`, `groupdict`, `start`, `end` and `span`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import re2

MAX_PATTERN_CHARS = 2000  # longer than any real rule; RE2's own memory bound (8 MB of program) holds anyway
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # the reason comes back in the exception, worded once by us; not a C++ log line
# what RE2 refuses, found in the pattern's text (RE2's message stops at "(?P" for a named backreference)
_BACKREFERENCE = re.compile(r"(?<!\\)(?:\\\\)*\\(?:[1-9]|g<)|\(\?P=")
_LOOKAROUND = re.compile(r"\(\?<?[=!]")


class UserPatternError(ValueError):
    """A user pattern that cannot be used; the message is one line."""


@dataclass(frozen=True)
class UserPattern:
    pattern: str
    flags: int = 0
    _compiled: Any = field(default=None, repr=False, compare=False, hash=False)

    @property
    def groupindex(self) -> dict[str, int]:
        return dict(self._compiled.groupindex)

    def search(self, text: str):
        return self._call(self._compiled.search, text)

    def match(self, text: str):
        return self._call(self._compiled.match, text)

    def fullmatch(self, text: str):
        return self._call(self._compiled.fullmatch, text)

    @staticmethod
    def _call(method, text: str):
        try:
            return method(text)
        except UnicodeEncodeError:  # RE2 takes UTF-8: a lone surrogate (from invalid UTF-8 in a name) is "?",
            return method(text.encode("utf-8", "replace").decode("utf-8"))  # one for one: positions unchanged


def compile_user_pattern(pattern: str, what: str = "regex") -> UserPattern:
    """The pattern compiled for RE2; UserPatternError (a ValueError) with one line naming `what` otherwise."""
    shown = _shown(pattern)
    if not isinstance(pattern, str):
        raise UserPatternError(f"{what} must be a string, not {type(pattern).__name__}")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise UserPatternError(f"{what} {shown} is longer than {MAX_PATTERN_CHARS} characters")
    try:
        compiled = re2.compile(pattern, options=_OPTIONS)
    except UnicodeEncodeError:
        raise UserPatternError(f"{what} {shown} is not valid UTF-8") from None
    except re2.error as exc:
        raise UserPatternError(f"{what} {shown} cannot be used: {_reason(exc, pattern)}") from None
    return UserPattern(pattern, 0, compiled)


def _reason(exc: Exception, pattern: str) -> str:
    raw = exc.args[0] if exc.args else ""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    text = " ".join(text.split())[:120]
    if _BACKREFERENCE.search(pattern):
        return f"backreferences are not supported ({text}); user patterns are matched in linear time by RE2"
    if _LOOKAROUND.search(pattern):
        return f"lookahead and lookbehind are not supported ({text}); user patterns are matched in linear time by RE2"
    return f"{text} (RE2 syntax)"


def _shown(pattern: object) -> str:
    text = repr(pattern)
    return text if len(text) <= 80 else text[:77] + "..."
