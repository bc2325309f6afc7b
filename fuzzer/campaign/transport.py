"""How the driver talks to its workers: in its own process, in local worker processes, or in Ray actors.

NOTE [transports]
All three run the same :class:`fuzzer.campaign.worker.Worker` and speak the same protocol (NOTE [worker
protocol]): ``send(command)``, then ``poll()`` yields ``("beat", what)``, ``("result", r)`` or
``("died", why)``. They differ in isolation:

* :class:`InProcess` (``--workers 0``) runs the command inside ``send``: no isolation, fully repeatable;
  tests and shrink-everything runs use it.
* :class:`LocalProcess` is a ``spawn``-ed process on this machine, connected by a pipe. Beats cross the
  pipe, so when the process dies (a segfault, an abort, ``kill -9``) the driver knows the case it was
  running, and when it goes silent past the hang limit the driver kills it and knows the case too.
* :class:`RayActor` is a Ray actor anywhere on a cluster (``--ray ADDRESS``). Its beats stay on its
  node, so a death is known only by the command that was running: the driver re-runs that command's
  positions one case per command ("careful" mode) to find the one that kills it.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import signal
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from .protocol import Fuzz, Job, WorkerInit
from .worker import Worker

Message = tuple[str, Any]


class Handle:
    """One worker, as the driver sees it."""

    kind = "base"
    knows_current_case = False  # beats reach the driver (NOTE [transports])

    def __init__(self, init: WorkerInit) -> None:
        self.init = init
        self.slot = init.slot
        self.pid: int | None = None
        self.command: Fuzz | Job | None = None
        self.sent_at = 0.0
        self.last_beat = time.monotonic()
        self.current: tuple[str, Any] | None = None
        self.started = time.monotonic()

    def send(self, command: Fuzz | Job) -> None:
        self.command = command
        self.sent_at = self.last_beat = time.monotonic()
        self.current = None
        self._send(command)

    def _send(self, command: Fuzz | Job) -> None:
        raise NotImplementedError

    def poll(self) -> list[Message]:
        raise NotImplementedError

    def kill(self) -> None:
        """Stop the worker at once (a hang, or the end of the campaign)."""

    def close(self) -> None:
        """Let the worker exit."""
        self.kill()


class InProcess(Handle):
    kind = "in-process"

    def __init__(self, init: WorkerInit) -> None:
        super().__init__(init)
        self.pid = os.getpid()
        self.worker = Worker(init)
        self._pending: list[Message] = []

    def _send(self, command: Fuzz | Job) -> None:
        self._pending.append(("result", self.worker.handle(command)))

    def poll(self) -> list[Message]:
        out, self._pending = self._pending, []
        return out


class _Beats:
    """A worker process's beats (NOTE [worker protocol]), sent where they tell the driver something: what
    the worker is doing changed, or a second passed since the last one (it is alive). A case beats before
    each of its oracles; one message per case says the same, for a pipe write instead of several."""

    def __init__(self, conn: multiprocessing.connection.Connection, every: float = 1.0) -> None:
        self.conn, self.every = conn, every
        self.last: Any = None
        self.sent = 0.0

    def __call__(self, what: Any) -> None:
        now = time.monotonic()
        if what != self.last or now - self.sent >= self.every:
            self.conn.send(("beat", what))
            self.last, self.sent = what, now


def _process_main(conn: multiprocessing.connection.Connection, init: WorkerInit) -> None:
    """A local worker process: answer commands until the pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the whole group; the driver decides
    worker = Worker(replace(init, own_process=True), beat=_Beats(conn))
    while True:
        try:
            command = conn.recv()
        except (EOFError, OSError):
            return
        if command is None:
            return
        conn.send(("result", worker.handle(command)))


class LocalProcess(Handle):
    kind = "process"
    knows_current_case = True
    _ctx = multiprocessing.get_context("spawn")

    def __init__(self, init: WorkerInit) -> None:
        super().__init__(init)
        self.conn, child = self._ctx.Pipe()
        self.process = self._ctx.Process(
            target=_process_main, args=(child, init), name=f"affuzz-worker-{init.slot}", daemon=True
        )
        self.process.start()
        child.close()
        self.pid = self.process.pid

    def _send(self, command: Fuzz | Job) -> None:
        try:
            self.conn.send(command)
        except (BrokenPipeError, OSError):
            pass  # poll() reports the death

    def waitables(self) -> list[Any]:
        return [self.conn, self.process.sentinel]

    def poll(self) -> list[Message]:
        out: list[Message] = []
        try:
            while self.conn.poll():
                out.append(self.conn.recv())
        except (EOFError, OSError):
            pass
        else:
            if self.process.is_alive():
                return out
        self.process.join(timeout=5)
        code = self.process.exitcode
        if code is not None and code < 0:
            try:
                why = f"killed by {signal.Signals(-code).name}"
            except ValueError:
                why = f"killed by signal {-code}"
        else:
            why = f"exited with status {code}"
        out.append(("died", why))
        return out

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=10)
        self.conn.close()

    def close(self) -> None:
        try:
            self.conn.send(None)
        except (BrokenPipeError, OSError):
            pass
        self.process.join(timeout=5)
        self.kill()


class RayActor(Handle):
    kind = "ray"

    def __init__(self, init: WorkerInit) -> None:
        super().__init__(init)
        import ray

        self._ray = ray
        self.actor = _ray_worker_class().remote(init)
        self.ref: Any = None
        self.pid = None
        self._pid_ref = self.actor.pid.remote()

    def _send(self, command: Fuzz | Job) -> None:
        self.ref = self.actor.handle.remote(command)

    def poll(self) -> list[Message]:
        ray = self._ray
        out: list[Message] = []
        if self.pid is None and self._pid_ref is not None:
            ready, _ = ray.wait([self._pid_ref], timeout=0)
            if ready:
                try:
                    self.pid = ray.get(self._pid_ref)
                except Exception:  # noqa: BLE001 (the death is reported by the command)
                    pass
                self._pid_ref = None
        if self.ref is None:
            return out
        ready, _ = ray.wait([self.ref], timeout=0)
        if ready:
            ref, self.ref = self.ref, None
            try:
                out.append(("result", ray.get(ref)))
            except ray.exceptions.RayActorError as e:
                out.append(("died", f"Ray actor died ({type(e).__name__})"))
        return out

    def kill(self) -> None:
        try:
            self._ray.kill(self.actor, no_restart=True)
        except Exception:  # noqa: BLE001
            pass


_RAY_WORKER: Any = None


def _ray_worker_class() -> Any:
    global _RAY_WORKER
    if _RAY_WORKER is None:
        import ray

        @ray.remote(num_cpus=1, max_restarts=0)
        class RayWorker:
            def __init__(self, init: WorkerInit) -> None:
                self.worker = Worker(replace(init, own_process=True))

            def pid(self) -> int:
                return os.getpid()

            def handle(self, command: Fuzz | Job) -> Any:
                return self.worker.handle(command)

        _RAY_WORKER = RayWorker
    return _RAY_WORKER


def ray_connect(address: str) -> int:
    """Connect to a Ray cluster (``auto`` or ``HOST:PORT``); returns its CPU count. The ``fuzzer`` and
    ``strategies`` packages travel with the job (Ray ``py_modules``); torch and Hypothesis must be
    installed on every node (``pip install -e .[ray]`` there)."""
    import ray

    root = Path(__file__).resolve().parent.parent.parent
    if not ray.is_initialized():
        ray.init(
            address=address,
            log_to_driver=False,
            runtime_env={"py_modules": [str(root / "fuzzer"), str(root / "strategies")]},
        )
    return int(ray.cluster_resources().get("CPU", 1))


def wait(handles: list[Handle], timeout: float) -> None:
    """Block until some handle may have a message, or ``timeout`` seconds."""
    local = [w for h in handles if isinstance(h, LocalProcess) for w in h.waitables()]
    rays = [h.ref for h in handles if isinstance(h, RayActor) and h.ref is not None]
    if any(isinstance(h, InProcess) for h in handles):
        return
    if local:
        multiprocessing.connection.wait(local, timeout=timeout)
    elif rays:
        import ray

        ray.wait(rays, timeout=timeout)
    else:
        time.sleep(timeout)
