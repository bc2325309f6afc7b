"""The modes a campaign can switch on, and which cases run checkpointed (NOTE [modes]). Torch-free.

NOTE [modes]
A mode is a way of running the same case that has its own oracle or is a choice of one (one row each in
:data:`MODES`): ``compiled`` (``compiled_vs_eager``, NOTE [compiled mode]), ``compiled_autograd`` (a
choice of the compiled mode: a compile placed ``plain`` also compiles its backward), ``checkpoint``
(``checkpoint_vs_plain``, NOTE [checkpoint mode]), and ``custom_op`` (the Function written as a
torch.library custom op, which every oracle then runs, and ``custom_op_vs_function``: NOTE [custom op
mode] in fuzzer/ir/custom_op.py). ``affuzz run --modes`` names those switched on (all, by
default); an unknown name is a one-line error. A mode's oracle runs on the cases that carry its field, and
each mode that costs a case extra time has a share of the worker's fuzz-loop time it may take
(``--compile-share``, ``--checkpoint-share``, ``--custom-op-share``), counted as the compiled share is (NOTE [compile share] in
:mod:`fuzzer.gen.compiled`): all a case costs for running in that mode. Where the torch under test lacks a
mode's API, its oracle is ``not_applicable`` with that reason (NOTE [oracle table]).

Which cases run checkpointed, and how, is named by the campaign seed, the slot and the position, like the
case itself (NOTE [worker streams]): ``random.Random(f"{seed}/{slot}/checkpoint/{k}")`` draws the kind
(uniformly) and the placement (``plain`` 1 in 2, ``inside`` 3 in 10, ``compiled`` 2 in 10).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from ..ir.case import CHECKPOINT_KINDS, Case, Checkpoint
from ..ir.custom_op import as_custom_op
from ..ir.errors import AffuzzError
from ..ir.oracles import CHECKPOINT, COMPILED, CUSTOM_OP
from ..ir.transforms import FUNCTORCH_REVERSE


@dataclass(frozen=True)
class Mode:
    """One mode (NOTE [modes])."""

    name: str
    oracle: str  # the oracle it runs (or is a choice of)
    share_option: str | None  # the command-line option that bounds its share of the time (None: none of its own)
    doc: str


MODES: tuple[Mode, ...] = (
    Mode("compiled", COMPILED, "--compile-share", "cases also run under torch.compile"),
    Mode("compiled_autograd", COMPILED, None, "a compiled case's plain-autograd backward compiled too"),
    Mode("checkpoint", CHECKPOINT, "--checkpoint-share", "f under activation checkpointing or saved-tensor hooks"),
    Mode("custom_op", CUSTOM_OP, "--custom-op-share", "the Function written as a torch.library.custom_op"),
)
MODE_NAMES = tuple(m.name for m in MODES)


class UnknownMode(AffuzzError, ValueError):
    pass


def parse_modes(text: str) -> tuple[str, ...]:
    """``--modes``: comma-separated mode names, 'all' or 'none'; an unknown name raises :class:`UnknownMode`."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if names == ["all"]:
        return MODE_NAMES
    if names == ["none"]:
        return ()
    unknown = [n for n in names if n not in MODE_NAMES]
    if unknown:
        raise UnknownMode(f"unknown mode {unknown[0]!r} (known: {', '.join(MODE_NAMES)}, or all, none)")
    return tuple(m for m in MODE_NAMES if m in names)


#: What one checkpointed case costs beyond its other oracles, in its own oracle's sides (about one side of
#: plain autograd, a compile for placement ``compiled``): the by-position rule runs ``share / COST_RATIO``
#: of the cases checkpointed.
COST_RATIO = 0.5
DEFAULT_SHARE = 0.1
#: A custom-op case runs instead of the drawn one, with two more oracles (about one case).
CUSTOM_OP_COST_RATIO = 1.0
#: The share of custom-op turns a stack with a reverse-mode torch.func level keeps once the refusal of
#: those levels (pytorch#168393) is bucketed (CustomOpShare.attach).
REFUSED_KEEP = 0.25
_PLACEMENTS = (("plain", 0.5), ("inside", 0.8), ("compiled", 1.0))  # cumulative


def checkpoint_at(seed: int, slot: int, k: int) -> Checkpoint:
    """How case ``k`` of slot ``slot`` runs checkpointed (NOTE [modes])."""
    rng = random.Random(f"{seed}/{slot}/checkpoint/{k}")
    kind = CHECKPOINT_KINDS[rng.randrange(len(CHECKPOINT_KINDS))]
    roll = rng.random()
    return Checkpoint(kind, next(p for p, upto in _PLACEMENTS if roll < upto))


class ModeShare:
    """NOTE [modes]: decides, case by case, whether a case of one worker's stream runs in a mode: while what
    the mode's cases cost stays within ``share`` of the worker's fuzz-loop time (``by="time"``), or, by
    position alone (``by="cases"``), where the position's own random number falls below ``share /
    cost_ratio``. Subclasses say what running in the mode means (``attach``)."""

    #: names the position's random stream (``{seed}/{slot}/{key}-turn/{k}``)
    key = ""
    #: what a case in the mode costs, in cases (the by-position rule's divisor)
    cost_ratio = 1.0

    def __init__(self, seed: int, slot: int, share: float, *, by: str = "time") -> None:
        if not 0.0 <= share < 1.0:
            raise ValueError(f"share must be in [0, 1), not {share!r}")
        self.seed, self.slot, self.share, self.by = seed, slot, share, by
        self.seconds = 0.0  # what running cases in the mode cost, all of it (NOTE [worker time])
        self.loop_seconds = 0.0  # of the whole fuzz loop (every case's iteration, triage apart)
        self.cases = 0

    def turn(self, k: int) -> bool:
        """Whether the case at position ``k`` runs in the mode."""
        if self.share <= 0.0:
            return False
        if self.by == "cases":
            return random.Random(f"{self.seed}/{self.slot}/{self.key}-turn/{k}").random() < self.share / self.cost_ratio
        return self.seconds <= self.share * self.loop_seconds

    def record(self, loop_seconds: float, seconds: float) -> None:
        """After a case: the seconds of its fuzz-loop iteration, and of them what running it in the mode cost
        (0 where it did not run in it; NOTE [worker time])."""
        self.loop_seconds += loop_seconds
        self.seconds += seconds
        self.cases += seconds > 0

    @property
    def used(self) -> float:
        """The share of this worker's fuzz-loop time the mode's cases took so far."""
        return self.seconds / self.loop_seconds if self.loop_seconds else 0.0


class CheckpointShare(ModeShare):
    """NOTE [modes]: which cases of one worker's stream run checkpointed."""

    key = "checkpoint"
    cost_ratio = COST_RATIO

    def attach(self, case: Case, k: int) -> Case:
        """``case`` with the ``checkpoint`` it runs with, where it is its turn; else ``case`` unchanged."""
        if case.checkpoint is not None or not self.turn(k):
            return case
        return replace(case, checkpoint=checkpoint_at(self.seed, self.slot, k))


class CustomOpShare(ModeShare):
    """NOTE [modes]: which cases of one worker's stream run with their Function written as a custom op (NOTE
    [custom op mode] in fuzzer/ir/custom_op.py). A case whose Function the op cannot say runs as drawn; the
    next one that can takes the turn (by time), so the share goes to cases the mode can run."""

    key = "custom-op"
    cost_ratio = CUSTOM_OP_COST_RATIO

    def attach(self, case: Case, k: int, *, refused: bool = False) -> Case:
        """``case`` with its Function written as a custom op, where it is its turn and the op can say it;
        else ``case`` unchanged. ``refused``: the known refusal of reverse-mode torch.func is bucketed
        already (NOTE [known refusals] in fuzzer/publish/upstream.py): a case whose stack has such a level
        takes the turn only 1 time in 1 / :data:`REFUSED_KEEP` (by its position), leaving the mode's time
        to the stacks where every oracle can still tell something new."""
        if case.function.style == "custom_op" or not self.turn(k):
            return case
        if refused and any(t.name in FUNCTORCH_REVERSE for t in case.transforms):
            if random.Random(f"{self.seed}/{self.slot}/custom-op-refused/{k}").random() >= REFUSED_KEEP:
                return case
        return as_custom_op(case) or case
