"""Worker streams: stream positions -> cases, decoded through Hypothesis from :mod:`strategies`.

NOTE [worker streams]
Slot ``w`` of a campaign with seed ``S`` draws its cases from its own stream, in groups of
:data:`GROUP` (NOTE [case groups] in :mod:`strategies.cases`): case ``k`` is entry ``k % GROUP`` of the
group decoded (Hypothesis's ``fuzz_one_input``, NOTE [driving Hypothesis])
from the bytes of ``random.Random(f"{S}/{w}/{k - k % GROUP}")``; an entry that is None is a position
that decodes to no case, as a buffer Hypothesis rejects. A position is a complete name for a case: a restarted or
resumed worker continues its slot's stream at the first position the driver has no report for, a
crash is attributed to ``(w, k)``, and ``bench/`` regenerates the cases of a run without running it.
Steering (NOTE [steering] in :mod:`fuzzer.gen.coverage`) may skip a position; it decides from the counts the
worker started from and the cases it ran itself, so one worker's run with one seed repeats exactly.

NOTE [driving Hypothesis]
Cases come from :func:`strategies.case_groups` through Hypothesis's public fuzzing entry point,
``test.hypothesis.fuzz_one_input(buffer)``: each group is decoded from a buffer of bytes named by the
campaign seed, the worker slot and a position (NOTE [worker streams]). So ``--seed`` makes a worker's
run repeat exactly, strategies keep their simplest-first ordering for later shrinking, and nothing here
depends on Hypothesis internals. The test body never raises (internal errors are logged and counted),
so Hypothesis's example database is never written during fuzzing.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase

from ..ir.case import FUNCTORCH_TRANSFORMS, Case
from .profile import campaign_settings
from .swarm import Swarm, swarm_at

BUFFER_BYTES = 2048
#: Cases decoded together, sharing one Function (NOTE [case groups] in :mod:`strategies.cases`).
GROUP = 4


def stream_buffer(seed: int, slot: int, k: int) -> bytes:
    """NOTE [worker streams]: the bytes the group of case ``k`` of slot ``slot`` is decoded from."""
    return random.Random(f"{seed}/{slot}/{k - k % GROUP}").randbytes(BUFFER_BYTES)


class Decoder:
    """Stream positions -> cases (torch-free: the driver decodes the case that killed a worker).
    ``swarm``: each slice of a slot's stream draws from its own configuration (NOTE [swarm] in
    :mod:`fuzzer.gen.swarm`); otherwise every case draws from the whole vocabulary."""

    def __init__(
        self, seed: int, strategy_kwargs: dict[str, Any], database: str | None = None, *, swarm: bool = False
    ) -> None:
        self.seed = seed
        self.swarm = swarm
        self._kwargs = dict(strategy_kwargs)
        self._db = DirectoryBasedExampleDatabase(database) if database else None
        self._decoders: dict[Swarm | None, tuple[st.SearchStrategy[tuple[Case | None, ...]], Any]] = {}
        self._drawn: list[tuple[Case | None, ...]] = []
        self._last: tuple[tuple[int, int], tuple[Case | None, ...]] | None = None

    def config(self, slot: int, k: int) -> Swarm | None:
        """The swarm configuration of position ``k`` of slot ``slot`` (None without swarm)."""
        if not self.swarm:
            return None
        return swarm_at(self.seed, slot, k, tuple(self._kwargs.get("transforms") or FUNCTORCH_TRANSFORMS))

    def _for(self, config: Swarm | None) -> tuple[st.SearchStrategy[tuple[Case | None, ...]], Any]:
        """The group strategy of ``config`` and its Hypothesis fuzzing entry point, built once."""
        if config not in self._decoders:
            from strategies import case_groups

            kwargs = dict(self._kwargs)
            if config is not None:
                wanted = kwargs.get("features")
                kwargs["features"] = config.features & set(wanted) if wanted is not None else config.features
                kwargs["transforms"] = config.transforms
            groups = case_groups(size=GROUP, **kwargs)

            @campaign_settings(database=self._db)
            @given(groups)
            def target(group: tuple[Case | None, ...]) -> None:
                self._drawn.append(group)

            if len(self._decoders) >= 64:  # a long run visits many configurations: keep the latest
                self._decoders.pop(next(iter(self._decoders)))
            self._decoders[config] = (groups, target.hypothesis.fuzz_one_input)
        return self._decoders[config]

    def strategy(self, k: int, slot: int = 0) -> st.SearchStrategy[Case]:
        """The strategy that decodes case ``k`` of slot ``slot`` from :func:`stream_buffer` (for the
        shrinker)."""
        from strategies import group_entry

        return group_entry(self._for(self.config(slot, k))[0], k % GROUP)

    def draw(self, slot: int, k: int) -> Case | None:
        """Case ``k`` of slot ``slot``'s stream (None when its bytes decode to no case)."""
        key = (slot, k - k % GROUP)
        if self._last is None or self._last[0] != key:
            self._drawn.clear()
            self._for(self.config(slot, k))[1](stream_buffer(self.seed, slot, k))
            self._last = (key, self._drawn[-1] if self._drawn else (None,) * GROUP)
        return self._last[1][k % GROUP]


def database_dir(out: Path | None) -> str | None:
    return str(out / "hypothesis") if out is not None else None
