"""Assertions for your own tests: run a case through affuzz's judge and fail with its repro.

    from hypothesis import given
    from strategies import cases
    from fuzzer.testing import assert_consistent

    @given(cases(transforms=["grad", "vmap"], max_depth=2))
    def test_torch_func_agrees_with_plain_autograd(case):
        assert_consistent(case)

:func:`assert_consistent` judges ``case`` exactly as a campaign does (:class:`fuzzer.judge.judge.Judge`:
valid comparisons only, documented limitations per side, float32 re-checked in float64) under every oracle
that applies to it, or the ones named, and raises an ``AssertionError`` for the first finding, with the
verdict, both sides' results and the standalone repro (NOTE [repro styles]), so a failing property test
hands you a script to run and file. ``subject="function"`` is for Functions whose own rules are under test
(NOTE [valid comparisons]): comparisons between rules the Function makes disagree are then run too.

:func:`assert_function_consistent` is ``affuzz check`` for one of your own Functions in a test: its rules
against finite differences and each other, then torch on it (NOTE [check oracles]), failing with the first
finding's kind, both sides and its repro::

    def test_my_function_composes():
        assert_function_consistent(MyFunction, inputs="3x4,4", max_cases=20)
"""

from __future__ import annotations

from collections.abc import Sequence

from .codegen.render import render
from .ir.case import Case
from .ir.oracles import applicable
from .ir.verdicts import FINDING_VERDICTS
from .judge.judge import Judge, Judgement
from .publish.findings import expect_of

__all__ = ["assert_consistent", "assert_function_consistent", "judge_case"]

_JUDGES: dict[tuple[float | None, str], Judge] = {}


def judge_case(
    case: Case, *, oracles: Sequence[str] | None = None, timeout: float | None = 60.0, subject: str = "torch"
) -> dict[str, Judgement]:
    """Oracle -> :class:`~fuzzer.judge.judge.Judgement` of ``case`` (every applicable oracle by default)."""
    judge = _JUDGES.setdefault((timeout, subject), Judge(timeout=timeout, subject=subject))
    names = tuple(oracles) if oracles is not None else applicable(case)
    return dict(zip(names, judge.all(case, names), strict=True))


def assert_consistent(
    case: Case, *, oracles: Sequence[str] | None = None, timeout: float | None = 60.0, subject: str = "torch"
) -> None:
    """Raise ``AssertionError`` (with the repro script) if ``case`` is a finding under any of ``oracles``."""
    for oracle, j in judge_case(case, oracles=oracles, timeout=timeout, subject=subject).items():
        if j.verdict not in FINDING_VERDICTS:
            continue
        expect = expect_of(j.verdict, j.outcome, j.fingerprint) if j.outcome is not None else None
        repro = render(case, oracle=oracle, style="repro", expect=expect)
        sides = ""
        if j.outcome is not None:
            sides = f"\nfunctorch: {j.outcome.functorch.summary()}\nreference: {j.outcome.reference.summary()}"
        raise AssertionError(f"{j.verdict} under {oracle}{sides}\n\n--- repro.py ---\n{repro}")


def assert_function_consistent(
    function: type,
    *,
    inputs: str | None = None,
    max_cases: int | None = None,
    kinds: Sequence[str] = ("function",),
    inputs_from: str | None = None,
    not_derivative: Sequence[str] = (),
    timeout: float | None = 60.0,
    compile_backend: str | None = "aot_eager",
) -> None:
    """Raise ``AssertionError`` (kind, oracle, stack, both sides, repro.py) if ``affuzz check`` finds something
    of one of ``kinds`` (default: ``function``, the Function's own rules; add ``torch`` to fail on torch's
    findings too) in ``function`` (an ``autograd.Function`` subclass, or a ``torch.library.custom_op``,
    importable from its module). ``inputs`` is ``--inputs`` (default: found by trial), ``inputs_from``
    ``--inputs-from``, ``not_derivative`` ``--not-derivative``; ``max_cases`` limits the stacks (default: every
    stack of depth <= 2); ``compile_backend`` is ``--compile-backend``: each stack also under
    ``torch.compile`` with that backend, beside it eagerly (None: not compiled)."""
    from dataclasses import replace

    from .check.engine import CHECK_COMPILE, KINDS, Checker
    from .check.ops import callee_of, defined_in
    from .check.output import repro, stack_text
    from .check.targets import target_of

    module, name = defined_in(function)
    callee = callee_of(function, name, f"{module}:{name}")
    target = target_of(callee, module, inputs=inputs, inputs_from=inputs_from, not_derivative=tuple(not_derivative))
    compiled = replace(CHECK_COMPILE, backend=compile_backend) if compile_backend else None
    report = Checker(timeout=timeout, compile=compiled).check(target, max_cases=max_cases)
    for f in report.findings:
        if f.kind not in kinds:
            continue
        o = f.result.outcome
        sides = f"\nA: {o.functorch.summary()}\nB: {o.reference.summary()}" if o is not None else ""
        raise AssertionError(
            f"{target.title}: {KINDS[f.kind]}: {f.result.verdict} under {f.case.oracle} (stack {stack_text(f)})"
            f"{sides}\n\n--- repro.py ---\n{repro(f)}"
        )
