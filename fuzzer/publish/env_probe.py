"""The ``### Versions`` section of an issue draft: ``python -m torch.utils.collect_env`` run once, in the
background and niced, by the interpreter that ran the cases (NOTE [issue drafts] in
:mod:`fuzzer.publish.drafts`).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess

from .rundata import RunData

COLLECT_ENV_TIMEOUT = 120.0  # seconds
#: NOTE [background priority]: the niceness ``collect_env`` runs at (the lowest priority).
ENV_PROBE_NICENESS = 19


class EnvProbe:
    """``python -m torch.utils.collect_env`` started now, read later: ``affuzz run`` starts it with the
    campaign, so its ~2.6 s (pip, lscpu, nvidia-smi) run beside the fuzzing instead of after it; the
    machine and the packages it describes are those the campaign ran on.

    NOTE [background priority]
    Everything a campaign runs beside its workers takes cores from them: on a 2-core machine this
    probe's ``import torch`` ran during the workers' own start-up and the first seconds of fuzzing,
    when a campaign on an old torch finds most of its bugs. So it runs at the lowest priority
    (niceness :data:`ENV_PROBE_NICENESS`): on idle cores at once, on busy ones after the workers stop
    (its result is read when the drafts are written, with ``COLLECT_ENV_TIMEOUT`` to finish). The
    verification fork server runs a little below the workers too (NOTE [verification fork server]).
    """

    def __init__(self, python: str) -> None:
        self.python = python
        self._failed: str | None = None
        self._text: str | None = None
        try:
            self._proc: subprocess.Popen[str] | None = subprocess.Popen(
                [python, "-m", "torch.utils.collect_env"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                text=True,
                start_new_session=True,  # its children (pip, nvidia-smi) die with it on a timeout
            )
            # NOTE [background priority]: it runs on the cores' idle time, not on the workers'
            with contextlib.suppress(OSError):  # it may have exited already
                os.setpriority(os.PRIO_PROCESS, self._proc.pid, ENV_PROBE_NICENESS)
        except OSError as e:
            self._proc = None
            self._failed = f"(`{python} -m torch.utils.collect_env` could not be started: {e.strerror or e})"

    def result(self, timeout: float = COLLECT_ENV_TIMEOUT) -> str:
        """The ``### Versions`` text: its output, or what it printed before it failed or ``timeout`` more
        seconds passed, and a line saying so."""
        if self._text is None:
            self._text = self._failed if self._proc is None else self._wait(self._proc, timeout)
        return self._text or ""

    def _wait(self, proc: subprocess.Popen[str], timeout: float) -> str:
        python = self.python
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._kill(proc)
            out, err = proc.communicate()
            return (out or "").rstrip() + (
                f"\n\n(`{python} -m torch.utils.collect_env` did not finish within {timeout:.0f} s; "
                "the above is what it printed until then)"
            )
        if proc.returncode != 0:
            last = next((line for line in reversed((err or "").splitlines()) if line.strip()), "")
            return (out or "").rstrip() + (
                f"\n\n(`{python} -m torch.utils.collect_env` failed with exit status {proc.returncode}"
                + (f": {last.strip()}" if last else "")
                + ")"
            )
        return (out or "").rstrip()

    @staticmethod
    def _kill(proc: subprocess.Popen[str]) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass

    def close(self) -> None:
        """Stop it if it is still running (nothing to draft, or the campaign failed)."""
        if self._proc is not None and self._proc.poll() is None:
            self._kill(self._proc)
            self._proc.communicate()


def collect_env(python: str, timeout: float = COLLECT_ENV_TIMEOUT) -> str:
    """The ``### Versions`` text (:class:`EnvProbe`, started and read at once)."""
    return EnvProbe(python).result(timeout)


def versions_section(env: str, run: RunData) -> str:
    torch_version = run.numbers.get("torch_version")
    lines = ["### Versions", "", "```", env.strip("\n"), "```"]
    m = re.search(r"^PyTorch version: (\S+)", env, re.MULTILINE)
    if torch_version and (m is None or m.group(1) != torch_version):
        lines += [
            "",
            f"The campaign ran on torch {torch_version}"
            + (f" (Python {run.numbers['python_version']})" if run.numbers.get("python_version") else "")
            + ("; the environment above has torch " + m.group(1) if m else "")
            + ".",
        ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- drafts
