"""Judge a target (NOTE [check oracles] in :mod:`fuzzer.codegen.check_render`): its rules first, then transform
stacks under the fuzzer's oracles; findings shrunk over their stacks.

NOTE [check findings]
Of one target, findings are one when they are of the same kind and show the same unexplained error
(its fingerprint, NOTE [error buckets]: one torch error is one bug under whatever stack and oracle it
shows up); a rule's wrong values are one finding per rule oracle; torch's wrong values are one per verdict,
multiset of level classes and whether compiled (reverse: grad, vjp, jacrev, autograd.grad; forward: jvp,
jacfwd; hessian; linearize; vmap), whatever the eager oracle and order: ``jvp > hessian`` and ``jacfwd >
hessian`` under either eager oracle are one, ``grad > hessian`` and ``linearize`` two, and a compiled
stack's wrong value is never one with an eager oracle's (the compiler's bugs are its own). The first found, which
is the smallest (stacks are enumerated shortest first), is shrunk, and findings that shrink to the same
case are one again.
"""

from __future__ import annotations

import itertools
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from ..codegen.check_render import (
    FD_ORACLES,
    RULE_ORACLES,
    SECOND_ORDER,
    not_derivative,
    render_check,
    rule_applies,
)
from ..codegen.check_smoothness import render_smoothness
from ..ir.case import Compile, Transform
from ..ir.oracles import COMPILED, alternate, applicable_to, oracle_kind
from ..ir.shapes import numel
from ..ir.target import CheckCase, Target, TargetError
from ..ir.validity import SideInfo, stack_sides
from ..ir.verdicts import ERROR_VERDICTS, FINDING_VERDICTS
from ..judge.compare import Limitation, classify, load_registry
from ..judge.execute import Outcome, compile_unavailable, run_script
from ..judge.torch_state import prepare_process, settle_torch_state
from .limits import BUDGET_VERDICTS, memory_limit, out_of_memory, scaled_timeout
from .stacks import random_stacks, stacks

KINDS = {"function": "the Function's rules disagree", "torch": "torch disagrees with itself"}
_PLAIN = SideInfo((), False, False, False)
#: NOTE [check findings]: levels that differentiate the same way are one class.
_CLASS = {"grad": "R", "vjp": "R", "jacrev": "R", "autograd_grad": "R", "jvp": "F", "jacfwd": "F"}
_CLASS.update({"hessian": "H", "linearize": "L", "vmap": "V"})
#: What each side of a rule oracle runs, for the known-limitations registry.
_RULE_INFO = {
    "backward_vs_fd": (SideInfo(("R",), False, False, False), _PLAIN),
    "jvp_vs_fd": (SideInfo(("F",), False, False, True), _PLAIN),
    "backward_vs_jvp": (SideInfo(("R",), False, False, False), SideInfo(("F",), False, False, True)),
    "double_backward_vs_fd": (SideInfo(("R", "R"), False, False, False), _PLAIN),
    "jvp_of_backward_vs_fd": (SideInfo(("R", "F"), False, False, True), _PLAIN),
    "backward_of_jvp_vs_fd": (SideInfo(("F", "R"), False, False, True), _PLAIN),
    "vmap_rule_vs_loop": (SideInfo((), True, True, False), _PLAIN),
    "opcheck": (SideInfo(("R",), False, False, False), SideInfo(("R",), False, False, False)),
}


#: Verdicts of a check that are notes, neither a finding nor an answer: out of budget (NOTE [check budgets]
#: in fuzzer/check/limits.py), or finite differences across a kink (NOTE [check oracles]).
NOTES = (*BUDGET_VERDICTS, "not_smooth")


@dataclass(frozen=True)
class Verdict:
    """One oracle on one case: the verdict, why (a limitation, or why not applicable), the outcome."""

    verdict: str
    reason: str = ""
    fingerprint: str = ""
    outcome: Outcome | None = None

    @property
    def finding(self) -> bool:
        return self.verdict in FINDING_VERDICTS


@dataclass
class CheckFinding:
    kind: str  # "function" | "torch"
    case: CheckCase
    result: Verdict
    tried: int = 0  # shrink attempts
    keys: set[tuple[object, ...]] = field(default_factory=set)  # the keys of the findings it stands for
    original: CheckFinding | None = None  # as found, before shrinking (its repro is tried where this one fails)
    reproduced: bool | None = None  # NOTE [the repro is what runs]: set once its repro.py ran
    known: str | None = None  # the known upstream issue it is (``#N``), once looked up

    @property
    def key(self) -> tuple[object, ...]:
        """NOTE [check findings]: what makes two findings of one target the same one."""
        return finding_key(self.kind, self.case, self.result)


def finding_key(kind: str, case: CheckCase, v: Verdict) -> tuple[object, ...]:
    """NOTE [check findings]: what makes two findings of one target the same one."""
    if v.fingerprint:
        return (kind, v.fingerprint)
    if kind == "function":
        return (kind, case.oracle, v.verdict)
    return (kind, v.verdict, case.oracle == COMPILED, tuple(sorted(_CLASS[t.name] for t in case.transforms)))


@dataclass
class TargetReport:
    target: Target
    rules: dict[str, Verdict] = field(default_factory=dict)
    samples: dict[str, dict[str, Verdict]] = field(default_factory=dict)  # rule oracle -> sample -> verdict
    stacks: dict[str, dict[str, int]] = field(default_factory=dict)  # torch oracle -> verdict -> count
    reasons: dict[str, dict[str, int]] = field(default_factory=dict)  # torch oracle -> why n/a, exp, a note -> count
    # torch oracle -> the finding key of each stack that disagreed (NOTE [check findings])
    found: dict[str, list[tuple[object, ...]]] = field(default_factory=dict)
    findings: list[CheckFinding] = field(default_factory=list)
    cases: int = 0
    seconds: float = 0.0

    def count(self, oracle: str, verdict: str, reason: str = "") -> None:
        row = self.stacks.setdefault(oracle, {})
        row[verdict] = row.get(verdict, 0) + 1
        if reason and verdict in ("expected", "not_applicable", *NOTES):  # why a stack was not compared
            why = self.reasons.setdefault(oracle, {})
            why[reason] = why.get(reason, 0) + 1

    def hints(self) -> list[str]:
        """What would make the Function check out better, in a line each."""
        out = []
        expected = sum(row.get("expected", 0) for row in self.stacks.values())
        total = sum(sum(row.values()) for row in self.stacks.values())
        if "setup_context" not in self.target.rules and not self.target.op and total and expected * 4 >= total:
            out.append(
                f"{expected} of {total} comparisons are torch.func's documented limits of a forward(ctx, ...) "
                "Function: a separate setup_context staticmethod (forward without ctx) makes it work with "
                "torch.func transforms (https://pytorch.org/docs/stable/notes/extending.func.html)"
            )
        return out


#: NOTE [check oracles]: how ``compiled_vs_eager`` compiles a stack (Dynamo and AOTAutograd: where a
#: Function's rules are traced; no C++ compile), unless ``--compile-backend`` says otherwise.
CHECK_COMPILE = Compile("aot_eager", False, "around")


class Checker:
    """Runs one target's oracles (every script through :func:`fuzzer.judge.execute.run_script`);
    ``compile``: the compiled oracle's configuration (None: no compiled oracle)."""

    def __init__(
        self,
        *,
        timeout: float | None = 60.0,
        registry: tuple[Limitation, ...] | None = None,
        compile: Compile | None = CHECK_COMPILE,
        max_memory_mb: float | None = None,
    ) -> None:
        self.timeout = timeout
        self.registry = registry if registry is not None else load_registry()
        self.compile = compile
        self.max_memory_mb = max_memory_mb
        self.leaked: list[str] = []  # NOTE [leaked torch state]: what a script left changed past repair
        prepare_process()  # NOTE [leaked torch state]: as a campaign worker does

    def _run(self, case: CheckCase, source: str, oracles: tuple[str, ...]) -> dict[str, Outcome | Verdict]:
        """Run one script (NOTE [the repro is what runs]) within its budget (NOTE [check budgets]); torch's
        state is repaired after it as after every campaign case (NOTE [leaked torch state]). An oracle that
        ran out of time or memory gets a Verdict (a note), the others their Outcome."""
        timeout = self.budget(case)
        try:
            with memory_limit(self.max_memory_mb):
                outcomes: dict[str, Outcome | Verdict] = dict(run_script(source, oracles, timeout=timeout))
        except MemoryError:
            outcomes = dict.fromkeys(oracles, Verdict("memory", f"over --max-memory {self.max_memory_mb:g} MiB"))
        leaked = settle_torch_state()
        if leaked:
            self.leaked.append(f"{case.target.title} [{case.oracle}]: {'; '.join(leaked)}")
        for oracle, o in outcomes.items():
            if isinstance(o, Verdict):
                continue
            if o.verdict == "hang":
                outcomes[oracle] = Verdict("timeout", f"a side ran past {timeout or 0:.0f} s", outcome=o)
            elif any(out_of_memory(s.error_type, s.error) for s in (o.functorch, o.reference)):
                outcomes[oracle] = Verdict("memory", f"over --max-memory {self.max_memory_mb:g} MiB", outcome=o)
        return outcomes

    def budget(self, case: CheckCase) -> float | None:
        """NOTE [check budgets]: the timeout of ``case``'s script."""
        t = case.target
        elements = sum(numel(s) for s in t.shapes)
        order = len(case.transforms) or (2 if case.oracle in SECOND_ORDER.values() else 1)
        return scaled_timeout(self.timeout, elements=elements, outputs=numel(t.out_shape), order=order)

    # ----------------------------------------------------------------------------- rule oracles

    def rules(self, target: Target, oracle: str) -> tuple[Verdict, dict[str, Verdict]]:
        """Rule ``oracle`` on each of the target's samples (NOTE [check inputs]): the verdict the table
        shows (the first sample's finding; else consistent where one sample was; else the first note or
        verdict) and each sample's."""
        each = {t.sample or f"sample {i + 1}": self.rule(t, oracle) for i, t in enumerate(target.samples)}
        order = list(each.values())
        for test in (lambda v: v.finding, lambda v: v.verdict == "consistent", lambda v: v.verdict in NOTES):
            first = next((v for v in order if test(v)), None)
            if first is not None:
                return first, each
        return order[0], each

    def rule(self, target: Target, oracle: str) -> Verdict:
        """Rule ``oracle`` on the target's sample."""
        why = rule_applies(target, oracle)
        if why is not None:
            return Verdict("not_applicable", why)
        case = CheckCase(target, (), oracle)
        outcome = self._run(case, render_check(case), (oracle,))[oracle]
        if isinstance(outcome, Verdict):
            return outcome
        declared = not_derivative(target, oracle)
        if declared and outcome.verdict == "value_mismatch":  # a declared rule's error is still a finding
            return Verdict("expected", declared, outcome=outcome)
        if outcome.verdict == "value_mismatch" and oracle in FD_ORACLES:
            kink = self.kink(target, 2 if oracle in SECOND_ORDER.values() else 1)
            if kink:  # NOTE [check oracles]: finite differences mean nothing across a kink
                return Verdict("not_smooth", kink, outcome=outcome)
        if (
            oracle in ("double_backward_vs_fd", "jvp_of_backward_vs_fd")
            and "once_differentiable" in target.rules
            and outcome.verdict != "consistent"
        ):
            # the docs of once_differentiable: the backward is not differentiated (it raises, or, where
            # nothing it returns requires grad, its result is a constant)
            return Verdict("expected", "once_differentiable", outcome=outcome)
        c = classify(outcome, self.registry, target.conditions(), _RULE_INFO[oracle])
        return Verdict(c.verdict, c.limitation or "", c.fingerprint, outcome)

    def kink(self, target: Target, order: int) -> str:
        """Where ``f`` (order 2: its derivative too) is not smooth at the sample ('' where it is; NOTE
        [check oracles]); run as a script of its own, within the budget of the rule oracles."""
        ns: dict[str, object] = {"__name__": "__affuzz_kink__"}
        try:
            with memory_limit(self.max_memory_mb), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                exec(compile(render_smoothness(target, order), "<affuzz smoothness>", "exec"), ns)  # noqa: S102
        except Exception:  # noqa: BLE001 (f raised near its sample: not smooth there either)
            return "the forward raises within a finite-difference step of the sample"
        finally:
            settle_torch_state()
        return str(ns.get("KINK", ""))

    # ----------------------------------------------------------------------------- torch oracles

    def relies_on_rules(self, stack: tuple[Transform, ...], oracle: str) -> bool:
        """Whether the two sides of ``oracle`` run different rules of the Function (a different path, or its
        vmap rule a different number of times): then they agree only as far as the rules were verified,
        to the finite-difference tolerance (NOTE [check oracles])."""
        if oracle == COMPILED:
            return False
        a, b = stack_sides(stack, oracle)
        return a.path != b.path or _vmaps(stack) != _vmaps(_side_b(stack, oracle))

    def case(self, target: Target, stack: tuple[Transform, ...], oracle: str) -> CheckCase:
        """The case of a torch oracle on ``stack``, judged at the rules' tolerance where it relies on them."""
        meta = {"rule_tolerance": True} if self.relies_on_rules(stack, oracle) else {}
        return CheckCase(target, stack, oracle, meta=meta, compile=self.compile)

    def valid(self, target: Target, stack: tuple[Transform, ...], oracle: str, rules: dict[str, Verdict]) -> str | None:
        """Why a torch disagreement on this comparison could come from the Function's rules (NOTE [check
        oracles]): the rule oracles the two sides' difference relies on that did not come out
        consistent; None when it cannot."""
        paths = {
            m for side in stack_sides(stack, oracle, self.compile if oracle == COMPILED else None) for m in side.path
        }
        raising = [
            o
            for o, mode in (("backward_vs_fd", "R"), ("jvp_vs_fd", "F"))
            if mode in paths and o in rules and rules[o].verdict in ERROR_VERDICTS
        ]
        if raising:  # the Function's own rule raises: whatever torch does around it is not torch's finding
            return f"the Function's rule raises ({', '.join(raising)})"
        if oracle == COMPILED:  # the same rules on both sides (NOTE [compiled mode]), but a vmap staticmethod
            # that is wrong (a batch of the wrong shape, say) is refused by the compiler's fake tensors where
            # eager takes it: under vmap the rule must check out first
            bad = [o for o in ("vmap_rule_vs_loop",) if _vmaps(stack) and rules.get(o) and rules[o].finding]
            return f"rules disagree ({', '.join(bad)})" if bad else None
        a, b = stack_sides(stack, oracle)
        need = []
        if a.path != b.path:
            need.append("backward_vs_fd")
            if "F" in a.path + b.path:
                need += ["jvp_vs_fd", "backward_vs_jvp"]
            # the second-order rules each side differentiates (SECOND_ORDER); forward over forward has
            # no plain-autograd twin to check it against, and no stack has it below a third level
            need += [SECOND_ORDER[p[:2]] for p in (a.path, b.path) if p[:2] in SECOND_ORDER]
        if _vmaps(stack) != _vmaps(_side_b(stack, oracle)):  # one side runs the Function's vmap rule more often
            need.append("vmap_rule_vs_loop")
        bad = [o for o in need if o in rules and rules[o].verdict not in ("consistent", "not_applicable")]
        return f"rules disagree ({', '.join(bad)})" if bad else None

    def stack(
        self,
        target: Target,
        stack: tuple[Transform, ...],
        rules: dict[str, Verdict],
        oracles: tuple[str, ...] | None = None,
    ) -> dict[str, Verdict]:
        """Every torch oracle that applies to ``stack`` (or those of ``oracles`` that do), one script (NOTE
        [one exec per case])."""
        out: dict[str, Verdict] = {}
        todo = []
        names = applicable_to(stack) + ((COMPILED,) if self.compile is not None else ())
        for oracle in names:
            if oracles is not None and oracle not in oracles:
                continue
            why = self.valid(target, stack, oracle, rules)
            if oracle == COMPILED and why is None:
                why = compile_unavailable()
            if why is not None:
                out[oracle] = Verdict("not_applicable", why)
            else:
                todo.append(oracle)
        if todo:
            # NOTE [check oracles]: the script's tolerance is the rules' where one of its oracles relies on
            # them (a finding is then also one at the exact tolerance its own repro may use)
            loose = any(self.relies_on_rules(stack, o) for o in todo)
            case = CheckCase(
                target, stack, todo[0], meta={"rule_tolerance": True} if loose else {}, compile=self.compile
            )
            outcomes = self._run(case, render_check(case, also=tuple(todo[1:])), tuple(todo))
            for oracle in todo:
                o = outcomes[oracle]
                if isinstance(o, Verdict):
                    out[oracle] = o
                    continue
                both = stack_sides(stack, oracle, self.compile)
                c = classify(o, self.registry, target.conditions(), both)
                out[oracle] = Verdict(c.verdict, c.limitation or "", c.fingerprint, o)
        return out

    def judge(self, case: CheckCase, rules: dict[str, Verdict]) -> Verdict:
        if case.oracle in RULE_ORACLES:
            return self.rule(case.target, case.oracle)
        verdicts = self.stack(case.target, case.transforms, rules, (case.oracle,))
        return verdicts.get(case.oracle, Verdict("not_applicable", f"{case.oracle} does not apply to this stack"))

    # ----------------------------------------------------------------------------- a whole target

    def check(
        self,
        target: Target,
        *,
        max_cases: int | None = None,
        deadline: float | None = None,
        seed: int = 0,
        shrink: bool = True,
        progress: Callable[[TargetReport], None] | None = None,
        only: tuple[tuple[Transform, ...], ...] | None = None,
    ) -> TargetReport:
        """Every rule oracle on every sample, then the stacks (NOTE [check stacks] in fuzzer/check/stacks.py); ``progress`` is called
        with the report so far after the rules and after each stack (NOTE [check budgets]: written as
        it comes)."""
        began = time.monotonic()
        report = TargetReport(target)
        for oracle in RULE_ORACLES:
            v, each = self.rules(target, oracle)
            report.rules[oracle], report.samples[oracle] = v, each
            if v.finding:
                sample = next(t for t, w in zip(target.samples, each.values(), strict=True) if w is v)
                report.findings.append(CheckFinding("function", CheckCase(sample, (), oracle), v))
        if progress is not None:
            progress(report)
        seen = {f.key for f in report.findings}
        listed = list(stacks(target)) if only is None else list(only)
        source: Iterator[tuple[Transform, ...]] = iter(listed)
        if deadline is not None and max_cases is None:
            source = itertools.chain(listed, random_stacks(seed, target))
        for stack in source:
            if max_cases is not None and report.cases >= max_cases:
                break
            if deadline is not None and time.monotonic() > deadline:
                break
            report.cases += 1
            for oracle, v in self.stack(target, stack, report.rules).items():
                both_raise = v.verdict == "consistent" and v.outcome is not None and not v.outcome.functorch.ok
                report.count(oracle, "same_error" if both_raise else v.verdict, v.reason)
                if v.finding:
                    f = CheckFinding("torch", self.case(target, stack, oracle), v)
                    report.found.setdefault(oracle, []).append(f.key)
                    if f.key not in seen:
                        seen.add(f.key)
                        report.findings.append(f)
            if progress is not None:
                progress(report)
        for f in report.findings:
            f.keys.add(f.key)
        if shrink:
            shrunk: dict[tuple[object, ...], CheckFinding] = {}
            for f in report.findings:
                g = self.shrink(f, report.rules)
                g = shrunk.setdefault((*g.key, tuple(t.name for t in g.case.transforms)), g)
                g.keys.add(f.key)
            report.findings = list(shrunk.values())
        report.seconds = time.monotonic() - began
        return report

    # ----------------------------------------------------------------------------- shrinking

    def shrink(self, finding: CheckFinding, rules: dict[str, Verdict], *, budget: int = 40) -> CheckFinding:
        """The smallest case (fewer levels) that still gives the same finding: same kind, oracle, verdict
        and error fingerprint."""
        case, result, tried = finding.case, finding.result, 0

        def same(c: CheckCase) -> Verdict | None:
            nonlocal tried
            tried += 1
            try:
                v = self.judge(c, rules)
            except TargetError:
                return None
            ok = v.verdict == result.verdict and v.fingerprint == result.fingerprint
            return v if ok else None

        changed = True
        while changed and tried < budget:
            changed = False
            for smaller in _smaller(case):
                if tried >= budget:
                    break
                v = same(smaller)
                if v is not None:
                    case, result, changed = smaller, v, True
                    break
        if case is finding.case:
            return replace(finding, tried=tried, keys=set())
        return CheckFinding(finding.kind, case, result, tried, original=finding)


_VMAPPING = ("vmap", "jacrev", "jacfwd", "hessian")  # torch.func levels that run their function under vmap


def _vmaps(stack: tuple[Transform, ...] | None) -> int:
    return sum(t.name in _VMAPPING for t in stack or ())


def _side_b(stack: tuple[Transform, ...], oracle: str) -> tuple[Transform, ...] | None:
    """The torch.func levels side B of ``oracle`` runs (twins: none; loops: no vmap)."""
    return _SIDE_B_LEVELS[oracle_kind(oracle).side_b](stack, oracle)  # NOTE [oracle table]


#: NOTE [oracle table]: the torch.func levels of side B, per recipe ``affuzz check`` runs.
_SIDE_B_LEVELS: dict[str, Callable[[tuple[Transform, ...], str], tuple[Transform, ...] | None]] = {
    "twins": lambda stack, oracle: (),
    "loops": lambda stack, oracle: tuple(t for t in stack if t.name != "vmap"),
    "alternate": alternate,
    "compiled": lambda stack, oracle: stack,
}


def _smaller(case: CheckCase) -> Iterator[CheckCase]:
    """One step smaller: a level dropped (the oracle must still apply). The sample's shapes are the
    Function's domain, which only the user knows (a quaternion's 4, a batch of 3x3 matrices): they are
    never cut (NOTE [check inputs])."""
    stack = case.transforms
    for i in range(len(stack)):
        rest = stack[:i] + stack[i + 1 :]
        if rest and case.oracle in applicable_to(rest) and all(t.name != "autograd_grad" for t in rest):
            yield replace(case, transforms=rest)
