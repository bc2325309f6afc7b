"""NOTE [compiled mode]: the oracle compiled_vs_eager on real torch. A Function whose backward is deliberately
not the derivative of its forward (NOTE [custom gradients]) is a verified finding under
``torch.compile(torch.func.grad(f))`` where Dynamo drops the rule; the same Function with a faithful backward is
consistent; a graph break under ``fullgraph=True`` is expected; where eager raises a documented error and the
compiled side returns a value, the compiled side broke it (NOTE [compiled promises])."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from fuzzer.ir.case import Case, Compile, FDef, FunctionDef, Inputs, Node, Output, Transform
from fuzzer.ir.features import derivatives_exact, features
from fuzzer.ir.oracles import COMPILED, MAIN, applicable
from fuzzer.ir.serde import case_from_json, case_to_json
from fuzzer.ir.validate import validate
from fuzzer.judge import apis as apis_module
from fuzzer.judge.execute import compile_unavailable
from fuzzer.judge.judge import NO_COMPILE, Judge
from fuzzer.publish.verify import stage, verify_and_publish
from fuzzer.triage.reduce import size
from fuzzer.triage.shrink import Shrinker, case_runner, goal_of

pytestmark = pytest.mark.skipif(compile_unavailable() is not None, reason="torch.compile is unavailable here")

AROUND = Compile("eager", True, "around")


def _case(rule: str = "exact", *, compiled: Compile | None = AROUND, stack: tuple[str, ...] = ("grad",)) -> Case:
    """sin(x), x saved; backward ``g * cos(x)`` as the rule ``rule`` treats g (NOTE [custom gradients])."""
    fn = FunctionDef(1, (Node("sin", ("x0",)),), (Output("node", "t0"),), saved=("x0",), grad_rule=rule)
    vmap = "vmap" in stack
    levels = tuple(Transform(t, batch_size=2) if t == "vmap" else Transform(t) for t in stack)
    return validate(Case(fn, FDef(), Inputs((), ((1.0, 2.0) if vmap else (1.0,),)), levels, compile=compiled))


def test_a_case_with_a_compile_runs_the_compiled_oracle_and_round_trips() -> None:
    case = _case("blocked")
    assert applicable(case)[-1] == COMPILED and COMPILED not in applicable(replace(case, compile=None))
    assert case_from_json(case_to_json(case)) == case
    assert {"custom_gradient"} <= set(features(case)) and not derivatives_exact(case)


def test_a_dropped_custom_backward_under_compiled_grad_is_a_verified_finding(judged_finding, tmp_path: Path) -> None:
    """backward returns ``g * 0`` (a gradient stop): eager torch.func.grad gives 0; Dynamo, tracing the
    Function under torch.func.grad, differentiates its forward instead (cos x)."""
    finding, j = judged_finding(_case("blocked"), COMPILED)
    assert j.verdict == "value_mismatch", (j.verdict, j.reason, j.fingerprint)
    assert j.outcome is not None and float(j.outcome.functorch.value.split("(")[1].split(",")[0]) == 0.0
    verified, dest = verify_and_publish(tmp_path, stage(tmp_path, finding), finding)
    text = (dest / "repro.py").read_text()
    assert verified, text
    assert "torch.compile(torch.func.grad(f), backend='eager', fullgraph=True)" in text
    assert "torch.func.grad(f)" in text and "affuzz" not in text.split("\n", 1)[1]
    assert "torch.testing.assert_close(b, a)" in text  # the failure calls eager's value "Expected"


def test_the_same_function_with_a_faithful_backward_is_consistent() -> None:
    j = Judge()(_case("exact"), COMPILED)
    assert j.verdict == "consistent", (j.verdict, j.reason, j.fingerprint)


def test_the_other_oracles_agree_with_a_declared_custom_rule() -> None:
    """Backward and jvp declare the same scaled derivative: torch.func and plain autograd agree."""
    case = _case("scaled")
    for oracle, j in zip(applicable(case), Judge().all(case, applicable(case)), strict=True):
        if oracle != COMPILED:
            assert j.verdict == "consistent", (oracle, j.verdict, j.reason, j.fingerprint)


def test_a_graph_break_under_fullgraph_is_expected() -> None:
    """torch.func.grad of a compiled function from eager is no Dynamo graph: with fullgraph=True, an error
    by design (the registry's graph_break_under_fullgraph); the eager side's value is not hidden by it."""
    j = Judge()(_case("exact", compiled=Compile("aot_eager", True, "inside")), COMPILED)
    assert (j.verdict, j.reason) == ("expected", "graph_break_under_fullgraph"), (j.verdict, j.fingerprint)
    assert j.outcome is not None and j.outcome.functorch.ok and j.outcome.reference.error_type == "Unsupported"


def test_a_compiled_side_that_returns_where_eager_raises_the_documented_error_broke_it() -> None:
    """No vmap rule: eager torch.func.vmap raises the documented error; compiled, Dynamo runs the
    Function's forward under vmap and returns values (NOTE [compiled promises])."""
    j = Judge()(_case(compiled=Compile("eager", False, "around"), stack=("vmap",)), COMPILED)
    assert (j.verdict, j.reason) == ("promise_broken", "vmap_without_rule"), (j.verdict, j.fingerprint)
    assert j.outcome is not None and not j.outcome.functorch.ok and j.outcome.reference.ok


def test_double_backward_through_aot_autograd_is_expected() -> None:
    j = Judge()(_case("exact", compiled=Compile("aot_eager", True, "plain"), stack=("autograd_grad", "grad")), COMPILED)
    assert (j.verdict, j.reason) == ("expected", "aot_autograd_double_backward"), (j.verdict, j.fingerprint)


def test_without_torch_compile_the_oracle_is_not_applicable(monkeypatch) -> None:
    """torch 2.0 on Python 3.11 has no torch.compile: the oracle is decided without running it."""
    missing = {"torch.compile": "RuntimeError: Python 3.11+ not yet supported"}
    monkeypatch.setattr(apis_module, "api_missing", missing.get)
    judgements = Judge().all(_case("blocked"), (MAIN, COMPILED))
    assert [(j.oracle, j.verdict) for j in judgements] == [(MAIN, "consistent"), (COMPILED, "not_applicable")]
    assert judgements[1].reason == NO_COMPILE


def test_the_shrinker_walks_to_the_simplest_backend_and_fullgraph() -> None:
    """The shrunk case names the smallest backend that shows the bug (Dynamo alone, here), fullgraph=True."""
    case = _case("blocked", compiled=Compile("aot_eager", False, "around"))
    run = case_runner(COMPILED)
    goal = goal_of(case, COMPILED, run)
    assert goal.verdict == "value_mismatch"
    shrunk = Shrinker(goal, run, budget=40).shrink(case).case
    assert shrunk.compile == Compile("eager", True, "around"), shrunk.compile
    assert size(shrunk) < size(case)


def _unraisable(filename: str, exc: type[BaseException]):
    """What ``sys.unraisablehook`` gets for ``exc`` raised in ``__call__`` of a file named ``filename``."""
    import types

    ns: dict = {}
    exec(compile(f"def __call__():\n    raise {exc.__name__}('__builtins_dict___3')\n", filename, "exec"), ns)  # noqa: S102
    try:
        ns["__call__"]()
    except exc as e:
        return types.SimpleNamespace(
            exc_type=exc, exc_value=e, exc_traceback=e.__traceback__, err_msg=None, object=None
        )
    raise AssertionError("unreachable")


def test_only_dynamos_cleanup_key_error_is_kept_off_stderr() -> None:
    """NOTE [compiled cases]: the KeyError of Dynamo's CleanupHook at exit is dropped; anything else is not."""
    from fuzzer.judge.execute import quiet_dynamo_cleanup

    seen: list = []
    quiet = quiet_dynamo_cleanup(seen.append)
    dynamo = "/x/site-packages/torch/_dynamo/utils.py"
    assert quiet(_unraisable(dynamo, KeyError)) is None and seen == []
    others = [_unraisable("/x/site-packages/torch/_dynamo/eval_frame.py", KeyError), _unraisable(dynamo, ValueError)]
    for u in others:
        quiet(u)
    assert seen == others


def test_a_reset_leaves_no_guard_finalizer_and_no_metric_edits() -> None:
    """NOTE [guard finalizers]: after compiled cases and a reset, Dynamo keeps no guard manager alive
    through a finalizer on a long-lived object, and its metrics context no traceback per edit."""
    import weakref

    import torch

    from fuzzer.judge.execute import reset_compiler

    Judge()(_case("blocked"), COMPILED)
    torch.compile(torch.func.grad(torch.sin), backend="eager")(torch.tensor(1.0))  # guards on torch.func.grad
    reset_compiler()

    def invalidators() -> int:
        infos = (f.peek() for f in list(weakref.finalize._registry))
        return sum(
            getattr(getattr(i[1], "func", None), "__qualname__", "") == "CheckFunctionManager.invalidate"
            for i in infos
            if i is not None
        )

    assert invalidators() == 0
    assert not getattr(torch._dynamo.utils.get_metrics_context(), "_edits", [])


def test_a_torch_func_transform_of_a_compiled_function_promises_nothing() -> None:
    """NOTE [torch.func of a compiled function]: torch.func.grad(torch.compile(f)) is documented as not
    working; backend eager lets it through, and the dropped custom backward there is expected, not a finding
    (the same Function compiled around the transform is: test above)."""
    from fuzzer.ir.serde import load

    # a legacy Function (forward takes ctx, no setup_context) under torch.func.grad: eager raises the
    # documented "must override the setup_context staticmethod"; compiled inside, Dynamo wraps it in its
    # ApplyTemplate and returns a value (found as promise_broken-1446fc9ba1; hand-checked: intended)
    case = load(str(Path(__file__).parents[1] / "data" / "func_of_compiled_promise_case.json"))
    assert case.compile is not None and case.compile.placement == "inside"
    j = Judge()(case, COMPILED)
    assert (j.verdict, j.reason) == ("expected", "func_transform_of_compiled_function"), (j.verdict, j.fingerprint)
    assert j.outcome is not None and not j.outcome.functorch.ok and j.outcome.reference.ok
    around = Judge()(replace(case, compile=replace(case.compile, placement="around")), COMPILED)
    assert around.verdict != "expected" or around.reason != "func_transform_of_compiled_function"
