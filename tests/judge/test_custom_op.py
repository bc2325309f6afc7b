"""NOTE [custom op mode]: a Function written as a torch.library custom op, on real torch: the op agrees with its
autograd.Function twin where torch is right, a planted wrong vmap rule is judged on the op as on the
Function, the disagreements torch 2.13 has are found, and every op is torn down after its case."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fuzzer.codegen.render import render
from fuzzer.gen.modes import CustomOpShare
from fuzzer.ir.case import Case, CaseError, FDef, FunctionDef, Inputs, Node, Output, Transform, View
from fuzzer.ir.custom_op import UNSAYABLE, as_custom_op, function_twin, unsayable
from fuzzer.ir.features import features
from fuzzer.ir.oracles import CUSTOM_OP, CUSTOM_OP_PLAIN, MAIN, OPCHECK, apis_needed, applicable
from fuzzer.ir.serde import case_from_json, case_to_json
from fuzzer.ir.validate import validate
from fuzzer.judge.apis import api_missing
from fuzzer.judge.judge import Judge
from fuzzer.publish.upstream import one_bucket_key
from fuzzer.triage.ablate import without
from fuzzer.triage.signature import Signature

X0 = Node("mul", ("x0", "x1"))


def _case(stack: tuple[str, ...], *, vmap_rule: str = "none", **fn_fields: object) -> Case:
    """x0 * x1 and sin(x0), x0 and x1 saved: a Function the custom op API can say as it is."""
    fn = FunctionDef(
        2,
        (X0, Node("sin", ("x0",))),
        (Output("node", "t0"), Output("node", "t1")),
        saved=("x0", "x1"),
        vmap_rule=vmap_rule,
        **fn_fields,  # type: ignore[arg-type]
    )
    batch = 2 ** stack.count("vmap")
    levels = tuple(Transform(t, batch_size=2) if t == "vmap" else Transform(t) for t in stack)
    values = tuple(tuple(0.25 + 0.5 * i + 0.0625 * k for k in range(2 * batch)) for i in range(2))
    return validate(Case(fn, FDef(uses=(0, 1), combine="sum"), Inputs((2,), values), levels))


def _op(stack: tuple[str, ...], **kw: object) -> Case:
    case = as_custom_op(_case(stack, **kw))  # type: ignore[arg-type]
    assert case is not None and case.function.style == "custom_op"
    return case


needs_custom_op = pytest.mark.skipif(
    api_missing("register_vmap") is not None, reason="this torch has no torch.library.custom_op with register_vmap"
)


def test_each_unsayable_feature_keeps_a_function_from_being_an_op() -> None:
    fn = _case(("grad",)).function
    variants = {
        "output_aliases_input": replace(fn, outputs=(Output("node", "t0"), Output("input", "x1"))),
        "output_is_view": replace(fn, outputs=(Output("node", "t0"), Output("view", "t0", View("view_as")))),
        "output_repeated": replace(fn, outputs=(Output("node", "t0"), Output("node", "t0"))),
        "jvp_rule": replace(fn, jvp_rule=True),
        "generate_vmap_rule": replace(fn, vmap_rule="generate"),
        "once_differentiable": replace(fn, once_differentiable=True),
        "materialize_grads_false": replace(fn, materialize_grads=False),
        "mark_non_differentiable": replace(fn, non_differentiable=(1,)),
        "saved_on_ctx": replace(fn, on_ctx=("x0",)),
        "non_tensor_output": replace(fn, non_tensor_output=True),
    }
    assert set(variants) | {"mark_dirty"} == {u.name for u in UNSAYABLE}
    case = _case(("grad",))
    for name, variant in variants.items():
        assert name in unsayable(variant), name
        assert as_custom_op(replace(case, function=variant)) is None
        with pytest.raises(CaseError, match=f"function.style: a custom op cannot say {name}"):
            validate(replace(case, function=replace(variant, style="custom_op")))
    assert unsayable(fn) == ()


def test_an_op_case_round_trips_and_drops_back_to_its_function() -> None:
    case = _op(("vmap",), vmap_rule="custom")
    assert "custom_op" in features(case) and applicable(case)[-2:] == (CUSTOM_OP, CUSTOM_OP_PLAIN)
    assert case_from_json(case_to_json(case)) == case
    assert "register_vmap" in apis_needed(case, MAIN)
    plain = without(case, "custom_op")
    assert plain is not None and plain.function.style == "setup_context" and CUSTOM_OP not in applicable(plain)
    twin = function_twin(case)  # the twin keeps the op's rules, and nothing the op cannot say
    assert (twin.style, twin.vmap_rule, twin.jvp_rule) == ("setup_context", "custom", False)
    assert not function_twin(_op(("jvp",))).jvp_rule and function_twin(_op(("jvp",))).vmap_rule == "none"
    assert function_twin(_op(("vmap",))).vmap_rule == "custom"  # the fallback's loop, where the op has no rule


def test_a_script_registers_the_op_under_a_name_of_its_own() -> None:
    a, b = _op(("vmap",)), _op(("vmap",), vmap_rule="custom")
    source = render(a, oracle=CUSTOM_OP, style="repro")
    assert '@torch.library.custom_op("affuzz::op_' in source and "class Fn(torch.autograd.Function):" in source
    assert "op.register_autograd(op_backward, setup_context=op_setup_context)" in source
    names = {s.split('"')[1] for s in (render(a), render(b)) for s in s.splitlines() if "custom_op(" in s}
    assert len(names) == 2  # different ops, different names
    assert "class Fn" not in render(a, oracle=MAIN, style="repro")  # the twin only where its oracle runs


@needs_custom_op
@pytest.mark.parametrize("stack", [("vmap",), ("autograd_grad", "vmap"), ("vmap", "vmap")])
def test_an_op_and_its_function_twin_agree_where_torch_is_right(stack: tuple[str, ...]) -> None:
    case = _op(stack, vmap_rule="custom")
    judge = Judge()
    oracles = applicable(case)
    for oracle, j in zip(oracles, judge.all(case, oracles), strict=True):
        assert j.verdict == "consistent", (oracle, j.verdict, j.reason, j.fingerprint)


@needs_custom_op
def test_a_planted_wrong_vmap_rule_is_judged_on_the_op_as_on_the_function() -> None:
    judge = Judge()
    fn_case = _case(("vmap",), vmap_rule="custom_wrong")
    op_case = _op(("vmap",), vmap_rule="custom_wrong")
    on_function, on_op = judge(fn_case, MAIN), judge(op_case, MAIN)
    assert on_function.verdict == on_op.verdict == "value_mismatch"
    # the twin runs the same (wrong) rule: the op and its Function agree with each other
    assert judge(op_case, CUSTOM_OP).verdict == "consistent"


@needs_custom_op
def test_torch_func_forward_mode_gives_a_custom_op_a_zero_tangent_where_its_function_raises() -> None:
    """torch 2.13 and 2.14.1: torch.func.jvp of an op with register_autograd returns zeros where its twin, a
    Function without a jvp rule, raises the documented "must implement the jvp function" error, which the
    op owes too (NOTE [custom op promises]); under plain forward AD with inputs that require grad both raise."""
    judge = Judge()
    j = judge(_op(("jvp",)), CUSTOM_OP)
    assert (j.verdict, j.reason) == ("promise_broken", "forward_mode_without_jvp"), (j.verdict, j.fingerprint)
    assert j.outcome is not None and j.outcome.functorch.value == "tensor(0., dtype=torch.float64)"
    assert "must implement the jvp function" in j.fingerprint
    # one bucket under every stack, apart from the compiled oracle's broken promise of the same error
    ids = {Signature("promise_broken", CUSTOM_OP, stack, (), j.fingerprint).id for stack in (("jvp",), ("jacfwd",))}
    assert len(ids) == 1 and ids != {Signature("promise_broken", "compiled_vs_eager", ("jvp",), (), j.fingerprint).id}
    plain = judge(_op(("jvp",)), CUSTOM_OP_PLAIN)  # both raise the one error: they agree
    assert plain.verdict == "consistent" and plain.outcome is not None
    assert "must implement the jvp function" in str(plain.outcome.functorch.error) == str(plain.outcome.reference.error)


@needs_custom_op
def test_the_known_refusal_of_reverse_mode_torch_func_is_one_known_bucket() -> None:
    """pytorch#168393 (open): torch.func.grad of a register_autograd op raises the setup_context error an
    autograd.Function gets for a legacy forward; plain autograd and the Function twin work."""
    case = _op(("grad",))
    j = Judge()(case, MAIN)
    assert j.verdict == "error_functorch_only" and "must override the setup_context" in j.outcome.functorch.error
    key = one_bucket_key(
        fingerprint=j.fingerprint, verdict=j.verdict, oracle=MAIN, stack=("grad",), case_features=features(case)
    )
    assert key == "known:168393"
    assert Judge()(case, CUSTOM_OP_PLAIN).verdict == "consistent"


@needs_custom_op
def test_every_op_is_torn_down_after_its_case() -> None:
    import torch
    from torch._library.custom_ops import OPDEF_TO_LIB

    judge = Judge()
    for stack in (("vmap",), ("autograd_grad", "vmap")):
        case = _op(stack, vmap_rule="custom")
        name = next(line.split('"')[1] for line in render(case).splitlines() if "custom_op(" in line)
        judge.all(case, applicable(case))
        assert not [q for q in OPDEF_TO_LIB if q.startswith("affuzz::")]
        with pytest.raises(RuntimeError):  # the schema is gone from the dispatcher
            torch._C._dispatch_find_schema_or_throw(name, "")


@needs_custom_op
def test_opcheck_passes_an_op_whose_registrations_are_right() -> None:
    """torch.library.opcheck (schema, autograd registration, fake tensor, AOT dispatch) on a sample of the
    custom-op Functions: on ours, whose registrations are right by construction, it passes."""
    candidates = [_op(("autograd_grad", "vmap"), scalars=(s,)) for s in (0.5, 1.5, 2.5, -0.5, 3.0, 0.25, 4.0, 1.25)]
    candidates = [
        replace(c, function=replace(c.function, nodes=(Node("scale", ("x0",), scalar=0), c.function.nodes[1])))
        for c in candidates
    ]
    sampled = [c for c in map(validate, candidates) if OPCHECK in applicable(c)]
    assert sampled and len(sampled) < len(candidates)  # one Function in OPCHECK_ONE_IN
    j = Judge()(sampled[0], OPCHECK)
    assert j.verdict == "consistent", (j.verdict, j.reason, j.fingerprint)


def test_once_the_refusal_is_bucketed_refused_stacks_keep_a_quarter_of_their_turns() -> None:
    """NOTE [known refusals]: the mode's time goes where every oracle can still tell something new."""
    share = CustomOpShare(3, 0, 0.5, by="cases")
    reverse, vmapped = _case(("grad",)), _case(("vmap",))
    turns = [k for k in range(400) if share.turn(k)]
    assert len(turns) > 100
    assert all(share.attach(vmapped, k, refused=True).function.style == "custom_op" for k in turns)
    assert all(share.attach(reverse, k).function.style == "custom_op" for k in turns)
    kept = [k for k in turns if share.attach(reverse, k, refused=True).function.style == "custom_op"]
    assert 0.15 * len(turns) < len(kept) < 0.35 * len(turns)
    assert kept == [k for k in turns if share.attach(reverse, k, refused=True).function.style == "custom_op"]
