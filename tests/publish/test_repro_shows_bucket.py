"""A published repro shows its bucket's bug, by construction (NOTE [the repro shows the bucket]), and
exits 0 once the bug is gone, either way (NOTE [repro exit status]). Real torch throughout."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from fuzzer.codegen.render import Expect, render
from fuzzer.ir.case import Case
from fuzzer.judge.execute import Outcome, Side
from fuzzer.publish.findings import expect_of
from fuzzer.publish.verify import exception_line, line_key, reproduced, stage, verify_and_publish

ON_2_0 = torch.__version__.startswith("2.0.")


def _side(error_type: str, message: str, frame: str = "") -> Side:
    return Side(None, error_type, message, frame, False, f"{error_type}: {message}")


def test_of_two_errors_the_uncaught_side_is_the_one_the_fingerprint_names() -> None:
    documented = _side("RuntimeError", "You must implement the jvp function for custom autograd.Function")
    unexplained = _side("RuntimeError", "The expanded size of the tensor must match", "torch/x.py:y")
    for a, b, last in ((documented, unexplained, 1), (unexplained, documented, 0)):
        o = Outcome("different_errors", a, b, 0.0)
        fingerprint = (a if last == 0 else b).fingerprint
        e = expect_of("different_errors", o, fingerprint)
        assert e is not None and (e.a_raises, e.b_raises, e.last) == (True, True, last)
        assert e.other is not None and "You must implement the jvp" in e.other  # the documented one: a comment
    # an error found on side B alone, and a torch bug on side B while side A raised a documented error
    o = Outcome("torch_bug_error", documented, replace(unexplained, torch_bug=True), 0.0)
    assert expect_of("torch_bug_error", o, o.reference.fingerprint).last == 1


def test_the_exception_line_is_read_from_the_last_traceback() -> None:
    output = "\n".join(
        [
            "printed: tensor(1.)",
            "Traceback (most recent call last):",
            '  File "repro.py", line 3, in <module>',
            "    raise ValueError('first')",
            "ValueError: first",
            "",
            "During handling of the above exception, another exception occurred:",
            "",
            "Traceback (most recent call last):",
            '  File "repro.py", line 5, in <module>',
            "    torch.func.jacfwd(f)(x)",
            "    ^^^^^^^^^^^^^^^^^^^^^^^",
            "torch._dynamo.exc.Unsupported: Expected 3 dims, got 12 [at dim 0]",
            "more lines of the message",
        ]
    )
    assert exception_line(output) == "torch._dynamo.exc.Unsupported: Expected 3 dims, got 12 [at dim 0]"
    assert line_key(exception_line(output)) == "Unsupported: Expected N dims, got N [...]"
    assert exception_line("no traceback here") is None and line_key(None) is None
    assert line_key("AssertionError") == "AssertionError: "


def _run(text: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "repro.py"
    script.write_text(text)
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)


@pytest.mark.skipif(ON_2_0, reason="on torch 2.0.1 the seed's bug is there (exit 1)")
def test_the_seed_repro_exits_0_where_both_sides_raise_the_same_documented_error(
    seed_case: Case, tmp_path: Path
) -> None:
    """On torch >= 2.1 both modes refuse the seed's Function with one documented error: the published repro
    of the seed's value mismatch prints both errors and exits 0 (the bug is gone), not 1."""
    text = render(seed_case, header=["h", "h"], style="repro", expect=Expect())
    proc = _run(text, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("returned as-is as output is being saved for backward") == 2, proc.stdout


DOCUMENTED_A = Path(__file__).resolve().parents[1] / "data" / "different_errors_documented_a.json"


@pytest.mark.skipif(not torch.__version__.startswith("2.13"), reason="a real torch 2.13 pair of errors")
def test_a_pair_whose_functorch_error_is_documented_publishes_the_other_side(tmp_path: Path, judged_finding) -> None:
    """A real pair (torch 2.13, found by a campaign): side A's error is documented (a Function without
    a jvp rule under forward AD), side B's is the bug. The published repro raises side B's error; a repro
    that raises side A's is refused by verification."""
    from fuzzer.ir.serde import load

    case = load(str(DOCUMENTED_A))
    f, _ = judged_finding(case, "forward_over_reverse")
    assert f.signature.verdict == "different_errors"
    assert "You must implement the jvp function" in f.outcome.functorch.summary()
    assert f.signature.error == f.outcome.reference.fingerprint  # the bucket is side B's error
    out = tmp_path / "out"
    ok, dest = verify_and_publish(out, stage(out, f), f, python=sys.executable)
    assert ok, (dest / "finding.json").read_text()
    text = (dest / "repro.py").read_text()
    assert "The expanded size of the tensor" in text.splitlines()[0]  # the header names side B's error
    proc = _run(text, tmp_path)
    assert proc.returncode == 1
    assert exception_line(proc.stderr).startswith("RuntimeError: The expanded size of the tensor")
    assert "You must implement the jvp" in text  # side A's result only as a comment
    # the other ending: side A run uncaught, its documented error last: not this bucket's repro
    wrong = replace(f.expect(), last=0, other=f.outcome.reference.summary(100))
    proc = _run(render(case, header=["h", "h"], oracle=f.signature.oracle, style="repro", expect=wrong), tmp_path)
    assert proc.returncode == 1 and "You must implement the jvp" in exception_line(proc.stderr)
    assert not reproduced(f, proc.stdout + proc.stderr, compact=True)
