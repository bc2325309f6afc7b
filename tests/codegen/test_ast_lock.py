"""NOTE [ast lock]: the renderer's ast.parse is safe to call from several threads at once (a campaign
renders on its driver thread and on its verification threads)."""

from __future__ import annotations

import ast
import gc
import threading
from collections.abc import Callable
from pathlib import Path

from fuzzer.codegen.function import parse

SOURCE = (Path(__file__).resolve().parents[2] / "fuzzer" / "codegen" / "render.py").read_text(encoding="utf-8")


def _errors(fn: Callable[[str], object], *, threads: int = 4, rounds: int = 30) -> list[str]:
    """SystemErrors from ``fn(SOURCE)`` run in ``threads`` threads while garbage collection runs often and
    its callback allocates (which lets another thread run mid-conversion, as a busy campaign does)."""
    errors: list[str] = []

    class Junk:
        def __del__(self) -> None:
            pass

    def callback(phase: str, info: dict) -> None:
        for _ in range(3):
            Junk()

    def work() -> None:
        for _ in range(rounds):
            try:
                fn(SOURCE)
            except SystemError as e:
                errors.append(str(e))
                return

    old = gc.get_threshold()
    gc.set_threshold(50, 5, 5)
    gc.callbacks.append(callback)
    try:
        pool = [threading.Thread(target=work) for _ in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
    finally:
        gc.callbacks.remove(callback)
        gc.set_threshold(*old)
    return errors


def test_parse_under_the_lock_never_trips_the_recursion_depth_check() -> None:
    assert _errors(parse) == []
    # and the same stress does trip it for a bare ast.parse on the Pythons that have the bug (3.11 here);
    # where it does not, this half only says the stress is the same
    bare = _errors(ast.parse)
    assert all("recursion depth mismatch" in e for e in bare), bare
