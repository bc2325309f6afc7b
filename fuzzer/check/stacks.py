"""Which transform stacks ``affuzz check`` runs a target under.

NOTE [check stacks]
Stacks are enumerated, not drawn: every level of :data:`LEVELS` alone (each argnum of a Function of
several inputs), then every pair (outer, inner) with argnums 0 that has at most one forward-mode level,
plus ``autograd_grad`` (plain ``torch.autograd.grad``, the seed's outer level) over each level. That is
every stack of depth <= 2, so a table row says the same on every run; ``--max-cases``/``--duration`` cut
the list short (in this order), and a ``--duration`` longer than the list goes on with random stacks of
depth 3 (seeded; none whose ``fuzzer.ir.shapes.reference_cost`` on the first input's shape exceeds
MAX_RANDOM_COST: a stack is not interrupted at the deadline, and its loops in create_graph mode grow as
the product of the levels' sizes). vmap levels have batch size 2, in_dims and out_dims 0.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from ..ir.case import FORWARD_MODE_TRANSFORMS, Transform
from ..ir.shapes import reference_cost
from ..ir.target import Target

#: NOTE [check stacks]: the create_graph side of hessian > jvp > hessian on 3 elements (cost 118098) takes
#: 14 s, hessian > vmap > jacfwd (11664) under one.
MAX_RANDOM_COST = 20_000
LEVELS = ("grad", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "vmap", "linearize")


def stacks(target: Target) -> Iterator[tuple[Transform, ...]]:
    """NOTE [check stacks]: every stack of depth <= 2 (the order is the table's)."""

    def level(name: str, argnums: int = 0) -> Transform:
        return Transform("vmap", batch_size=2) if name == "vmap" else Transform(name, argnums=argnums)

    for name in LEVELS:
        for i in range(target.n_inputs if name != "vmap" else 1):
            yield (level(name, i),)
    for outer in LEVELS:
        for inner in LEVELS:
            if outer in FORWARD_MODE_TRANSFORMS and inner in FORWARD_MODE_TRANSFORMS:
                continue
            yield (level(outer), level(inner))
    for inner in LEVELS:
        yield (Transform("autograd_grad"), level(inner))


def parse_stacks(text: str) -> tuple[tuple[Transform, ...], ...]:
    """``--stacks``: comma-separated stacks, levels outermost first joined by ``>`` (``jacfwd>hessian,grad``);
    raises ValueError naming what it cannot read."""
    out = []
    for item in (s.strip() for s in text.split(",") if s.strip()):
        names = [n.strip() for n in item.split(">")]
        bad = [n for n in names if n not in (*LEVELS, "autograd_grad")]
        if bad:
            raise ValueError(f"{item!r}: {', '.join(bad)} is not one of {', '.join((*LEVELS, 'autograd_grad'))}")
        out.append(tuple(Transform("vmap", batch_size=2) if n == "vmap" else Transform(n) for n in names))
    if not out:
        raise ValueError("name at least one stack, e.g. jacfwd>hessian")
    return tuple(out)


def random_stacks(seed: int, target: Target) -> Iterator[tuple[Transform, ...]]:
    """NOTE [check stacks]: random depth-3 stacks, none that costs more than MAX_RANDOM_COST."""
    rng = random.Random(seed)
    base = target.shapes[0] if target.shapes else ()
    while True:
        names = [rng.choice(LEVELS) for _ in range(3)]
        if sum(n in FORWARD_MODE_TRANSFORMS for n in names) > 1:
            continue
        stack = tuple(Transform("vmap", batch_size=2) if n == "vmap" else Transform(n) for n in names)
        if reference_cost(stack, base, target.out_shape) <= MAX_RANDOM_COST:
            yield stack
