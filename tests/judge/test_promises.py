"""NOTE [promises]: where torch promises an error for a Function (its own check), a side that runs the same
Function in the same mode and returns a value has broken the promise: a finding of its own verdict, on real
torch. The same Function with a faithful jvp is consistent; a stack without forward AD never owes the error."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from fuzzer.ir.case import Case, FDef, FunctionDef, Inputs, Node, Output, Transform, View
from fuzzer.ir.features import features
from fuzzer.ir.oracles import MAIN
from fuzzer.ir.validate import validate
from fuzzer.judge.compare import load_registry
from fuzzer.judge.judge import Judge
from fuzzer.publish.verify import stage, verify_and_publish


def _case(*, not_view: bool, transforms: tuple[Transform, ...] = (Transform("jvp"),)) -> Case:
    # returns a view of x0 and x0 ** 2, saves x0 for backward and forward, a jvp rule; f adds both outputs
    fn = FunctionDef(
        n_inputs=1,
        nodes=(Node("pow", ("x0",)),),
        outputs=(Output("view", "x0", View("view_as")), Output("node", "t0")),
        saved=("x0",),
        jvp_rule=True,
        jvp_not_view=not_view,
    )
    return Case(fn, FDef(uses=(0, 1)), Inputs((2,), ((1.0, 2.0),)), transforms)


def test_the_promised_errors_are_registry_promises_with_their_sources() -> None:
    promises = {lim.name: lim for lim in load_registry() if lim.promise}
    assert set(promises) == {"jvp_of_input_alias_not_a_view", "saved_tensor_modified_in_place"}
    entry = promises["jvp_of_input_alias_not_a_view"]
    assert "custom_function.cpp" in entry.docs and "view" in entry.promise
    assert set(entry.requires) == {"side_forward_ad", "jvp_not_view"}
    saved = promises["saved_tensor_modified_in_place"]
    assert saved.docs.endswith("#in-place-correctness-checks")
    assert set(saved.promise_requires) == {
        "saved_output_modified_in_place",
        "side_reverse",
        "side_outputs_not_restacked",
        "side_without_saved_tensor_hooks",  # NOTE [checkpoint mode]: the hooks docs call it undefined behaviour
    }


def _dup_case(*, twice: bool) -> Case:
    # exp(x0) returned twice (or once), saved through output 0; f doubles the last output in place and
    # returns output 0: the saved tensor was modified in place
    outputs = (Output("node", "t0"), Output("node", "t0")) if twice else (Output("node", "t0"),)
    fn = FunctionDef(n_inputs=1, nodes=(Node("exp", ("x0",)),), outputs=outputs, saved=("o0",))
    return validate(
        Case(fn, FDef(uses=(0,), inplace=(len(outputs) - 1,)), Inputs((1,), ((0.5,),)), (Transform("grad"),))
    )


def test_a_side_that_computes_from_a_modified_saved_tensor_broke_the_version_check_promise() -> None:
    """torch.func.grad over a Function returning one tensor twice: the two outputs get wrappers that share
    storage but not a version counter, so backward reads the modified saved tensor without the check
    plain autograd makes (a hand check of the old corpus: error_reference_only-7339632378 and others)."""
    j = Judge()(_dup_case(twice=True), MAIN)
    assert (j.verdict, j.reason) == ("promise_broken", "saved_tensor_modified_in_place"), (j.verdict, j.fingerprint)
    assert j.outcome is not None and j.outcome.functorch.ok and not j.outcome.reference.ok
    assert "modified by an inplace operation" in j.fingerprint


def test_jacrev_of_a_function_with_a_hand_written_vmap_rule_owes_the_version_check() -> None:
    """The restacking exemption (side_outputs_not_restacked) is for a side whose Function forward runs on
    batched primals; jacrev vmaps only cotangents, the hand-written rule never runs, and torch.func's
    wrappers of the twice-returned tensor lose the version check as under grad (2.13 called this case
    'expected' while the rule was keyed on any vmap-ing transform). An explicit vmap still restacks."""
    case = _dup_case(twice=True)
    fn = replace(case.function, vmap_rule="custom")
    j = Judge()(validate(replace(case, function=fn, transforms=(Transform("jacrev"),))), MAIN)
    assert (j.verdict, j.reason) == ("promise_broken", "saved_tensor_modified_in_place"), (j.verdict, j.reason)
    assert j.outcome is not None and j.outcome.functorch.ok and not j.outcome.reference.ok


def test_torch_func_keeps_the_version_check_of_a_single_saved_output() -> None:
    """Both sides raise the same version-check error: they agree, nothing is broken."""
    j = Judge()(_dup_case(twice=False), MAIN)
    assert j.verdict == "consistent", (j.verdict, j.reason, j.fingerprint)
    assert j.outcome is not None and not j.outcome.functorch.ok and not j.outcome.reference.ok


def test_a_side_that_returns_where_forward_ad_raises_the_promised_error_is_promise_broken(
    judged_finding, tmp_path: Path
) -> None:
    case = _case(not_view=True)
    validate(case)
    assert "jvp_not_view" in features(case)
    finding, j = judged_finding(case, MAIN)
    assert j.verdict == "promise_broken", (j.verdict, j.reason, j.fingerprint)
    assert j.reason == "jvp_of_input_alias_not_a_view"
    assert j.outcome is not None and j.outcome.functorch.ok and not j.outcome.reference.ok
    assert "the jvp is not returning a view" in j.fingerprint
    assert finding.signature.kind == "promise_broken" and finding.signature.id.startswith("promise_broken-")
    verified, dest = verify_and_publish(tmp_path, stage(tmp_path, finding), finding)
    assert verified, (dest / "repro.py").read_text()
    text = (dest / "repro.py").read_text()
    assert ".clone()" in text and "torch.autograd.forward_ad" in text


def test_the_same_function_with_a_view_tangent_is_consistent() -> None:
    j = Judge()(_case(not_view=False), MAIN)
    assert j.verdict == "consistent", (j.verdict, j.reason, j.fingerprint)


def test_no_side_owes_the_error_without_forward_mode() -> None:
    """Under grad neither side runs forward AD: the jvp rule is never called, nothing is promised."""
    j = Judge()(_case(not_view=True, transforms=(Transform("grad"),)), MAIN)
    assert j.verdict == "consistent", (j.verdict, j.reason, j.fingerprint)


def test_no_promise_where_backward_never_runs() -> None:
    """run15's promise_broken-29be02d704: the output f returns is marked non-differentiable, so the loop
    side rightly runs no backward and returns zeros; torch.func.vmap's side raised the version error only
    because generate_vmap_rule lost mark_non_differentiable (corpus G7). The promise does not bind."""
    from fuzzer.ir.serde import case_from_json

    data = json.loads((Path(__file__).resolve().parents[1] / "data" / "nondiff_saved_modified_case.json").read_text())
    case = case_from_json(data)
    assert case.function.non_differentiable == case.f.uses
    j = Judge()(case, MAIN)
    assert j.verdict != "promise_broken", (j.verdict, j.reason, j.fingerprint)


def test_double_backward_through_once_differentiable_is_no_promise() -> None:
    """NOTE [promises]: torch.autograd.grad never reaches once_differentiable's error node (it hangs off
    detached stand-ins), and torch.func matches it on purpose (#90224): both sides agree, no finding."""
    fn = FunctionDef(
        n_inputs=1,
        nodes=(Node("pow", ("x0",), 3),),
        outputs=(Output("node", "t0"),),
        saved=("x0",),
        once_differentiable=True,
    )
    for stack in [(Transform("grad"), Transform("grad")), (Transform("autograd_grad"), Transform("grad"))]:
        j = Judge()(validate(Case(fn, FDef(uses=(0,)), Inputs((), ((1.5,),)), stack)), MAIN)
        assert j.verdict == "consistent", (stack, j.verdict, j.reason)
