"""NOTE [frozen heap], the worker's beats and time: what a worker's time is spent on is counted, bounded and
shown, without torch fakes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from fuzzer.campaign.transport import _Beats

ROOT = Path(__file__).resolve().parents[2]


class _Pipe:
    def __init__(self) -> None:
        self.sent: list[object] = []

    def send(self, message: object) -> None:
        self.sent.append(message)


def test_a_worker_beats_when_what_it_does_changes_or_a_second_passed() -> None:
    pipe = _Pipe()
    beats = _Beats(pipe, every=3600.0)  # type: ignore[arg-type]
    for what in [("case", 1), ("case", 1), ("case", 1), ("case", 2), ("job", "x"), ("job", "x")]:
        beats(what)
    assert pipe.sent == [("beat", ("case", 1)), ("beat", ("case", 2)), ("beat", ("job", "x"))]
    alive = _Beats(pipe, every=0.0)  # type: ignore[arg-type]
    alive(("case", 3))
    alive(("case", 3))
    assert pipe.sent[-2:] == [("beat", ("case", 3))] * 2  # still alive: the same case beats again


def test_a_worker_process_freezes_its_heap_and_a_shared_process_never_does() -> None:
    """NOTE [frozen heap]: a worker with its own process freezes what it imported (a full collection then
    walks only what cases made); a worker sharing its process (in-process campaigns, tests) leaves it."""
    code = (
        "import gc, sys\n"
        "from fuzzer.campaign.protocol import WorkerInit\n"
        "from fuzzer.campaign.worker import Worker\n"
        "Worker(WorkerInit(slot=0, seed=1, own_process=sys.argv[1] == 'own'))\n"
        "print(gc.get_freeze_count())\n"
    )
    own = subprocess.run([sys.executable, "-c", code, "own"], capture_output=True, text=True, cwd=ROOT, check=True)
    shared = subprocess.run(
        [sys.executable, "-c", code, "shared"], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert int(own.stdout) > 100_000  # torch and the fuzzer's modules
    assert int(shared.stdout) == 0
