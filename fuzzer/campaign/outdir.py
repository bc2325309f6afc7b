"""The driver's own files under OUT, written by it alone (NOTE [campaign files]): the lock that makes it
the only driver of OUT, ``events.jsonl`` and ``internal-errors.log``.

NOTE [campaign files]
Under OUT the driver writes ``findings/<bucket>/`` (and ``unverified/``), ``stats.json`` (rewritten
atomically every ``stats_interval`` seconds: the numbers the live view shows), ``events.jsonl``
(append-only, one JSON object a line: ``start``, ``stop``, ``new_bucket``, ``crash``, ``hang``,
``worker_restart``), ``state.json`` (NOTE [resume] in :mod:`fuzzer.campaign.state`), ``internal-errors.log``,
``hypothesis/`` (NOTE [hypothesis settings]) and, at the end, ``summary.json`` and ``report.md``.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..ir.errors import AffuzzError


class CampaignBusy(AffuzzError, RuntimeError):
    """Another driver holds OUT's lock."""


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class OutDir:
    """OUT as the driver writes it: one lock, appended events and internal errors."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._events_fd: int | None = None
        self._lock_fd: int | None = None

    def event(self, elapsed: float, name: str, **fields: Any) -> None:
        """Append one line to ``events.jsonl`` (one write per line: a kill leaves no torn line)."""
        record = {"time": now_iso(), "elapsed": round(elapsed, 3), "event": name, **fields}
        line = (json.dumps(record, sort_keys=False) + "\n").encode()
        if self._events_fd is None:
            self._events_fd = os.open(self.path / "events.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(self._events_fd, line)

    def log_internal(self, text: str) -> None:
        with (self.path / "internal-errors.log").open("a", encoding="utf-8") as fh:
            fh.write(text if text.endswith("\n") else text + "\n")

    def lock(self) -> None:
        """One driver per OUT: a second one (say, ``--resume`` while the first still runs) is refused."""
        import fcntl

        self._lock_fd = os.open(self.path / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(self._lock_fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(self._lock_fd)
            self._lock_fd = None
            raise CampaignBusy(
                f"{self.path}: another affuzz driver (pid {holder}) is running this campaign; "
                "wait for it to stop or stop it (Ctrl-C, kill -TERM)"
            ) from None
        os.ftruncate(self._lock_fd, 0)
        os.pwrite(self._lock_fd, str(os.getpid()).encode(), 0)

    def close(self) -> None:
        """Close the event log and release the lock."""
        if self._events_fd is not None:
            os.close(self._events_fd)
            self._events_fd = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
