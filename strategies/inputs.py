"""Input values: float tensors with small, exactly representable values, simplest first (1.0 first).

All ops in the vocabulary are smooth everywhere, and the values stay within [-2, 2] so chains of
``exp``/``pow`` stay finite and well inside float32 range.
"""

from __future__ import annotations

from functools import lru_cache

from hypothesis import strategies as st

from fuzzer.ir.case import MAX_INPUTS

from ._validate import check_int_range

__all__ = ["VALUES", "tensor_values"]

VALUES = (1.0, 2.0, 0.5, -1.0, 1.5, -0.5, 0.25, -1.5, 0.75, 1.25, -2.0, -0.25)


def tensor_values(*, n_inputs: int, numel: int) -> st.SearchStrategy[tuple[tuple[float, ...], ...]]:
    """``n_inputs`` flat value tuples of length ``numel`` each."""
    check_int_range("n_inputs", n_inputs, 1, MAX_INPUTS)
    check_int_range("numel", numel, 1, 10_000)
    return _tensor_values(n_inputs, numel)


@lru_cache(maxsize=1024)
def _tensor_values(n_inputs: int, numel: int) -> st.SearchStrategy[tuple[tuple[float, ...], ...]]:
    one = st.lists(st.sampled_from(VALUES), min_size=numel, max_size=numel).map(tuple)
    return st.tuples(*[one] * n_inputs)
