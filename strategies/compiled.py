"""How a case runs under ``torch.compile`` (:class:`fuzzer.ir.case.Compile`, NOTE [compiled mode]).

Invariants: every drawn configuration is valid for any case (every placement fits every stack: an outer
plain-autograd level stays outside a compile placed ``around`` the torch.func stack); choices are ordered
simplest first, the order the shrinker walks (backend ``eager`` < ``aot_eager`` < ``inductor``,
``fullgraph=True`` first, placement ``plain`` < ``inside`` < ``around``).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from hypothesis import strategies as st

from fuzzer.ir.case import COMPILE_BACKENDS, COMPILE_PLACEMENTS, Compile

from ._validate import check_subset

__all__ = ["compile_configs"]


def compile_configs(
    *,
    backends: Sequence[str] = COMPILE_BACKENDS,
    placements: Sequence[str] = COMPILE_PLACEMENTS,
    fullgraph: bool | None = None,
) -> st.SearchStrategy[Compile]:
    """torch.compile configurations: a backend of ``backends``, a placement of ``placements`` and
    ``fullgraph`` (None: drawn). ``inductor`` compiles C++ (its first compile in a process takes tens of
    seconds); leave it out for fast tests."""
    backends = check_subset("backends", backends, COMPILE_BACKENDS)
    placements = check_subset("placements", placements, COMPILE_PLACEMENTS)
    if fullgraph is not None and not isinstance(fullgraph, bool):
        from hypothesis.errors import InvalidArgument

        raise InvalidArgument(f"fullgraph={fullgraph!r} must be True, False or None")
    return _configs(
        tuple(b for b in COMPILE_BACKENDS if b in backends),
        tuple(p for p in COMPILE_PLACEMENTS if p in placements),
        fullgraph,
    )


@lru_cache(maxsize=64)
def _configs(
    backends: tuple[str, ...], placements: tuple[str, ...], fullgraph: bool | None
) -> st.SearchStrategy[Compile]:
    full = st.just(fullgraph) if fullgraph is not None else st.booleans().map(lambda b: not b)  # True first
    return st.builds(Compile, backend=st.sampled_from(backends), fullgraph=full, placement=st.sampled_from(placements))
