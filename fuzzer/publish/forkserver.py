"""A fork server for verifying repro scripts (AFL's idea): one interpreter imports torch once, then
forks a child per script.

NOTE [verification fork server]
Every finding's repro must reproduce in a fresh process before it is reported. Starting a new
interpreter costs ~2 s, nearly all of it ``import torch``, and a campaign on an old torch can open
hundreds of buckets a minute, so verification would lag far behind fuzzing. The server process
imports torch and nothing else (never affuzz, never a case), warms torch.func and forward AD up on a
fixed two-element example of its own (their first calls pay ~1.5 s of lazy set-up; PyTorch resets its
thread pools in forked children, as DataLoader workers rely on), and forks one child per script; the
child runs the script as ``__main__`` exactly as ``python repro.py`` would. The child's state is
therefore that of a fresh interpreter that has imported and used torch, never one that has run
another case. Hang findings, which need a wall-clock limit on a whole run, still use a plain
subprocess. The server, and so every child, runs at niceness :data:`VERIFY_NICENESS`, a little below
the campaign's workers (NOTE [background priority] in :mod:`fuzzer.publish.env_probe`): verification
keeps up on spare core time and yields to the fuzzing when cores are short.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

#: NOTE [verification fork server]: the server's niceness, inherited by every child (0 = the workers').
VERIFY_NICENESS = 5

_SERVER = r"""
import os, runpy, sys, traceback
import torch  # the import every repro starts with, paid once


def warm():
    # First calls of torch.func / forward AD pay lazy imports and set-up (~1.5 s); pay them once here.
    class W(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            return x.sin()

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])
            ctx.save_for_forward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            return g * ctx.saved_tensors[0].cos()

        @staticmethod
        def jvp(ctx, t):
            return t * ctx.saved_tensors[0].cos()

    x = torch.ones(2, dtype=torch.float64)
    f = lambda x: (W.apply(x) ** 2).sum()
    torch.func.grad(f)(x); torch.func.vmap(W.apply)(x); torch.func.jacrev(W.apply)(x)
    torch.func.jacfwd(W.apply)(x); torch.func.hessian(f)(x); torch.func.jvp(W.apply, (x,), (x,))
    torch.func.vjp(W.apply, x); torch.func.linearize(W.apply, x)
    y = x.clone().requires_grad_()
    torch.autograd.grad(torch.autograd.grad(f(y), y, create_graph=True)[0].sum(), y)
    with torch.autograd.forward_ad.dual_level():
        torch.autograd.forward_ad.unpack_dual(W.apply(torch.autograd.forward_ad.make_dual(x, x)))


import warnings
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    warm()
ready = sys.stdout
ready.write("ready\n"); ready.flush()
for line in sys.stdin:
    path = line.rstrip("\n")
    pid = os.fork()
    if pid == 0:
        fd = os.open(path + ".out", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1); os.dup2(fd, 2)
        sys.stdout = os.fdopen(1, "w", buffering=1); sys.stderr = os.fdopen(2, "w", buffering=1)
        os.chdir(os.path.dirname(path)); sys.argv = [path]; sys.path[0] = os.path.dirname(path)
        code = 0
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            traceback.print_exc(); code = 1
        sys.stdout.flush(); sys.stderr.flush()
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    ready.write(f"{code}\n"); ready.flush()
"""


class ForkServer:
    """Runs scripts in forked children of a torch-only interpreter; see NOTE [verification fork server]."""

    def __init__(self, python: str = sys.executable) -> None:
        self.python = python
        self._proc: subprocess.Popen[str] | None = None

    def _start(self) -> subprocess.Popen[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        proc = subprocess.Popen(
            [self.python, "-c", _SERVER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd="/",
        )
        try:  # NOTE [background priority]: the workers first; from here on, before torch is imported
            os.setpriority(os.PRIO_PROCESS, proc.pid, max(os.getpriority(os.PRIO_PROCESS, 0), VERIFY_NICENESS))
        except OSError:
            pass  # exited already: the readline below says so
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            proc.kill()
            raise RuntimeError(f"fork server with {self.python} did not start")
        return proc

    def run(self, script: Path, timeout: float = 600.0) -> tuple[int | None, str, float]:
        """(exit code or None on timeout, combined output, seconds)."""
        if self._proc is None or self._proc.poll() is not None:
            self._proc = self._start()
        proc = self._proc
        assert proc.stdin is not None and proc.stdout is not None
        start = time.monotonic()
        script = script.resolve()
        proc.stdin.write(f"{script}\n")
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        code: int | None = int(proc.stdout.readline()) if ready else None
        if code is None:  # a stuck child: restart the server (killing its process group is overkill)
            self.close()
        out_file = Path(f"{script}.out")
        output = out_file.read_text(errors="replace") if out_file.exists() else ""
        out_file.unlink(missing_ok=True)
        return code, output, time.monotonic() - start

    def close(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None
