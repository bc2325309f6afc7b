"""Argument checks in Hypothesis's style: bad arguments raise ``hypothesis.errors.InvalidArgument``."""

from __future__ import annotations

from collections.abc import Iterable

from hypothesis.errors import InvalidArgument


def check_int_range(name: str, value: object, lo: int, hi: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise InvalidArgument(f"{name}={value!r} must be an integer in [{lo}, {hi}]")
    return value


def check_subset(name: str, values: Iterable[str], allowed: Iterable[str]) -> tuple[str, ...]:
    values, allowed = tuple(values), tuple(allowed)
    if not values:
        raise InvalidArgument(f"{name} must not be empty")
    bad = [v for v in values if v not in allowed]
    if bad:
        raise InvalidArgument(f"{name} has unknown value(s) {bad!r} (known: {', '.join(allowed)})")
    return values


def check_min_max(lo_name: str, lo: int, hi_name: str, hi: int) -> None:
    if lo > hi:
        raise InvalidArgument(f"{lo_name}={lo} must not exceed {hi_name}={hi}")
