"""Replay corpus cases under one or more torch versions, and say what changed since it was recorded.

The current interpreter replays in process; every other one (``--python``) through a worker process
started with that interpreter (NOTE [replay workers] in :mod:`fuzzer.history.replay_worker`). Each result is
compared with what the entry records (:meth:`fuzzer.history.corpus.Entry.expected_verdict`):

========== =====================================================================================
change     meaning
========== =====================================================================================
(none)     as recorded
fixed      the recorded disagreement is gone: ``consistent`` now
regressed  the entry says fixed for this release, and the two sides disagree again
new_error  an error verdict where the record has a value verdict (or none)
changed    another verdict than recorded
crash      the worker died on this case (segfault, abort, exit); a fresh worker replays the rest
hang       no answer within the time limit; the worker is killed and replaced
new        nothing recorded for this entry (a bare case file)
absent     consistent on a release older than the one the bug was first seen on (introduced later)
earlier    another verdict on such an older release (``absent`` and ``earlier`` are news, not failures)
========== =====================================================================================
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..ir.case import Case
from ..ir.serde import case_to_json
from ..ir.verdicts import ERROR_VERDICTS, QUIET_VERDICTS
from .corpus import STATUS, Entry, history_verdict, recorded, version_tuple
from .replay_worker import PREFIX

ROOT = Path(__file__).resolve().parent.parent.parent
CHANGES = ("fixed", "regressed", "new_error", "changed", "crash", "hang", "new", "absent", "earlier")
#: Changes that are news but not a failure: nothing recorded says otherwise.
INFORMATIONAL = ("new", "absent", "earlier")


@dataclass
class ReplayResult:
    entry: Entry
    torch_version: str
    python: str
    verdict: str
    detail: str = ""
    change: str = ""
    fingerprint: str = ""  # NOTE [error buckets]: the error that keys an error verdict
    outcome: dict[str, Any] | None = None  # the judge's Outcome.to_json(), where the case ran

    def record(self) -> dict[str, Any]:
        return {
            "case": str(self.entry.path),
            "id": self.entry.id,
            "signature": self.entry.meta.get("signature"),
            "torch_version": self.torch_version,
            "python": self.python,
            "verdict": self.verdict,
            "expected": self.entry.expected_verdict(self.torch_version),
            "status": self.entry.status if self.entry.meta else None,
            "change": self.change or None,
            "detail": self.detail or None,
        }


def change_of(entry: Entry, torch_version: str, verdict: str) -> str:
    if verdict in ("crash", "hang"):
        return verdict
    expected = entry.expected_verdict(torch_version)
    first = str((entry.meta.get("first_seen") or {}).get("torch_version") or "")
    if first and version_tuple(torch_version) < version_tuple(first) and verdict != expected:
        if history_verdict(entry.meta, torch_version) is None:  # nothing known about this older release
            return "absent" if verdict == "consistent" else "earlier"
    if expected is None:
        return "new" if verdict not in QUIET_VERDICTS else ""
    if verdict == expected:
        return ""
    if expected == "consistent":
        return "regressed"
    if verdict == "consistent":
        return "fixed"
    if verdict in ERROR_VERDICTS and expected not in ERROR_VERDICTS:
        return "new_error"
    return "changed"


class ChildCrashed(Exception):
    """The replay worker process under another interpreter died."""


class ChildInterpreter:
    """Another interpreter (``python``): a replay worker process under it (NOTE [replay workers]), restarted
    after a crash or a hang."""

    def __init__(self, python: str, *, start_timeout: float = 300.0, hang_grace: float = 30.0) -> None:
        self.python = python
        self.start_timeout = start_timeout
        self.hang_grace = hang_grace  # beyond twice the case timeout (the worker's own limit), for start-up
        self.torch_version = "?"
        self.restarts = 0
        self.last: dict[str, Any] = {}  # the last case's fingerprint and outcome (ReplayResult's fields)
        self._proc: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._start()

    def _start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        env["PYTHONPATH"] = str(ROOT)
        self._proc = subprocess.Popen(
            [self.python, "-m", "fuzzer.history.replay_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=ROOT,
            env=env,
        )
        self._lines = queue.Queue()
        threading.Thread(target=self._pump, args=(self._proc, self._lines), daemon=True).start()
        hello = self._reply(self.start_timeout)
        self.torch_version = hello.get("torch_version", "?")

    @staticmethod
    def _pump(proc: subprocess.Popen[str], lines: queue.Queue[str | None]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith(PREFIX):
                lines.put(line[len(PREFIX) :])
        lines.put(None)  # the worker's stdout closed: it exited

    def _reply(self, timeout: float) -> dict[str, Any]:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError from None
        if line is None:
            assert self._proc is not None
            code = self._proc.wait()
            raise ChildCrashed(f"worker exited with {'signal ' + str(-code) if code < 0 else 'status ' + str(code)}")
        return json.loads(line)

    def evaluate(self, case: Case, oracle: str, timeout: float) -> tuple[str, str]:
        """(verdict, detail); ``crash``/``hang`` when the worker died or did not answer in time. The last
        reply's fingerprint and outcome are in :attr:`last`."""
        self.last = {}
        assert self._proc is not None and self._proc.stdin is not None
        request = json.dumps({"case": case_to_json(case), "oracle": oracle, "timeout": timeout})
        try:
            self._proc.stdin.write(request + "\n")
            self._proc.stdin.flush()
            reply = self._reply(2 * timeout + self.hang_grace)
        except TimeoutError:
            self._restart()
            return "hang", f"no answer within {2 * timeout + self.hang_grace:.0f} s"
        except (ChildCrashed, BrokenPipeError) as e:
            self._restart()
            return "crash", str(e) if isinstance(e, ChildCrashed) else "worker exited"
        detail = reply.get("detail") or ""
        self.last = {"fingerprint": reply.get("fingerprint") or "", "outcome": reply.get("outcome")}
        return reply["verdict"], detail

    def _restart(self) -> None:
        self.close()
        self.restarts += 1
        self._start()

    def close(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None


class ThisInterpreter:
    """The current interpreter's torch, in this process (per-case timeout by SIGALRM)."""

    def __init__(self) -> None:
        import torch

        from ..judge.judge import Judge, judgement_detail

        self._detail = judgement_detail
        self.python = sys.executable
        self.torch_version = torch.__version__
        self._judge = Judge(timeout=None)
        self.last: dict[str, Any] = {}  # the last case's fingerprint and outcome (ReplayResult's fields)

    def evaluate(self, case: Case, oracle: str, timeout: float) -> tuple[str, str]:
        self._judge.timeout = timeout
        self.last = {}
        try:
            j = self._judge(case, oracle)
        except Exception as e:  # noqa: BLE001
            return "error", f"{type(e).__name__}: {e}"
        self.last = {"fingerprint": j.fingerprint, "outcome": j.outcome.to_json() if j.outcome is not None else None}
        return j.verdict, self._detail(j)

    def close(self) -> None:
        pass


def open_interpreter(python: str | None) -> ChildInterpreter | ThisInterpreter:
    """In process for None or this very interpreter; a worker for any other."""
    if python is None or os.path.abspath(python) == os.path.abspath(sys.executable):
        return ThisInterpreter()
    return ChildInterpreter(python)


def replay(
    entries: list[Entry],
    interpreters: list[ChildInterpreter | ThisInterpreter],
    *,
    timeout: float = 60.0,
    on_result: Callable[[ReplayResult], None] | None = None,
) -> list[ReplayResult]:
    results = []
    for interp in interpreters:
        for entry in entries:
            verdict, detail = interp.evaluate(entry.case, entry.oracle, timeout)
            r = ReplayResult(entry, interp.torch_version, interp.python, verdict, detail, **interp.last)
            r.change = change_of(entry, interp.torch_version, verdict)
            results.append(r)
            if on_result is not None:
                on_result(r)
    return results


def fixed_in(status: str) -> tuple[int, ...] | None:
    """``fixed-in 2.14.1`` -> (2, 14, 1); None for ``open`` and ``expected``."""
    m = STATUS.match(status)
    return version_tuple(m.group(2)) if m and m.group(2) else None


def _fix_point(entry: Entry, results: list[ReplayResult], release: tuple[int, ...]) -> bool:
    """Whether the entry can be ``fixed-in release``: no newer release shows anything but ``consistent``,
    in its history or in this replay (a crash or hang says nothing)."""
    known = {version_tuple(str(h.get("torch_version") or "")): h.get("verdict") for h in entry.meta.get("history", [])}
    known.update({version_tuple(r.torch_version): r.verdict for r in results if r.verdict not in ("crash", "hang")})
    return all(verdict == "consistent" for v, verdict in known.items() if v > release)


def update_corpus(results: list[ReplayResult]) -> list[str]:
    """``--update``: record each changed result in its entry's history; a fixed entry becomes ``fixed-in
    V`` for the lowest replayed release where it is consistent with no newer release disagreeing (an
    entry already ``fixed-in`` a newer release moves down to V: the replay has seen the fix earlier), a
    regressed one ``open`` again. Returns one line per change recorded."""
    lines = []
    by_entry: dict[Path, list[ReplayResult]] = {}
    for r in results:
        if r.entry.meta:
            by_entry.setdefault(r.entry.path, []).append(r)
    for rs in by_entry.values():
        entry = rs[0].entry
        for r in sorted(rs, key=lambda r: version_tuple(r.torch_version)):
            if r.change in ("", "new", "crash", "hang"):
                continue
            if r.change in ("absent", "earlier"):
                recorded(entry, r.torch_version, r.verdict)  # the next replay of this release is exact
                lines.append(f"{entry.id}: torch {r.torch_version}: {r.verdict} (before it was first seen)")
                continue
            status = None
            release, fixed = version_tuple(r.torch_version), fixed_in(entry.status)
            if r.change == "fixed" and (fixed is None or release < fixed) and _fix_point(entry, rs, release):
                status = f"fixed-in {'.'.join(map(str, release))}"
            elif r.change == "regressed":
                status = "open"
            recorded(entry, r.torch_version, r.verdict, status)
            lines.append(
                f"{entry.id}: torch {r.torch_version}: {r.verdict}" + (f" (status: {status})" if status else "")
            )
    return lines


def write_json(path: Path, results: list[ReplayResult], errors: list[str]) -> None:
    """``--json``: a list with one record per case x interpreter (and one ``invalid`` record per entry that
    could not be loaded), written atomically."""
    from ..ir.files import atomic_write_json

    bad = [
        {
            "case": e.split(": ", 1)[0],
            "id": None,
            "signature": None,
            "torch_version": None,
            "verdict": "invalid",
            "detail": e,
        }
        for e in errors
    ]
    atomic_write_json(path, [r.record() for r in results] + bad)
