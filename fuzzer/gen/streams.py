"""Worker streams (NOTE [worker streams])."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase

from ..ir.case import Case
from .profile import campaign_settings

BUFFER_BYTES = 2048
#: Cases decoded together, sharing one Function (NOTE [case groups] in :mod:`strategies.cases`).
GROUP = 4


def stream_buffer(seed: int, slot: int, k: int) -> bytes:
    """NOTE [worker streams]: the bytes the group of case ``k`` of slot ``slot`` is decoded from."""
    return random.Random(f"{seed}/{slot}/{k - k % GROUP}").randbytes(BUFFER_BYTES)


class Decoder:
    """Stream positions -> cases (torch-free: the driver decodes the case that killed a worker)."""

    def __init__(self, seed: int, strategy_kwargs: dict[str, Any], database: str | None = None) -> None:
        from strategies import case_groups

        self.seed = seed
        self.groups = case_groups(size=GROUP, **strategy_kwargs)
        self._drawn: list[tuple[Case | None, ...]] = []
        self._last: tuple[tuple[int, int], tuple[Case | None, ...]] | None = None
        db = DirectoryBasedExampleDatabase(database) if database else None

        @campaign_settings(database=db)
        @given(self.groups)
        def target(group: tuple[Case | None, ...]) -> None:
            self._drawn.append(group)

        self._decode = target.hypothesis.fuzz_one_input

    def strategy(self, k: int) -> st.SearchStrategy[Case]:
        """The strategy that decodes case ``k`` from :func:`stream_buffer` (for the shrinker)."""
        from strategies import group_entry

        return group_entry(self.groups, k % GROUP)

    def draw(self, slot: int, k: int) -> Case | None:
        """Case ``k`` of slot ``slot``'s stream (None when its bytes decode to no case)."""
        key = (slot, k - k % GROUP)
        if self._last is None or self._last[0] != key:
            self._drawn.clear()
            self._decode(stream_buffer(self.seed, slot, k))
            self._last = (key, self._drawn[-1] if self._drawn else (None,) * GROUP)
        return self._last[1][k % GROUP]


def database_dir(out: Path | None) -> str | None:
    return str(out / "hypothesis") if out is not None else None
