"""Findings on disk, and their verification in a fresh process.

A finding is staged under ``OUT/.pending/<signature id>/``: ``case.json`` (the shrunk case),
``original.json`` (the case as the campaign drew it), ``repro.py`` and ``test_repro.py`` (NOTE [repro
styles] in :mod:`fuzzer.codegen.render`). Its ``repro.py`` is run with a fresh interpreter, and only if that
exits 1 and prints the finding's verdict is ``finding.json`` written and the directory renamed to
``OUT/findings/<signature id>/`` (see NOTE [the repro is what runs] in :mod:`fuzzer.judge.execute`). A repro
that does not reproduce is kept under ``OUT/unverified/`` with the output it printed, and is not
reported. The campaign verifies on one background thread (:class:`Verifier`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from ..codegen.error_key import message_key
from ..codegen.function import render_plain_forward
from ..codegen.render import Expect, render
from ..codegen.short_forms import PROMISE_MESSAGE
from ..ir.files import atomic_write_json, atomic_write_text
from ..ir.serde import dumps
from ..judge.execute import Side
from ..triage.buckets import Bucket
from .findings import Finding
from .forkserver import VERIFY_NICENESS, ForkServer


def stage(out: Path, finding: Finding, *, compact: bool = True, straight: bool = True, plain: bool = False) -> Path:
    """Write the finding's files under ``OUT/.pending/<id>/``; ``compact``: the repro ends as NOTE [repro
    styles] says for its verdict (else with the generic comparison, which prints ``verdict: ...``);
    ``straight``: plain-autograd sides written as straight-line code where shorter (NOTE [straight-line
    sides]); ``plain``: the Function replaced by its forward as a plain function (NOTE [plain forward],
    only where :func:`plain_possible`)."""
    d = out / ".pending" / finding.signature.id
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    oracle = finding.signature.oracle
    atomic_write_text(d / "case.json", dumps(finding.case))
    if finding.original is not None and finding.original != finding.case:
        atomic_write_text(d / "original.json", dumps(finding.original))
    expect = finding.expect() if compact else None
    if expect is not None and not straight:
        expect = dataclasses.replace(expect, straight=False)
    header = finding.short_header()
    if plain:
        expect = dataclasses.replace(finding.expect() or Expect(), plain=True)
        header = [*header, PLAIN_HEADER]
    if finding.signature.verdict == "slow":  # it needs the timing of the full script (NOTE [slow findings])
        repro = render(finding.case, header=finding.header(), oracle=oracle)
    else:
        repro = render(finding.case, header=header, oracle=oracle, style="repro", expect=expect)
    atomic_write_text(d / "repro.py", repro)
    test = render(finding.case, header=header, oracle=oracle, style="pytest", expect=expect)
    atomic_write_text(d / "test_repro.py", test)
    return d


#: The second header line of a repro written with the plain forward (NOTE [plain forward]).
PLAIN_HEADER = "no custom autograd.Function needed: its forward as a plain function shows the same disagreement"


def plain_possible(finding: Finding) -> bool:
    """Whether the repro of ``finding`` is first tried with the plain forward (NOTE [plain forward]): a
    value finding of a Function whose forward does not take ctx."""
    return finding.signature.verdict == "value_mismatch" and render_plain_forward(finding.case.function) is not None


def reproduced(finding: Finding, output: str, compact: bool, *, exception: str | None = None) -> bool:
    """Whether a repro's output (it exited 1) shows the finding: the generic comparison prints the verdict;
    a compact repro (NOTE [repro styles]) shows assert_close failing on two printed values, or ends on a
    traceback whose exception line (``exception``, else found in ``output``) has the finding's
    fingerprint (NOTE [the repro shows the bucket]): a repro that raises the other side's error, a
    documented limitation say, is refused."""
    verdict = finding.signature.verdict
    expect = finding.expect() if compact else None
    if expect is None:
        if verdict == "promise_broken":  # NOTE [promises]: the generic comparison knows no promises; it
            # shows one side's promised error beside the other side's value
            o = finding.outcome
            raising = o.functorch if not o.functorch.ok else o.reference
            one_sided = "verdict: error_functorch_only" in output or "verdict: error_reference_only" in output
            return one_sided and o.functorch.ok != o.reference.ok and (raising.error or "")[:60] in output
        return f"verdict: {verdict}" in output
    if expect.promise:  # NOTE [promises]
        return f"AssertionError: {PROMISE_MESSAGE}" in output
    if not expect.a_raises and not expect.b_raises:
        return "AssertionError" in output and "not close" in output
    side = finding.outcome.functorch if expect.last == 0 else finding.outcome.reference
    return shows_fingerprint(output, finding.signature.error, side, exception=exception)


def shows_fingerprint(output: str, fingerprint: str, side: Side, *, exception: str | None = None) -> bool:
    """Whether the last traceback in ``output`` ends on the error ``fingerprint`` names (its key: type and
    normalized message); without a fingerprint, whether ``side``'s error is a line of the output."""
    if not fingerprint:
        return shows_error(output, side)
    line = exception if exception is not None else exception_line(output)
    return line_key(line) == fingerprint.rsplit(" @ ", 1)[0]


def shows_error(output: str, side: Side) -> bool:
    """Whether a repro's output has ``side``'s error as a line of its own (its traceback's last), numbers
    and runs of whitespace aside (a message that starts with a space prints as "RuntimeError:  Cannot ...")."""
    digits = re.compile(r"[0-9]+")
    wanted = digits.sub("N", " ".join(f"{side.error_type}: {(side.error or '')[:60]}".split()))
    return any(digits.sub("N", " ".join(line.split())).startswith(wanted) for line in output.splitlines())


def exception_line(output: str) -> str | None:
    """The exception line of the last traceback in ``output``: the first line after ``Traceback (most
    recent call last):`` that is not a frame (frames and their code are indented); None without one."""
    lines = output.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last):")]
    if not starts:
        return None
    return next((line for line in lines[starts[-1] + 1 :] if line and not line[0].isspace()), None)


def line_key(line: str | None) -> str | None:
    """:func:`fuzzer.codegen.error_key.message_key` of a traceback's exception line (its type without the
    module path: ``torch._dynamo.exc.Unsupported`` as ``Unsupported``), the key a fingerprint starts
    with; None for no line."""
    m = re.match(r"([A-Za-z_][\w.]*)(?::(.*))?$", line or "")
    if m is None:
        return None
    return message_key(m.group(1).rsplit(".", 1)[-1], m.group(2) or "")


def run_repro(
    repro: Path,
    *,
    python: str = sys.executable,
    timeout: float = 600.0,
    pythonpath: str | Path | None = None,
    niceness: int | None = None,
) -> dict[str, Any]:
    """Run a repro script in a fresh interpreter (``pythonpath``: where the modules it imports live, for
    ``affuzz check``, as PYTHONPATH says them; ``niceness``: at least this, NOTE [background priority] in
    :mod:`fuzzer.publish.env_probe`); returns exit code, seconds and the output tail."""
    start = time.monotonic()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    proc = subprocess.Popen(
        [os.path.abspath(python) if os.sep in python else python, repro.name],  # it runs in repro's folder
        cwd=repro.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    if niceness is not None:
        with contextlib.suppress(OSError):  # it may have exited already
            os.setpriority(os.PRIO_PROCESS, proc.pid, max(os.getpriority(os.PRIO_PROCESS, 0), niceness))
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
        code, output = proc.returncode, stdout + stderr
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, _ = proc.communicate()
        code, output = None, f"timed out after {timeout} s\n{stdout or ''}"
    return {
        "exit_code": code,
        "seconds": round(time.monotonic() - start, 3),
        "python": python,
        "method": "subprocess",
        "output_tail": output[-2000:],
        "exception_line": exception_line(output),
    }


#: NOTE [fresh rerun]: the verdicts whose fork-server verification is repeated in a fresh interpreter.
FRESH_RERUN = ("value_mismatch", "slow")


@dataclasses.dataclass(frozen=True)
class Variant:
    """One way of writing a finding's repro (its ``stage()`` keywords), tried in :data:`VARIANTS`' order."""

    name: str
    stage: dict[str, bool]
    applies: Callable[[Finding], bool] = lambda finding: True
    compact: bool = True  # the repro ends compactly (else the generic comparison)
    new_text_only: bool = False  # tried only where it writes another repro.py than the variant before
    check_exception: bool = True  # the exception line must be the finding's too
    mark: str | None = None  # the key of ``result`` set True where it ran (``verified``: only if it reproduced)
    mark_verified: bool = False


#: The variants of a value or error finding's repro, simplest first; the first that reproduces is
#: published (NOTE [plain forward], NOTE [straight-line sides], NOTE [repro styles]).
VARIANTS = (
    # the Function replaced by its forward as a plain function, where that still shows the finding
    Variant(
        "plain_forward",
        {"plain": True},
        plain_possible,
        check_exception=False,
        mark="plain_forward",
        mark_verified=True,
    ),
    Variant("compact", {}),
    # where a gradient or tangent does not exist, the composed twins instead of straight-line sides
    Variant("composed_twins", {"straight": False}, lambda f: f.expect() is not None, new_text_only=True),
    # a compact repro that does not show the finding falls back to the generic comparison, which must
    Variant("generic", {"compact": False}, lambda f: f.expect() is not None, compact=False, mark="compact_failed"),
)


def _first_variant_that_reproduces(
    out: Path, staged: Path, finding: Finding, python: str, server: ForkServer | None
) -> tuple[bool, bool, dict[str, Any], Path]:
    """(verified, compact, the run's result, the staged dir) of the first of :data:`VARIANTS` whose repro
    reproduces the finding in a fresh process, else of the last one tried. ``staged``: the ``compact``
    variant, staged already."""
    verified, compact, result, text = False, True, {}, None
    fresh = True  # ``staged`` still holds the compact variant
    for v in VARIANTS:
        if not v.applies(finding):
            continue
        if v.stage or not fresh:
            staged = stage(out, finding, **v.stage)
        fresh = fresh and not v.stage
        new_text = (staged / "repro.py").read_text(encoding="utf-8")
        if v.new_text_only and new_text == text:
            continue
        text = new_text
        result = _run_staged(staged, python, server)
        exception = result["exception_line"] if v.check_exception else None
        verified = result["exit_code"] == 1 and reproduced(
            finding, result["output_tail"], compact=v.compact, exception=exception
        )
        compact = v.compact
        if v.mark is not None and (verified or not v.mark_verified):
            result[v.mark] = True
        if verified:
            break
    return verified, compact, result, staged


def verify_and_publish(
    out: Path,
    staged: Path,
    finding: Finding,
    *,
    python: str = sys.executable,
    case_timeout: float | None = 60.0,
    server: ForkServer | None = None,
) -> tuple[bool, Path]:
    """Run the staged repro in a fresh process (a fork-server child when ``server`` is given, see NOTE
    [verification fork server]); publish it as a finding if it exited 1 *and* showed the same finding
    (:func:`reproduced`: an unexpected crash also exits 1). A ``crash`` is verified by a plain run killed by
    a signal. A ``hang`` is verified by a plain run that does not finish within twice the per-case
    timeout, plus start-up. Returns (verified, final dir).

    NOTE [fresh rerun]
    A fork-server child starts from the server's memory (NOTE [verification fork server]), so the
    children of one server see one heap: a value torch never wrote (linearize's uninitialized results)
    comes out alike run after run in them (three of four children of one server printed the same three
    values) and differently in each fresh interpreter (ASLR, another allocation history). A hand check
    found value_mismatch-e5303d720e, a vmap-vs-loop "mismatch" of two such values, verified in a child
    and exiting 0 in every fresh ``python repro.py``. So a value finding verified in a child is published
    only once its repro also reproduces in a fresh interpreter (at the server's niceness); one that does
    not is kept under ``unverified/``, that run's exit code and output in ``fresh_rerun`` of finding.json
    (ClusterFuzz calls such testcases unreliable). A ``slow`` finding is re-run so too: its timings depend on
    what the process loaded before (a child of the preloaded server starts warm, a fresh interpreter does
    not), and a maintainer's ``python repro.py`` is the fresh one. Error findings keep the one run: an error is not made of memory torch
    never wrote."""
    verdict = finding.signature.verdict
    if verdict == "hang":
        result = run_repro(staged / "repro.py", python=python, timeout=2 * (case_timeout or 60.0) + 30)
        verified = result["exit_code"] is None
    elif verdict == "crash":
        # a worker died on this case (NOTE [campaign driver]): the repro must die by a signal too
        result = run_repro(staged / "repro.py", python=python, timeout=2 * (case_timeout or 60.0) + 30)
        verified = result["exit_code"] is not None and result["exit_code"] < 0
    else:
        verified, compact, result, staged = _first_variant_that_reproduces(out, staged, finding, python, server)
        if verified and server is not None and verdict in FRESH_RERUN:  # NOTE [fresh rerun]
            rerun = run_repro(
                staged / "repro.py", python=python, timeout=2 * (case_timeout or 60.0) + 30, niceness=VERIFY_NICENESS
            )
            verified = rerun["exit_code"] == 1 and reproduced(
                finding, rerun["output_tail"], compact=compact, exception=rerun["exception_line"]
            )
            result["fresh_rerun"] = {k: rerun[k] for k in ("exit_code", "seconds")} | (
                {} if verified else {"output_tail": rerun["output_tail"]}
            )
    dest_root = out / ("findings" if verified else "unverified")
    dest_root.mkdir(parents=True, exist_ok=True)
    dest = dest_root / staged.name
    atomic_write_json(staged / "finding.json", finding.record(result))
    if dest.exists():
        shutil.rmtree(dest)
    os.replace(staged, dest)
    return verified, dest


def _run_staged(staged: Path, python: str, server: ForkServer | None) -> dict[str, Any]:
    if server is None:
        return run_repro(staged / "repro.py", python=python)
    code, output, seconds = server.run(staged / "repro.py")
    return {
        "exit_code": code,
        "seconds": round(seconds, 3),
        "python": python,
        "method": "fork server",
        "output_tail": output[-2000:],
        "exception_line": exception_line(output),
    }


class Verifier:
    """Verifies staged findings on background threads (NOTE [the repro is what runs]), each with its own
    fork server; a verified finding becomes its bucket's published one. One thread while the campaign
    fuzzes (the cores are the workers'); :meth:`widen` adds threads once it stops, when findings published
    unshrunk at the end of the grace all wait at once. The driver stages, submits and collects; nothing
    here touches the bucket book except a bucket's ``status``, ``path`` and ``finding``."""

    def __init__(
        self,
        out: Path,
        *,
        python: str,
        case_timeout: float | None,
        log: Callable[[str], None],
    ) -> None:
        self.out = out
        self.python = python
        self.case_timeout = case_timeout
        self.log = log
        self._tasks: queue.SimpleQueue[Callable[[ForkServer | None], None] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._futures: list[tuple[Bucket[Finding], Future[None]]] = []
        self._locks: dict[str, threading.Lock] = {}  # NOTE [one staging folder per bucket]

    def start(self) -> None:
        self.widen(1)

    def widen(self, threads: int) -> None:
        """At least ``threads`` verification threads from now on."""
        while len(self._threads) < threads:
            t = threading.Thread(target=self._serve, name=f"affuzz-verify-{len(self._threads)}", daemon=True)
            self._threads.append(t)
            t.start()

    def _serve(self) -> None:
        server = ForkServer(self.python)  # started on its first script
        try:
            while (task := self._tasks.get()) is not None:
                task(server)
        finally:
            server.close()

    def submit(self, bucket: Bucket[Finding], finding: Finding) -> None:
        """Stage ``finding`` and verify it on a thread; on success it becomes the bucket's published
        repro, on failure a pending bucket becomes ``unverified``.

        NOTE [one staging folder per bucket]
        A bucket stages every finding it verifies in ``OUT/.pending/<id>/`` (a smaller repro of a verified
        bucket is verified again, NOTE [smallest repro]), and staging empties that folder. So the staging
        is done by the task, under the bucket's lock, never at submit: a later submit of the same bucket
        used to empty the folder while a verification ran its repro there (a fresh rerun of 11 s saw its
        own directory vanish and raised FileNotFoundError inside torch.func.grad)."""
        sig = bucket.signature
        lock = self._locks.setdefault(sig.id, threading.Lock())
        done: Future[None] = Future()

        def verify(server: ForkServer | None) -> None:
            try:
                with lock:
                    ok, path = verify_and_publish(
                        self.out,
                        stage(self.out, finding),
                        finding,
                        python=self.python,
                        case_timeout=self.case_timeout,
                        server=server,
                    )
            except Exception:  # noqa: BLE001 (a verification failure must not end the campaign)
                ok, path = False, None
                self.log(f"--- verifying {sig.id}\n{traceback.format_exc()}")
            if ok:
                bucket.status, bucket.path, bucket.finding = "verified", path, finding
            elif bucket.status == "pending":
                bucket.status, bucket.path = "unverified", path
            done.set_result(None)

        self._futures.append((bucket, done))
        self._tasks.put(verify)

    @property
    def pending(self) -> int:
        return sum(1 for _, f in self._futures if not f.done())

    def collect(self) -> list[Bucket[Finding]]:
        """The buckets whose verification finished since the last call."""
        done = [(b, f) for b, f in self._futures if f.done()]
        self._futures = [(b, f) for b, f in self._futures if not f.done()]
        for _, fut in done:
            fut.result()
        return [b for b, _ in done]

    def close(self) -> None:
        """Verify what is queued, then stop the threads and their fork servers."""
        if not self._threads and self._futures:
            self.start()
        for _ in self._threads:
            self._tasks.put(None)
        for t in self._threads:
            t.join()
        self._threads.clear()
