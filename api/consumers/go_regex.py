"""Go regular expressions as cluster-autoscaler compiles them, checked with RE2.

Details: docs/consumers.md, "Notes from the code", `api/consumers/go_regex.py`."""

from __future__ import annotations

from typing import Any, Final

import re2  # type: ignore[import-untyped]

from pipelines.errors import PublishError

# Go's regexp.QuoteMeta escapes exactly these; Go rejects escapes of letters and digits
# that Python's re.escape may emit for other characters, so the set is Go's, not Python's.
_GO_META: Final = frozenset("\\.+*?()|[]{}^$")
# Look-arounds and back-references (and \C, which C++ RE2 accepts but Go does not).
_LOOKAROUNDS: Final = ("(?=", "(?!", "(?<=", "(?<!")
_BAD_ESCAPES: Final = frozenset("123456789kgC")


def quote_meta(text: str) -> str:
    """Escape ``text`` so Go's RE2 matches it literally (Go's ``regexp.QuoteMeta``)."""
    return "".join("\\" + ch if ch in _GO_META else ch for ch in text)


def unsupported_constructs(pattern: str) -> list[str]:
    """Return the look-arounds and back-references in ``pattern`` (RE2 has neither).

    Escaped characters and bracket expressions are skipped, so a literal ``\\(?=`` or
    ``[(?=]`` is not reported.
    """
    found: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            escaped = pattern[i + 1 : i + 2]
            if escaped and escaped in _BAD_ESCAPES:
                found.append("\\" + escaped)
            i += 2
        elif ch == "[":
            i = _class_end(pattern, i)
        else:
            if ch == "(":
                found.extend(op for op in _LOOKAROUNDS if pattern.startswith(op, i))
            i += 1
    return found


def _class_end(pattern: str, start: int) -> int:
    """Return the index just past the bracket expression opening at ``start``."""
    i = start + 1
    i += 1 if pattern.startswith("^", i) else 0
    # A ']' first in the class is a member, not its end.
    i += 1 if pattern.startswith("]", i) else 0
    while i < len(pattern):
        if pattern[i] == "\\":
            i += 2
        elif pattern.startswith("[:", i) and ":]" in pattern[i + 2 :]:
            i = pattern.index(":]", i + 2) + 2
        elif pattern[i] == "]":
            return i + 1
        else:
            i += 1
    return i


def re2_options() -> Any:
    """RE2 options: quiet (the exception says it all)."""
    options = re2.Options()
    # The C++ library would also log each failure to stderr; the exception says it all.
    options.log_errors = False
    return options


def compile_re2(pattern: str) -> Any:
    """Compile ``pattern`` with RE2, the engine cluster-autoscaler uses (through Go).

    Raises:
        PublishError: the pattern has a look-around or back-reference, or RE2 rejects it.
    """
    bad = unsupported_constructs(pattern)
    if bad:
        raise PublishError(
            f"regex {pattern!r} uses {', '.join(bad)}: RE2 has no look-arounds or "
            "back-references; match the node group id literally instead"
        )
    try:
        return re2.compile(pattern, re2_options())
    except re2.error as exc:
        detail = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        raise PublishError(f"regex {pattern!r} does not compile with RE2: {detail}") from exc
