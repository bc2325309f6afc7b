"""``affuzz check`` on Functions and custom ops as libraries ship them (tests/check/library_functions.py): the
inputs it draws and is given, what a Function declares, what a check may cost, custom ops, and a module
checked whole giving the same table as its Functions one by one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from fuzzer.check.engine import Checker, TargetReport, Verdict
from fuzzer.check.inputs import parse_inputs, split_items
from fuzzer.check.output import Writer
from fuzzer.check.targets import resolve
from fuzzer.cli import main
from fuzzer.codegen.check_render import RULE_ORACLES
from fuzzer.ir.target import TargetError

MODULE = "tests.check.library_functions"
HAS_CUSTOM_OP = hasattr(torch.library, "custom_op")


@pytest.fixture(scope="module")
def checker() -> Checker:
    return Checker(compile=None, timeout=120)


def _target(name: str, **kw):
    (t,) = resolve(f"{MODULE}:{name}", **kw)
    return t


def test_rule_oracle_tables_are_complete() -> None:
    """Every rule oracle has a row in each table that reads it (docs/internals.md), and nothing else does."""
    from fuzzer.check.engine import _RULE_INFO
    from fuzzer.check.output import _SHORT
    from fuzzer.codegen.check_render import FD_ORACLES, FD_RULES, RULE_SIDES, SECOND_ORDER

    rules = set(RULE_ORACLES)
    assert set(RULE_SIDES) == set(_RULE_INFO) == rules and rules <= set(_SHORT)
    assert set(FD_RULES) == set(FD_ORACLES) and set(SECOND_ORDER.values()) <= set(FD_ORACLES) <= rules


def test_inputs_grammar() -> None:
    """NOTE [check inputs]: items split at top-level commas; constants of every kind."""
    assert split_items("=[[0], [1]],3x4, =(1, 2)") == ["=[[0], [1]]", "3x4", "=(1, 2)"]
    args = parse_inputs("3x4,3:int64,2:bool,3x4:const,=[[0], [1]],@math:sin,scalar:float32")
    assert [(a.kind, a.shape, a.dtype) for a in args] == [
        ("tensor", (3, 4), "float64"),
        ("const", (3,), "int64"),
        ("const", (2,), "bool"),
        ("const", (3, 4), "float64"),
        ("const", (), "float64"),
        ("import", (), "float64"),
        ("tensor", (), "float32"),
    ]
    assert args[4].literal == "[[0], [1]]" and args[5].literal == "math:sin"
    with pytest.raises(TargetError, match="at least one floating-point tensor"):
        parse_inputs("3:int64")


def test_samples_reach_negative_arguments_and_second_order_covers_every_input(checker) -> None:
    """The mixed sample finds a double backward wrong only for negative arguments; second order w.r.t.
    every pair of inputs finds a rule that ignores its second input's dependence on the first."""
    t = _target("SoftplusSecondOrderWrongWhenNegative")
    assert [s.sample for s in t.samples] == ["positive", "mixed", "special"]
    v, each = checker.rules(t, "double_backward_vs_fd")
    assert (v.verdict, each["positive"].verdict, each["mixed"].verdict) == (
        "value_mismatch",
        "consistent",
        "value_mismatch",
    )
    assert checker.rules(t, "backward_vs_fd")[0].verdict == "consistent"
    both = _target("ScaleBoth")
    assert [a.name for a in both.args] == ["x", "w"]
    v, _ = checker.rules(both, "double_backward_vs_fd")
    assert v.verdict == "value_mismatch" and "dx dw" in v.outcome.functorch.value + v.outcome.reference.value


def test_a_kink_is_never_a_finding_and_declared_rules_are_not_compared_with_fd(checker) -> None:
    relu = _target("Relu")
    v, each = checker.rules(relu, "backward_vs_fd")
    assert each["special"].verdict == "not_smooth" and "one-sided differences" in each["special"].reason
    assert v.verdict == "consistent" and not v.finding
    ste = _target("StraightThroughRound")
    assert ste.not_derivative == ("backward",)
    v, _ = checker.rules(ste, "backward_vs_fd")
    assert (v.verdict, v.reason) == ("expected", "declared not the derivative: backward")


def test_non_differentiable_outputs_ints_and_given_samples(checker) -> None:
    top = _target("TopValues", inputs="2x4,=2")
    assert top.outputs == (0,)  # the indices, marked non-differentiable, are not f's
    assert [a.name for a in top.args] == ["x", "k"]
    assert checker.rules(top, "backward_vs_fd")[0].verdict == "consistent"
    g = _target("Gather", inputs_from=f"{MODULE}:gather_samples")
    assert [s.sample for s in g.samples] == ["inputs-from[0]", "inputs-from[1]"]
    assert [a.kind for a in g.args] == ["tensor", "given", "given"] and g.samples[1].shapes == [(2, 2)]
    for oracle in ("backward_vs_fd", "double_backward_vs_fd"):
        assert checker.rules(g, oracle)[0].verdict == "consistent"


def test_budgets_are_notes_the_check_goes_on_and_results_are_written_as_they_come(tmp_path: Path) -> None:
    """NOTE [check budgets]: past --max-memory or the timeout a script is a note, never a finding, and the
    next one runs; check.json is written after each target, complete only at the end."""
    guarded = Checker(compile=None, max_memory_mb=512, timeout=1.0)
    v = guarded.rule(_target("AllocatesInBackward"), "backward_vs_fd")
    assert v.verdict == "memory" and not v.finding
    v = guarded.rule(_target("SlowBackward", inputs="2"), "backward_vs_fd")
    assert v.verdict == "timeout" and not v.finding
    relu = _target("Relu")
    assert guarded.rule(relu, "backward_vs_fd").verdict == "consistent"  # the next script runs
    writer = Writer(tmp_path, {"target": MODULE})
    report = TargetReport(relu, rules={o: Verdict("consistent") for o in RULE_ORACLES})
    writer.add(report)
    partial = json.loads((tmp_path / "check.json").read_text())
    assert partial["complete"] is False and [t["title"] for t in partial["targets"]] == [relu.title]
    assert writer.finish()["complete"] is True
    assert "| tests.check.library_functions:Relu | ok |" in (tmp_path / "table.md").read_text()


@pytest.mark.skipif(not HAS_CUSTOM_OP, reason="torch.library.custom_op: torch >= 2.4")
def test_custom_ops_faithful_and_wrong_backward(tmp_path: Path) -> None:
    """NOTE [check custom ops]: the faithful op has no rule finding and passes opcheck (exit 0; its torch
    finding, torch.func.grad refusing an op, is known upstream and fails nothing by default); the op whose
    backward is wrong has its backward rule finding, in a user's test as on the command line."""
    from fuzzer.testing import assert_function_consistent
    from tests.check.library_functions import wrong_square

    argv = ["check", f"{MODULE}:cube", "--compile-backend", "none", "--max-cases", "2", "--out", str(tmp_path)]
    assert main(argv) == 0
    (cube,) = json.loads((tmp_path / "check.json").read_text())["targets"]
    assert not [f for f in cube["findings"] if f["kind"] == "function"]
    rules = {o: r["verdict"] for o, r in cube["rules"].items()}
    assert rules["opcheck"] == rules["backward_vs_fd"] == rules["double_backward_vs_fd"] == "consistent"
    assert rules["jvp_vs_fd"] == "not_applicable"
    assert [f["known_upstream"] for f in cube["findings"]] == ["#168393"]
    with pytest.raises(AssertionError) as e:
        assert_function_consistent(wrong_square, max_cases=1, compile_backend=None)
    text = str(e.value)
    assert "value_mismatch under backward_vs_fd" in text and "wrong_square(x0)" in text
    assert f"from {MODULE} import wrong_square" in text


def test_a_module_gives_the_same_table_as_its_functions_one_by_one(tmp_path: Path) -> None:
    """NOTE [leaked torch state], the compile oracle on: Entmax15's compiled jacfwd > hessian fails inside
    Dynamo's tracing and leaves torch's dispatch key sets changed; before affuzz check recorded and repaired
    torch's state around every script, as a campaign worker does, Swish, checked after it in the same
    module, showed its correct backward as a disagreement that no repro reproduced. Exit status: Swish
    alone has torch findings only (eager torch.func refuses a forward(ctx, ...) Function, compiled returns a
    value), which fail nothing by default."""
    stacks = ["--stacks", "jacfwd>hessian"]
    module = "tests.check.activations"
    assert main(["check", f"{module}:Swish", *stacks, "--out", str(tmp_path / "Swish")]) == 0
    swish = (tmp_path / "Swish" / "table.md").read_text().splitlines()[2]
    assert main(["check", module, *stacks, "--out", str(tmp_path / "module")]) == 1
    entmax, swish_after = (tmp_path / "module" / "table.md").read_text().splitlines()[2:]
    assert swish_after == swish  # Entmax15, first in the module, is checked alone there
    # Entmax15's own fault: its double backward differentiates sqrt at the zeros of a sparse output
    assert entmax.startswith("| tests.check.activations:Entmax15 | ok | n/a | n/a | FINDING value_mismatch |")
    # compiled, Dynamo inlines the forward where eager torch.func refuses a forward(ctx, ...) Function
    assert swish.endswith(" | 0 ok, 1 known (#193279) |")
