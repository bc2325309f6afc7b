"""Which cases of a campaign also run compiled, and how (NOTE [compile share]). Torch-free.

NOTE [compile share]
A compiled case costs 50-200 torch.func cases (a Dynamo compile of a small stack takes 0.05-0.5 s; a
first Inductor compile tens of seconds), so the oracle ``compiled_vs_eager`` (NOTE [compiled mode] in
:mod:`fuzzer.ir.case`) gets its own share of each worker's time, ``--compile-share`` (0 turns it off):
a drawn case also runs compiled while compiled cases have cost at most that fraction of the worker's
fuzz-loop time so far (by time), or, with ``--steer-by cases`` (repeatable campaigns), where its
position's own random number falls below ``share / COST_RATIO`` (by position alone). What a compiled
case costs is all of it but the oracles it would run anyway: the compile, Dynamo's resets, collecting
the garbage it leaves, the script compiled whole (NOTE [worker time] in :mod:`fuzzer.campaign.worker`),
so the share is of the worker's wall time, not of the compiled sides' own seconds. Steering (NOTE
[cost-aware steering] in :mod:`fuzzer.gen.coverage`) weighs a compiled case without that cost: the share
bounds it already, and counted there too it made every transform a compiled case had look expensive, so
steering skipped those transforms' torch.func cases.

How it runs compiled is named by the campaign seed, the slot and the position, like the case itself
(NOTE [worker streams]): ``random.Random(f"{seed}/{slot}/compile/{k}")`` draws the backend (``eager``
and ``aot_eager`` 9 times in 20 each, ``inductor`` 2 in 20, and never before the campaign's first
:data:`INDUCTOR_AFTER` seconds, where its C++ toolchain warm-up would eat the first minute), fullgraph
(1 in 2) and placement (1 in 3 each), and, with the mode ``compiled_autograd`` on (NOTE [modes] in
:mod:`fuzzer.gen.modes`), compiled autograd for half of the compiles placed ``plain`` (drawn last, so the
other choices are the same with the mode on or off). So a finding's case carries the ``compile`` it ran
with, and the shrinker walks it toward the simplest (NOTE [compiled mode]).
"""

from __future__ import annotations

import random
from dataclasses import replace

from ..ir.case import COMPILE_PLACEMENTS, Case, Compile
from .modes import ModeShare

#: What one compiled case costs in torch.func cases, about (measured on torch 2.13: a case 1-6 ms, a
#: Dynamo compile 50-500 ms): the by-position rule runs ``share / COST_RATIO`` of the cases compiled.
COST_RATIO = 60.0
#: Seconds into a campaign before Inductor may be drawn.
INDUCTOR_AFTER = 60.0
DEFAULT_SHARE = 0.15


def compile_at(seed: int, slot: int, k: int, *, inductor: bool = True, autograd: bool = False) -> Compile:
    """How case ``k`` of slot ``slot`` runs compiled (NOTE [compile share]); ``inductor=False``: never
    Inductor (``aot_eager`` in its place); ``autograd``: compiled autograd may be drawn."""
    rng = random.Random(f"{seed}/{slot}/compile/{k}")
    roll = rng.random()
    backend = "eager" if roll < 0.45 else "aot_eager" if roll < 0.9 or not inductor else "inductor"
    fullgraph = rng.random() < 0.5
    placement = COMPILE_PLACEMENTS[rng.randrange(len(COMPILE_PLACEMENTS))]
    with_autograd = autograd and placement == "plain" and rng.random() < 0.5
    return Compile(backend, fullgraph, placement, autograd=with_autograd)


class CompileShare(ModeShare):
    """NOTE [compile share]: decides, case by case, which cases of one worker's stream run compiled."""

    key = "compile"
    cost_ratio = COST_RATIO

    def __init__(
        self, seed: int, slot: int, share: float, *, by: str = "time", elapsed: float = 0.0, autograd: bool = False
    ) -> None:
        super().__init__(seed, slot, share, by=by)
        self.autograd = autograd  # the mode compiled_autograd is on (NOTE [modes])
        self.elapsed = elapsed  # campaign seconds before this worker started (resume, restarts)

    @property
    def compiled_seconds(self) -> float:
        return self.seconds

    @property
    def compiled_cases(self) -> int:
        return self.cases

    def attach(self, case: Case, k: int, campaign_seconds: float) -> Case:
        """``case`` with the ``compile`` it runs with, where it is its turn; else ``case`` unchanged."""
        if case.compile is not None or not self.turn(k):
            return case
        inductor = campaign_seconds >= INDUCTOR_AFTER
        return replace(case, compile=compile_at(self.seed, self.slot, k, inductor=inductor, autograd=self.autograd))
