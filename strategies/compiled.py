"""How a case runs under ``torch.compile`` (:class:`fuzzer.ir.case.Compile`, NOTE [compiled mode]), and
under activation checkpointing or saved-tensor hooks (:class:`fuzzer.ir.case.Checkpoint`, NOTE [checkpoint
mode]).

Invariants: every drawn configuration is valid for any case (every placement fits every stack: an outer
plain-autograd level stays outside a compile placed ``around`` the torch.func stack); choices are ordered
simplest first, the order the shrinker walks (backend ``eager`` < ``aot_eager`` < ``inductor``,
``fullgraph=True`` first, placement ``plain`` < ``inside`` < ``around``, compiled autograd off first;
checkpoint kinds as :data:`fuzzer.ir.case.CHECKPOINT_KINDS` orders them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache

from hypothesis import strategies as st

from fuzzer.ir.case import (
    CHECKPOINT_KINDS,
    CHECKPOINT_PLACEMENTS,
    COMPILE_BACKENDS,
    COMPILE_PLACEMENTS,
    Checkpoint,
    Compile,
)

from ._validate import check_subset

__all__ = ["checkpoint_configs", "compile_configs"]


def compile_configs(
    *,
    backends: Sequence[str] = COMPILE_BACKENDS,
    placements: Sequence[str] = COMPILE_PLACEMENTS,
    fullgraph: bool | None = None,
    compiled_autograd: bool = False,
) -> st.SearchStrategy[Compile]:
    """torch.compile configurations: a backend of ``backends``, a placement of ``placements`` and
    ``fullgraph`` (None: drawn); ``compiled_autograd``: a compile placed ``plain`` may also compile its
    backward (drawn). ``inductor`` compiles C++ (its first compile in a process takes tens of seconds);
    leave it out for fast tests."""
    backends = check_subset("backends", backends, COMPILE_BACKENDS)
    placements = check_subset("placements", placements, COMPILE_PLACEMENTS)
    if fullgraph is not None and not isinstance(fullgraph, bool):
        from hypothesis.errors import InvalidArgument

        raise InvalidArgument(f"fullgraph={fullgraph!r} must be True, False or None")
    if not isinstance(compiled_autograd, bool):
        from hypothesis.errors import InvalidArgument

        raise InvalidArgument(f"compiled_autograd={compiled_autograd!r} must be True or False")
    configs = _configs(
        tuple(b for b in COMPILE_BACKENDS if b in backends),
        tuple(p for p in COMPILE_PLACEMENTS if p in placements),
        fullgraph,
    )
    if not compiled_autograd:
        return configs
    return st.tuples(configs, st.booleans()).map(
        lambda pair: replace(pair[0], autograd=pair[1] and pair[0].placement == "plain")
    )


def checkpoint_configs(
    *,
    kinds: Sequence[str] = CHECKPOINT_KINDS,
    placements: Sequence[str] = CHECKPOINT_PLACEMENTS,
) -> st.SearchStrategy[Checkpoint]:
    """Checkpoint configurations (NOTE [checkpoint mode]): a kind of ``kinds`` and a placement of
    ``placements``. Placement ``compiled`` runs torch.compile (``aot_eager``); leave it out for fast tests."""
    kinds = check_subset("kinds", kinds, CHECKPOINT_KINDS)
    placements = check_subset("placements", placements, CHECKPOINT_PLACEMENTS)
    return st.builds(
        Checkpoint,
        kind=st.sampled_from(tuple(k for k in CHECKPOINT_KINDS if k in kinds)),
        placement=st.sampled_from(tuple(p for p in CHECKPOINT_PLACEMENTS if p in placements)),
    )


@lru_cache(maxsize=64)
def _configs(
    backends: tuple[str, ...], placements: tuple[str, ...], fullgraph: bool | None
) -> st.SearchStrategy[Compile]:
    full = st.just(fullgraph) if fullgraph is not None else st.booleans().map(lambda b: not b)  # True first
    return st.builds(Compile, backend=st.sampled_from(backends), fullgraph=full, placement=st.sampled_from(placements))
