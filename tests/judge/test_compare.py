"""Verdicts, the per-side known-limitations registry and the judge, on real torch runs and on records.

Each class of unsound verdict from issue 11 has a hand-written case here (NOTE [valid comparisons],
NOTE [error buckets], NOTE [declared derivative]).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from fuzzer.codegen import repro_lib
from fuzzer.ir.case import Case, FDef, FunctionDef, Inputs, Node, Output, Transform, View
from fuzzer.ir.validate import validate
from fuzzer.ir.validity import SideInfo, sides
from fuzzer.judge.compare import RegistryError, classify, load_registry
from fuzzer.judge.execute import Outcome, Side, run_case
from fuzzer.judge.judge import Judge

FUNCTORCH = SideInfo(("R",), True, True, False)
CREATE_GRAPH = SideInfo(("R",), False, False, False)


def _case(fn: FunctionDef, transforms: list[Transform], *, uses=(0,), shape=(), values=(1.5,), dtype="float64") -> Case:
    return validate(Case(fn, FDef(uses=tuple(uses)), Inputs(shape, (tuple(values),), dtype), tuple(transforms)))


def test_legacy_forward_under_functorch_is_expected(seed_case: Case) -> None:
    legacy = replace(seed_case, function=replace(seed_case.function, style="legacy"))
    j = Judge()(legacy, "functorch_vs_create_graph")
    assert j.outcome is not None and j.outcome.verdict == "error_functorch_only"
    assert (j.verdict, j.reason) == ("expected", "legacy_forward_under_functorch")


def test_vmap_without_rule_is_expected(planted_case: Case) -> None:
    no_rule = replace(planted_case, function=replace(planted_case.function, vmap_rule="none"))
    j = Judge()(no_rule, "functorch_vs_create_graph")
    assert (j.verdict, j.reason) == ("expected", "vmap_without_rule")


def test_planted_vmap_bug_is_a_value_mismatch(planted_case: Case) -> None:
    assert Judge()(planted_case, "functorch_vs_create_graph").verdict == "value_mismatch"
    correct = replace(planted_case, function=replace(planted_case.function, vmap_rule="custom"))
    assert run_case(correct).verdict == "consistent"


def test_side_b_of_a_metamorphic_oracle_gets_its_limitations_too() -> None:
    # jacrev vs jacfwd without a vmap rule: jacfwd (side B) vmaps the Function and raises the documented
    # error; side B runs torch.func, so the registry explains it there (once: error_reference_only)
    fn = FunctionDef(1, (Node("pow", ("x0",), 3),), (Output("node", "t0"),), saved=("x0",), jvp_rule=True)
    case = _case(fn, [Transform("jacrev")], shape=(2,), values=(1.5, 0.5))
    j = Judge()(case, "jacrev_vs_jacfwd")
    assert j.outcome is not None and not j.outcome.reference.ok
    assert (j.verdict, j.reason) == ("expected", "vmap_without_rule")


def test_a_limitation_applies_only_where_its_conditions_hold(seed_case: Case) -> None:
    # the vmap message on a Function that *has* a vmap rule, or from a side that runs no vmap, is unexplained
    err = Side(None, "RuntimeError", "You tried to vmap over Fn, but it does not have vmap support")
    ok = Side("tensor(1.)", None, None)
    with_rule = replace(seed_case, function=replace(seed_case.function, vmap_rule="generate"))
    reg = load_registry()
    assert (
        classify(Outcome("error_functorch_only", err, ok, 0), reg, seed_case, (FUNCTORCH, CREATE_GRAPH)).verdict
        == "expected"
    )
    assert (
        classify(Outcome("error_functorch_only", err, ok, 0), reg, with_rule, (FUNCTORCH, CREATE_GRAPH)).verdict
        == "error_functorch_only"
    )
    assert (
        classify(Outcome("error_reference_only", ok, err, 0), reg, seed_case, (FUNCTORCH, CREATE_GRAPH)).verdict
        == "error_reference_only"
    )


def test_expected_needs_both_sides_explained(seed_case: Case) -> None:
    documented = Side(None, "RuntimeError", "You tried to vmap over Fn, but it does not have vmap support")
    unexplained = Side(None, "AttributeError", "'NoneType' object has no attribute 'shape'", "torch/x.py:f")
    c = classify(
        Outcome("different_errors", documented, unexplained, 0), load_registry(), seed_case, (FUNCTORCH, FUNCTORCH)
    )
    assert c.verdict == "different_errors"
    assert c.fingerprint == unexplained.fingerprint  # the bucket is the unexplained error


def test_a_torch_bug_is_a_finding_whatever_the_other_side_did(seed_case: Case) -> None:
    bug = Side(None, "RuntimeError", 'is_inplace_op INTERNAL ASSERT FAILED at "autograd_meta.cpp":123', torch_bug=True)
    documented = Side(None, "RuntimeError", "You tried to vmap over Fn, but it does not have vmap support")
    c = classify(Outcome("torch_bug_error", bug, documented, 0), load_registry(), seed_case, (FUNCTORCH, FUNCTORCH))
    assert c.verdict == "torch_bug_error" and "INTERNAL ASSERT" in c.fingerprint and "vmap" not in c.fingerprint


def test_internal_assert_from_real_torch_is_a_finding() -> None:
    # A Function with a jvp rule that returns the same tensor twice: forward AD trips an internal assert
    # in torch 2.13 (autograd_meta.cpp is_inplace_op) under plain dual tensors
    fn = FunctionDef(
        1, (Node("pow", ("x0",), 2),), (Output("node", "t0"), Output("node", "t0")), saved=("x0",), jvp_rule=True
    )
    case = _case(fn, [Transform("jvp")], uses=(0, 1))
    j = Judge()(case, "functorch_vs_create_graph")
    assert j.outcome is not None and j.outcome.reference.torch_bug  # a real torch 2.13 bug (corpus G6)
    assert j.verdict == "torch_bug_error" and "INTERNAL ASSERT" in j.fingerprint


def test_float32_errors_are_findings_without_a_float64_recheck() -> None:
    # NOTE [float32 findings]: only value mismatches are re-checked; an error in float32 stays a finding.
    # generate_vmap_rule + mark_dirty under vmap: a real torch 2.13 error (corpus G9)
    from fuzzer.ir.serde import load

    case = load(str(Path(__file__).resolve().parents[2] / "corpus" / "error_functorch_only-6be8afd306" / "case.json"))
    narrow = replace(case, inputs=replace(case.inputs, dtype="float32"))
    j = Judge()(narrow, "functorch_vs_create_graph")
    assert j.verdict == "error_functorch_only" and not j.float32_noise


def test_script_verdicts() -> None:
    ns = {
        **vars(repro_lib),
        "ERRORS": {
            (True, True): "different_errors",
            (True, False): "error_functorch_only",
            (False, True): "error_reference_only",
        },
    }
    verdict = ns["verdict"]
    t = torch.ones(2)
    assert verdict.__globals__ is vars(repro_lib)
    repro_lib.ERRORS = ns["ERRORS"]  # type: ignore[attr-defined]
    try:
        assert verdict(RuntimeError("size 3"), RuntimeError("size 4")) == "consistent"  # numbers ignored
        assert verdict(RuntimeError("a"), RuntimeError("b")) == "different_errors"  # same type, other message
        assert verdict(RuntimeError("a"), ValueError("a")) == "different_errors"
        assert verdict((t,), t) == "structure_mismatch"
        assert verdict(t, t.double()) == "structure_mismatch"
        assert verdict(t, t * 2) == "value_mismatch"
        # bit-for-bit equal values skip assert_close; values within its tolerance, NaNs in the same places
        # and a mismatch inside a tuple are judged by it as before
        nan = torch.tensor([1.0, float("nan")])
        assert repro_lib.identical((t, (t,)), (t.clone(), (t.clone(),))) and not repro_lib.identical(nan, nan.clone())
        assert verdict((t, (t,)), (t.clone(), (t.clone(),))) == "consistent"
        assert verdict(t, t + 1e-7) == "consistent" and verdict(nan, nan.clone()) == "consistent"
        assert verdict((t, t), (t, t * 2)) == "value_mismatch"
        assert (
            verdict(RuntimeError("x INTERNAL ASSERT FAILED y"), RuntimeError("x INTERNAL ASSERT FAILED y"))
            == "torch_bug_error"
        )
        assert verdict(t, RuntimeError("please report a bug to PyTorch")) == "torch_bug_error"
        assert verdict(AssertionError("flat_bdims must not be None"), t) != "torch_bug_error"  # not raised in torch
    finally:
        del repro_lib.ERRORS  # type: ignore[attr-defined]


def test_overflow_is_nonfinite_not_a_finding() -> None:
    fn = FunctionDef(
        1,
        (Node("exp", ("x0",)), Node("exp", ("t0",)), Node("exp", ("t1",))),
        (Output("node", "t2"),),
        saved=("t2", "t1", "t0"),
        jvp_rule=True,
        vmap_rule="generate",
    )
    case = _case(fn, [Transform("jacrev")], shape=(2,), values=(2.0, 1.0), dtype="float32")
    # f is only checked for overflow where the sides disagree: jacrev and jacfwd round the infinities
    # differently; torch.func and create_graph give the same infinities, which assert_close accepts
    assert Judge(subject="function")(case, "jacrev_vs_jacfwd").verdict == "nonfinite"
    assert Judge(subject="function")(case, "functorch_vs_create_graph").verdict == "consistent"


# ------------------------------------------------------------------------ valid comparisons


def _dropped(kind: str) -> FunctionDef:
    """x -> (x**3, sin(x) or x.view_as(x)), backward ignores the second output's grad; f uses both."""
    second = Output("node", "t1") if kind == "node" else Output("view", "x0", View("view_as"))
    nodes = (Node("pow", ("x0",), 3), Node("sin", ("x0",))) if kind == "node" else (Node("pow", ("x0",), 3),)
    return FunctionDef(
        1, nodes, (Output("node", "t0"), second), saved=("x0",), unused_grads=(1,), jvp_rule=True, vmap_rule="generate"
    )


def test_backward_and_jvp_that_drop_the_same_term_are_compared() -> None:
    case = _case(_dropped("node"), [Transform("jacrev")], uses=(0, 1), shape=(2,), values=(1.5, 0.5))
    j = Judge()(case, "jacrev_vs_jacfwd")
    assert j.verdict == "consistent"  # run, and both rules declare the same (dropped) derivative


def test_a_dropped_grad_the_jvp_cannot_drop_is_not_compared_across_rules() -> None:
    # the dropped output is a view of the input: forward AD forces its tangent to be a view of the input's
    case = _case(_dropped("input"), [Transform("jacrev")], uses=(0, 1), shape=(2,), values=(1.5, 0.5))
    j = Judge()(case, "jacrev_vs_jacfwd")
    assert (j.verdict, j.reason) == ("not_applicable", "backward_vs_jvp_first_order")
    # ... but the main oracle (the same backward on both sides) still runs: the seed's class stays testable
    assert Judge()(case, "functorch_vs_create_graph").verdict != "not_applicable"
    # and when the Function itself is under test, the disagreement of its rules is shown
    assert Judge(subject="function")(case, "jacrev_vs_jacfwd").verdict == "value_mismatch"


def test_second_order_through_a_detached_save_is_not_compared_to_the_jvp() -> None:
    fn = FunctionDef(
        1,
        (Node("pow", ("x0",), 3),),
        (Output("node", "t0"),),
        saved=("x0",),
        detached=("x0",),
        jvp_rule=True,
        vmap_rule="generate",
    )
    case = _case(fn, [Transform("jacrev"), Transform("jacrev")])
    a, b = sides(case, "jacrev_vs_jacfwd")
    assert a.path == ("R", "R") and b.path == ("F", "R")
    assert Judge()(case, "jacrev_vs_jacfwd").reason == "backward_second_order"
    assert Judge()(case, "functorch_vs_create_graph").verdict != "not_applicable"


def test_oracles_never_leave_the_grammar() -> None:
    from fuzzer.ir.oracles import alternate_stack, applicable

    fn = FunctionDef(1, (Node("pow", ("x0",), 3),), (Output("node", "t0"),), saved=("x0",), jvp_rule=True)
    case = _case(fn, [Transform("jacrev"), Transform("jvp")])
    assert alternate_stack(case, "jacrev_vs_jacfwd") is None  # jacfwd over jvp: two forward levels
    assert "jacrev_vs_jacfwd" not in applicable(case)


# ------------------------------------------------------------------------------------ registry


def test_registry_entries_cite_documentation() -> None:
    for lim in load_registry():
        assert lim.docs.startswith("https://"), lim.name
        assert lim.requires, lim.name


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"name": "x", "requires": ["sideways"], "pattern": "a", "docs": "d"}, "unknown condition(s) ['sideways']"),
        ({"name": "x", "requires": ["side_vmap"], "pattern": "(", "docs": "d"}, "bad pattern"),
        ({"name": "x", "requires": [], "pattern": "a", "docs": "d"}, "requires must list at least one condition"),
        ({"name": "x", "pattern": "a"}, "needs name, requires, pattern and docs"),
    ],
)
def test_bad_registry_is_named(tmp_path: Path, entry: dict, message: str) -> None:
    path = tmp_path / "lims.json"
    path.write_text(json.dumps({"schema_version": 2, "limitations": [entry]}))
    with pytest.raises(RegistryError) as info:
        load_registry(path)
    assert str(path) in str(info.value) and message in str(info.value)


# ------------------------------------------------------------------------------- one bug, one bucket


def test_one_torch_error_is_one_bucket_across_oracles_stacks_and_verdicts() -> None:
    from fuzzer.triage.signature import Signature

    fp = "AssertionError: flat_bdims must not be None @ torch/_functorch/vmap.py:wrap_batched"
    ids = {
        Signature("error_functorch_only", "functorch_vs_create_graph", ("vmap",), ("mark_dirty",), fp).id,
        Signature("different_errors", "vmap_vs_loop", ("hessian", "vmap"), (), fp).id,
        Signature("error_reference_only", "jacrev_vs_jacfwd", ("jacrev",), ("custom_jvp",), fp).id,
    }
    assert len(ids) == 1 and ids.pop().startswith("error-")
    other = Signature("error_functorch_only", "functorch_vs_create_graph", ("vmap",), (), fp.replace("flat", "x"))
    assert other.id.startswith("error-") and other.id != Signature("error_functorch_only", "x", (), (), fp).id


def test_error_keys_ignore_numbers_brackets_and_generated_class_names() -> None:
    a = RuntimeError(
        "one of the variables needed for gradient computation has been modified by an inplace operation: "
        "[torch.FloatTensor [1, 1]], which is output 1 of FnGenerated, is at version 1; expected version 0"
    )
    b = RuntimeError(
        "one of the variables needed for gradient computation has been modified by an inplace operation: "
        "[torch.DoubleTensor [2]], which is output 0 of Fn, is at version 2; expected version 1"
    )
    assert repro_lib.error_key(a) == repro_lib.error_key(b)
    assert repro_lib.error_key(RuntimeError("Output 1 of FnGenerated is a view")) == repro_lib.error_key(
        RuntimeError("Output 2 of Fn is a view")
    )


def test_derivatives_are_not_exact_past_first_order_through_an_ignored_saved_output(seed_case: Case) -> None:
    from fuzzer.ir.features import derivatives_exact

    # the seed saves the output it ignores the grad of: its declared second derivative is not the true one
    assert not derivatives_exact(seed_case)
    one_level = replace(seed_case, transforms=seed_case.transforms[1:])
    assert derivatives_exact(one_level)


def test_torch_fx_generated_code_is_released_after_a_case() -> None:
    """NOTE [generated code and linecache]: linearize traces with make_fx, which registers the graph's
    code with linecache and torch.fx's loader; after the case nothing of it is left."""
    import linecache
    import sys

    fn = FunctionDef(1, (Node("pow", ("x0",), 3),), (Output("node", "t0"),), saved=("x0",), jvp_rule=True)
    outcome = run_case(_case(fn, [Transform("linearize", argnums=0)]))
    assert outcome.verdict == "consistent"
    assert "torch.fx.graph_module" in sys.modules  # linearize did trace
    assert not [k for k in linecache.cache if str(k).startswith("<eval_with_key>")]
    assert sys.modules["torch.fx.graph_module"]._loader.eval_cache == {}


def test_one_exec_per_case_judges_every_oracle_as_its_own_script_does() -> None:
    """NOTE [one exec per case]: Judge.all runs the oracles of a case from one script, side A once;
    every verdict, reason and error fingerprint is the one the oracle's own script gives."""
    from fuzzer.gen.streams import Decoder
    from fuzzer.ir.oracles import applicable

    decoder, judge = Decoder(8, {"max_depth": 2}), Judge()
    multi = 0
    for k in range(40):
        case = decoder.draw(0, k)
        if case is None:
            continue
        oracles = applicable(case)
        multi += len(oracles) > 1
        together = judge.all(case, oracles)
        alone = [judge(case, o) for o in oracles]
        assert [(j.oracle, j.verdict, j.reason, j.fingerprint) for j in together] == [
            (j.oracle, j.verdict, j.reason, j.fingerprint) for j in alone
        ], case
    assert multi >= 5
