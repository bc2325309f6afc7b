"""Argument checks in Hypothesis's style: bad arguments raise ``hypothesis.errors.InvalidArgument``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import TypeVar

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

T = TypeVar("T")


def check_int_range(name: str, value: object, lo: int, hi: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise InvalidArgument(f"{name}={value!r} must be an integer in [{lo}, {hi}]")
    return value


def check_subset(name: str, values: Iterable[str], allowed: Iterable[str], *, empty: bool = False) -> tuple[str, ...]:
    if isinstance(values, str):
        raise InvalidArgument(f"{name}={values!r} must be a collection of strings, not one string")
    values, allowed = tuple(values), tuple(allowed)
    if not values and not empty:
        raise InvalidArgument(f"{name} must not be empty")
    bad = [v for v in values if v not in allowed]
    if bad:
        raise InvalidArgument(f"{name} has unknown value(s) {bad!r} (known: {', '.join(allowed)})")
    return values


def check_min_max(lo_name: str, lo: int, hi_name: str, hi: int) -> None:
    if lo > hi:
        raise InvalidArgument(f"{lo_name}={lo} must not exceed {hi_name}={hi}")


# NOTE [cheap draws]
# Building a strategy object costs more than drawing from it (``sampled_from`` of a list is not cached
# by Hypothesis and validates itself on every draw), and a case makes about a hundred draws. So the
# composites draw an element of a sequence as an integer index (``pick``: Hypothesis shrinks it to 0,
# the simplest option first, exactly as ``sampled_from`` does) from a cached ``integers`` strategy.


@lru_cache(maxsize=4096)
def ints(lo: int, hi: int) -> st.SearchStrategy[int]:
    """``st.integers(lo, hi)``, one object per range."""
    return st.integers(lo, hi)


BOOLS = st.booleans()
_QUARTERS = st.integers(0, 3)


def rarely(draw: st.DrawFn) -> bool:
    """True one draw in four (features that would crowd out the rest if drawn half the time), shrinking
    to False. NOTE [cheap draws]: the integer drawn directly, without a mapped strategy around it."""
    return draw(_QUARTERS) == 3


def pick(draw: st.DrawFn, options: Sequence[T]) -> T:
    """One element of ``options`` (non-empty), shrinking toward the first."""
    return options[draw(ints(0, len(options) - 1))] if len(options) > 1 else options[0]
