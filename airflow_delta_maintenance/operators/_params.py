"""One set of rules for templated parameter values, used by every operator and sensor.

A templated field arrives as whatever the DAG gave (a native ``int`` or ``bool``, or, rendered
from Jinja without ``render_template_as_native_obj``, a string such as ``"12"``, ``"False"`` or
``"None"``). The same value means the same thing for every parameter, and a value that means
nothing fails the task at once, naming the parameter: ``dry_run="ture"`` is not silently a dry
run, nor ``force="yes please"`` silently no force.
"""

from __future__ import annotations

import math
import re
from datetime import timedelta
from typing import Any

from ..version_compat import AirflowFailException

__all__ = ["UNSET", "as_bool", "as_int", "as_version", "as_seconds", "as_days", "is_template"]

# What a rendered "nothing" looks like: the parameter takes its default.
UNSET = (None, "", "None", "none", "null")
_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|seconds?|m|min|minutes?|h|hours?|d|days?)?\s*$", re.IGNORECASE)
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _unset(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip() in UNSET)


def _bad(name: str, expected: str, value: Any) -> AirflowFailException:
    return AirflowFailException(f"parameter {name} must be {expected}, got {value!r}")


def is_template(value: Any) -> bool:
    """An unrendered Jinja template (checked at render time, not at DAG parse time)."""
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def as_bool(value: Any, name: str, default: bool) -> bool:
    """``True``/``False``, or ``true/false``, ``1/0``, ``yes/no``, ``on/off`` in any case."""
    if _unset(value):
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    raise _bad(name, "true or false", value)


def as_int(value: Any, name: str, default: int | None = None, *, minimum: int | None = None) -> int | None:
    """An integer (``12``, ``"12"``, ``12.0``); a boolean or a fraction is refused."""
    if _unset(value):
        return default
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif (isinstance(value, float) and value.is_integer()) or (isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value)):
        number = int(value)
    if number is None:
        raise _bad(name, "an integer", value)
    if minimum is not None and number < minimum:
        raise _bad(name, f"an integer >= {minimum}", value)
    return number


def as_version(value: Any, name: str) -> int | None:
    """A table version (an integer >= 0), or None when unset."""
    return as_int(value, name, None, minimum=0)


def as_seconds(value: Any, name: str, default: float | None = None) -> float | None:
    """A duration in seconds: a number, a ``timedelta``, or ``"90"``, ``"30s"``, ``"5m"``, ``"2h"``, ``"1d"``."""
    if _unset(value):
        return default
    seconds: float | None = None
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str):
        match = _DURATION.match(value)
        if match:
            unit = (match.group(2) or "s")[0].lower()
            seconds = float(match.group(1)) * _UNIT_SECONDS[unit]
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        raise _bad(name, "a duration (seconds, or a number with s/m/h/d)", value)
    return seconds


def as_days(value: Any, name: str) -> float | None:
    """A duration in days (``7``, ``"0.5"``, ``timedelta(days=7)``, ``"12h"``), or None when unset."""
    if _unset(value):
        return None
    if isinstance(value, str) and re.fullmatch(r"\s*\d+(\.\d+)?\s*", value):
        value = float(value)  # a bare number is days here, not seconds
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value) or value < 0:
            raise _bad(name, "a number of days >= 0", value)
        return float(value)
    seconds = as_seconds(value, name)
    return None if seconds is None else seconds / 86400
