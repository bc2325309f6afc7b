"""Swarm configurations: which feature tags and transforms a slice of a worker's stream may draw.

NOTE [swarm]
Swarm testing (Groce et al., "Swarm Testing", ISSTA 2012; Csmith's generator does it): instead of drawing
every feature of every case from the whole vocabulary, each *configuration* enables a random subset of
the feature tags (:data:`fuzzer.ir.features.DRAWN_FEATURES`) and of the transforms, each on with
probability :data:`P_ON`, and the strategies draw only from it (``features=``/``transforms=`` of
:func:`strategies.case_groups`). A bug that needs three features together *and* the absence of a few
others is rare under the whole vocabulary (a case draws many features at once, each of which can mask
the bug or make the comparison not applicable) and common in the configurations that enable just those
three.

A configuration covers :data:`SLICE` consecutive positions of one slot's stream: the configuration of
position ``k`` of slot ``w`` in a campaign of seed ``S`` comes from ``random.Random(f"{S}/{w}/swarm/{k //
SLICE}")``, so a position still names one case (NOTE [worker streams] in :mod:`fuzzer.gen.streams`):
resume, crash attribution, ``bench/`` regeneration and the shrinker (which decodes the finding's buffer
with its slice's strategy) keep working. A transform list of the user's (``strategy_kwargs``) is
intersected, never widened; at least one transform is always on. Steering (NOTE [steering] in
:mod:`fuzzer.gen.coverage`) still runs on top; configurations that disable a rare cell's feature simply
never offer it, and the next slice may. ``affuzz run --no-swarm`` draws every case from the whole
vocabulary, as before swarm.

Tags a configuration leaves out are never *drawn*, but two are also derived from the rest of the
Function: ``saved_input`` where the backward needs an input nothing else provides, and
``backward_returns_none`` where an input reaches no output.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Sequence
from dataclasses import dataclass

from ..ir.case import FUNCTORCH_TRANSFORMS
from ..ir.features import DRAWN_FEATURES

#: Positions of one slot's stream that share a configuration (a multiple of the case group size, 4).
SLICE = 256
#: Probability that a configuration enables a given feature tag or transform. Not Groce et al.'s 1/2: a
#: bug that needs k tags together is in a configuration p**k of the time, and one that a tag masks
#: finds it off 1 - p of the time; the masking tags here are rare per Function already (see
#: NOTE [rare features] in strategies/functions.py), the needed ones are not. Measured on torch 2.0.1 over 95,000
#: cases (the seed's class: three tags together): 0.32 findings per 10,000 cases at 1/2, 2.0 at 3/4,
#: 2.85 without swarm; a configuration still leaves out a quarter of the tags.
P_ON = 0.75


@dataclass(frozen=True)
class Swarm:
    """One configuration: the feature tags and transforms its slice draws from."""

    features: frozenset[str]
    transforms: tuple[str, ...]

    def to_json(self) -> dict[str, list[str]]:
        return {"features": [f for f in DRAWN_FEATURES if f in self.features], "transforms": list(self.transforms)}


def swarm_at(seed: int, slot: int, k: int, transforms: Sequence[str] = FUNCTORCH_TRANSFORMS) -> Swarm:
    """NOTE [swarm]: the configuration of position ``k`` of slot ``slot``'s stream."""
    return _slice_config(seed, slot, k // SLICE, tuple(transforms))


@functools.lru_cache(maxsize=256)
def _slice_config(seed: int, slot: int, index: int, names: tuple[str, ...]) -> Swarm:
    rng = random.Random(f"{seed}/{slot}/swarm/{index}")
    tags = frozenset(f for f in DRAWN_FEATURES if rng.random() < P_ON)
    on = tuple(t for t in FUNCTORCH_TRANSFORMS if rng.random() < P_ON and t in names)
    return Swarm(tags, on or (names[rng.randrange(len(names))],))
