"""NOTE [checkpoint mode]: the oracle checkpoint_vs_plain on real torch, and compiled autograd as a choice of
the compiled mode; their documented limitations are expected only where their conditions hold."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fuzzer.codegen.render import render
from fuzzer.ir.case import (
    CHECKPOINT_KINDS,
    Case,
    Checkpoint,
    Compile,
    FDef,
    FunctionDef,
    Inputs,
    Node,
    Output,
    Transform,
)
from fuzzer.ir.oracles import CHECKPOINT, COMPILED, apis_needed, applicable
from fuzzer.ir.validate import validate
from fuzzer.judge import apis as apis_module
from fuzzer.judge.apis import API_PROBES, API_REASONS, api_missing
from fuzzer.judge.judge import Judge
from fuzzer.triage.reduce import PASSES


def _case(k: Checkpoint | None, *, stack: tuple[str, ...] = ("autograd_grad", "grad"), inplace: bool = False) -> Case:
    """exp(x) * x, x and the product saved; f doubles the output in place after apply where ``inplace``."""
    nodes = (Node("exp", ("x0",)), Node("mul", ("t0", "x0")))
    fn = FunctionDef(1, nodes, (Output("node", "t1"),), saved=("x0", "o0"))
    f = FDef(inplace=(0,), inplace_no_grad=True) if inplace else FDef()
    levels = tuple(Transform(t, batch_size=2) if t == "vmap" else Transform(t) for t in stack)
    values = (0.5, 1.5, 0.25, 1.0) if "vmap" in stack else (0.5, 1.5)
    return validate(Case(fn, f, Inputs((2,), (values,)), levels, checkpoint=k))


def _available(kind: str) -> bool:
    return all(api_missing(a) is None for a in apis_needed(_case(Checkpoint(kind)), CHECKPOINT))


@pytest.mark.parametrize("kind", CHECKPOINT_KINDS)
def test_every_kind_computes_what_plain_autograd_does_to_second_order(kind: str) -> None:
    case = _case(Checkpoint(kind, "plain"))
    assert applicable(case)[-1] == CHECKPOINT
    j = Judge()(case, CHECKPOINT)
    if not _available(kind):
        assert (j.verdict, j.reason) == ("not_applicable", "selective_checkpoint_unavailable")
        return
    assert j.verdict == "consistent", (j.verdict, j.reason, j.fingerprint)


def test_torch_func_reverse_mode_refuses_saved_tensor_hooks_by_design() -> None:
    """Inside torch.func.grad, f under saved-tensor hooks raises: documented, expected; under jvp (forward
    mode) nothing refuses the hooks, and the values agree."""
    j = Judge()(_case(Checkpoint("hooks", "inside")), CHECKPOINT)
    assert (j.verdict, j.reason) == ("expected", "functorch_reverse_with_saved_tensor_hooks"), j.fingerprint
    assert j.outcome is not None and j.outcome.functorch.ok
    j = Judge()(_case(Checkpoint("hooks_copy", "inside"), stack=("vmap",)), CHECKPOINT)
    assert j.verdict == "consistent", (j.verdict, j.reason, j.fingerprint)


def test_a_saved_output_modified_in_place_under_hooks_is_no_broken_promise() -> None:
    """Plain autograd's version check raises; the hooks docs call an in-place change of a hooked tensor
    undefined behaviour, so the hooked side owes nothing: expected, not promise_broken."""
    j = Judge()(_case(Checkpoint("hooks_copy", "plain"), inplace=True), CHECKPOINT)
    assert j.verdict == "expected" and "saved_tensor_modified_in_place" in (j.reason or ""), (j.verdict, j.fingerprint)


def test_selective_checkpointing_refuses_a_mutated_cache_by_design() -> None:
    case = _case(Checkpoint("selective", "plain"), inplace=True)
    if not _available("selective"):
        pytest.skip("this torch has no selective checkpointing")
    j = Judge()(case, CHECKPOINT)
    assert j.verdict == "expected" and "selective_checkpoint_cache_mutated" in (j.reason or ""), (
        j.verdict,
        j.fingerprint,
    )


def test_a_missing_api_makes_the_oracle_not_applicable_without_running_it(monkeypatch) -> None:
    missing = {"selective_checkpoint": "no create_selective_checkpoint_contexts"}
    monkeypatch.setattr(apis_module, "api_missing", missing.get)
    judgements = Judge().all(_case(Checkpoint("selective")), applicable(_case(Checkpoint("selective"))))
    assert judgements[-1].verdict == "not_applicable" and judgements[-1].reason == API_REASONS["selective_checkpoint"]
    assert judgements[-1].outcome is None and judgements[0].verdict == "consistent"


def test_every_api_has_a_probe_that_answers() -> None:
    assert set(API_PROBES) == set(API_REASONS)
    for api in API_PROBES:
        assert api_missing(api) is None or isinstance(api_missing(api), str)
    with pytest.raises(KeyError, match="no probe for torch API 'torch.jit'"):
        api_missing("torch.jit")


def test_compiled_autograd_computes_what_eager_autograd_does() -> None:
    """First order: a compiled function's double backward loses its graph whether or not compiled autograd
    runs (known upstream: pytorch/pytorch#181581), so this checks the mode where it is about the backward."""
    case = replace(_case(None, stack=("grad",)), compile=Compile("eager", False, "plain", autograd=True))
    j = Judge()(case, COMPILED)
    if api_missing("compiled_autograd"):
        assert (j.verdict, j.reason) == ("not_applicable", "compiled_autograd_unavailable")
        return
    assert j.verdict == "consistent", (j.verdict, j.reason, j.fingerprint)


def test_the_shrinker_walks_the_checkpoint_to_the_simplest_kind_and_placement() -> None:
    case = _case(Checkpoint("selective", "compiled"))
    simpler = [c for p in PASSES[:2] for c in p(case) if c is not None and c.checkpoint != case.checkpoint]
    assert simpler[0].checkpoint == Checkpoint("hooks", "compiled")
    assert {c.checkpoint for c in simpler} == {
        *(Checkpoint(k, "compiled") for k in CHECKPOINT_KINDS[:-1]),
        Checkpoint("selective", "plain"),
        Checkpoint("selective", "inside"),
    }


def test_a_checkpoint_recomputed_outside_the_forward_ad_level_it_ran_in_is_expected() -> None:
    """The checkpoint docs: a recomputation that differs from the forward may raise or be silently wrong;
    backward after a jvp's dual level recomputes f without tangents (a different number of saved tensors)."""
    fn = FunctionDef(1, (Node("exp", ("x0",)),), (Output("node", "t0"),), saved=("o0",), jvp_rule=True)
    stack = (Transform("autograd_grad"), Transform("jvp"))
    case = validate(Case(fn, FDef(), Inputs((), ((1.0,),)), stack, checkpoint=Checkpoint("checkpoint", "plain")))
    j = Judge()(case, CHECKPOINT)
    assert (j.verdict, j.reason) == ("expected", "checkpoint_recomputed_in_another_context"), j.fingerprint
    assert j.outcome is not None and j.outcome.reference.error_type == "CheckpointError"
    hooks = Judge()(replace(case, checkpoint=Checkpoint("hooks", "plain")), CHECKPOINT)  # nothing recomputed
    assert hooks.verdict == "consistent", (hooks.verdict, hooks.reason, hooks.fingerprint)


def test_a_selective_checkpoint_differentiated_twice_is_refused_by_design() -> None:
    if not _available("selective"):
        pytest.skip("this torch has no selective checkpointing")
    j = Judge()(_case(Checkpoint("selective", "plain"), stack=("jacrev",)), CHECKPOINT)
    assert (j.verdict, j.reason) == ("expected", "selective_checkpoint_backward_once"), (j.verdict, j.fingerprint)


def test_compiled_autograd_refuses_higher_order_through_aot_autograd_by_design() -> None:
    case = replace(_case(None), compile=Compile("aot_eager", False, "plain", autograd=True))
    if api_missing("compiled_autograd"):
        pytest.skip("this torch has no compiled autograd")
    j = Judge()(case, COMPILED)
    assert (j.verdict, j.reason) == ("expected", "compiled_autograd_higher_order_aot"), (j.verdict, j.fingerprint)
    assert "compiled_autograd(" in render(case, oracle=COMPILED)


#: The conditions only a mode's side can meet, and the oracle of that mode.
_MODE_CONDITIONS = {
    "side_compiled": COMPILED,
    "side_fullgraph": COMPILED,
    "side_aot_autograd": COMPILED,
    "side_compiled_autograd": COMPILED,
    "side_saved_tensor_hooks": CHECKPOINT,
    "side_selective_checkpoint": CHECKPOINT,
}


def test_each_mode_row_names_exactly_its_documented_limitations() -> None:
    """NOTE [oracle table]: a registry entry a mode's side alone can meet is in that mode's row, and every
    name a row gives is a registry entry or one of the judge's own rules."""
    from fuzzer.ir.oracles import ORACLE_KINDS
    from fuzzer.judge import judge as judge_module
    from fuzzer.judge.compare import load_registry

    registry = {lim.name: lim for lim in load_registry()}
    rules = {name for _, name, _ in judge_module.UNPROMISED}
    for kind in ORACLE_KINDS:
        owned = {n for n, lim in registry.items() if any(_MODE_CONDITIONS.get(c) == kind.name for c in lim.requires)}
        assert owned <= set(kind.limitations), (kind.name, owned - set(kind.limitations))
        assert set(kind.limitations) <= set(registry) | rules, kind.name
