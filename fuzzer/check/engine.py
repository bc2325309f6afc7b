"""Judge a target (NOTE [check oracles] in :mod:`fuzzer.codegen.check_render`): its rules first, then transform
stacks under the fuzzer's oracles; findings shrunk over stacks and inputs.

NOTE [check stacks]
Stacks are enumerated, not drawn: every level of :data:`LEVELS` alone (each argnum of a Function of
several inputs), then every pair (outer, inner) with argnums 0 that has at most one forward-mode level,
plus ``autograd_grad`` (plain ``torch.autograd.grad``, the seed's outer level) over each level. That is
every stack of depth <= 2, so a table row says the same on every run; ``--max-cases``/``--duration`` cut
the list short (in this order), and a ``--duration`` longer than the list goes on with random stacks of
depth 3 (seeded; none whose ``fuzzer.ir.shapes.reference_cost`` on the first input's shape exceeds
MAX_RANDOM_COST: a stack is not interrupted at the deadline, and its loops in create_graph mode grow as
the product of the levels' sizes). vmap levels have batch size 2, in_dims and out_dims 0.

NOTE [check findings]
Of one target, findings are one when they are of the same kind and show the same unexplained error
(its fingerprint, NOTE [error buckets]: one torch error is one bug under whatever stack and oracle it
shows up); a rule's wrong values are one finding per rule oracle; torch's wrong values are one per verdict
and multiset of level classes, whatever the oracle and order (reverse: grad, vjp, jacrev,
autograd.grad; forward: jvp, jacfwd; hessian; linearize; vmap): ``jvp > hessian`` and ``jacfwd >
hessian`` under either oracle are one, ``grad > hessian`` and ``linearize`` two. The first found, which
is the smallest (stacks are enumerated shortest first), is shrunk, and findings that shrink to the same
case are one again.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from ..codegen.check_render import RULE_ORACLES, SECOND_ORDER, render_check, rule_applies, shrunk_target
from ..ir.case import FORWARD_MODE_TRANSFORMS, Compile, Transform
from ..ir.oracles import COMPILED, alternate, applicable_to, oracle_kind
from ..ir.shapes import reference_cost
from ..ir.target import CheckCase, Target, TargetError
from ..ir.validity import SideInfo, stack_sides
from ..ir.verdicts import FINDING_VERDICTS
from ..judge.compare import Limitation, classify, load_registry
from ..judge.execute import Outcome, compile_unavailable, run_script
from .targets import reprobe

#: NOTE [check stacks]: the create_graph side of hessian > jvp > hessian on 3 elements (cost 118098) takes
#: 14 s, hessian > vmap > jacfwd (11664) under one.
MAX_RANDOM_COST = 20_000
LEVELS = ("grad", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "vmap", "linearize")
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
}


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

    @property
    def key(self) -> tuple[object, ...]:
        """NOTE [check findings]: what makes two findings of one target the same one."""
        if self.result.fingerprint:
            return (self.kind, self.result.fingerprint)
        if self.kind == "function":
            return (self.kind, self.case.oracle, self.result.verdict)
        return (self.kind, self.result.verdict, tuple(sorted(_CLASS[t.name] for t in self.case.transforms)))


@dataclass
class TargetReport:
    target: Target
    rules: dict[str, Verdict] = field(default_factory=dict)
    stacks: dict[str, dict[str, int]] = field(default_factory=dict)  # torch oracle -> verdict -> count
    findings: list[CheckFinding] = field(default_factory=list)
    cases: int = 0

    def count(self, oracle: str, verdict: str) -> None:
        row = self.stacks.setdefault(oracle, {})
        row[verdict] = row.get(verdict, 0) + 1


def stacks(target: Target) -> Iterator[tuple[Transform, ...]]:
    """NOTE [check stacks]: every stack of depth <= 2 (the order is the table's)."""

    def level(name: str, argnums: int = 0) -> Transform:
        return Transform("vmap", batch_size=2) if name == "vmap" else Transform(name, argnums=argnums)

    for name in LEVELS:
        for i in range(target.n_inputs if name != "vmap" else 1):
            yield (level(name, i),)
    for outer in LEVELS:
        for inner in LEVELS:
            if outer in FORWARD_MODE_TRANSFORMS and inner in FORWARD_MODE_TRANSFORMS:
                continue
            yield (level(outer), level(inner))
    for inner in LEVELS:
        yield (Transform("autograd_grad"), level(inner))


def random_stacks(seed: int, target: Target) -> Iterator[tuple[Transform, ...]]:
    """NOTE [check stacks]: random depth-3 stacks, none that costs more than MAX_RANDOM_COST."""
    rng = random.Random(seed)
    base = target.shapes[0] if target.shapes else ()
    while True:
        names = [rng.choice(LEVELS) for _ in range(3)]
        if sum(n in FORWARD_MODE_TRANSFORMS for n in names) > 1:
            continue
        stack = tuple(Transform("vmap", batch_size=2) if n == "vmap" else Transform(n) for n in names)
        if reference_cost(stack, base, target.out_shape) <= MAX_RANDOM_COST:
            yield stack


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
    ) -> None:
        self.timeout = timeout
        self.registry = registry if registry is not None else load_registry()
        self.compile = compile

    # ----------------------------------------------------------------------------- rule oracles

    def rule(self, target: Target, oracle: str) -> Verdict:
        why = rule_applies(target, oracle)
        if why is not None:
            return Verdict("not_applicable", why)
        case = CheckCase(target, (), oracle)
        outcome = run_script(render_check(case), (oracle,), timeout=self.timeout)[oracle]
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

    # ----------------------------------------------------------------------------- torch oracles

    def valid(self, target: Target, stack: tuple[Transform, ...], oracle: str, rules: dict[str, Verdict]) -> str | None:
        """Why a torch disagreement on this comparison could come from the Function's rules (NOTE [check
        oracles]): the rule oracles the two sides' difference relies on that did not come out
        consistent; None when it cannot."""
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
            case = CheckCase(target, stack, todo[0], compile=self.compile)
            outcomes = run_script(render_check(case, also=tuple(todo[1:])), tuple(todo), timeout=self.timeout)
            for oracle in todo:
                both = stack_sides(stack, oracle, self.compile)
                c = classify(outcomes[oracle], self.registry, target.conditions(), both)
                out[oracle] = Verdict(c.verdict, c.limitation or "", c.fingerprint, outcomes[oracle])
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
    ) -> TargetReport:
        report = TargetReport(target)
        for oracle in RULE_ORACLES:
            v = self.rule(target, oracle)
            report.rules[oracle] = v
            if v.finding:
                report.findings.append(CheckFinding("function", CheckCase(target, (), oracle), v))
        seen = {f.key for f in report.findings}
        listed = list(stacks(target))
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
                report.count(oracle, v.verdict)
                if v.finding:
                    f = CheckFinding("torch", CheckCase(target, stack, oracle, compile=self.compile), v)
                    if f.key not in seen:
                        seen.add(f.key)
                        report.findings.append(f)
        if shrink:
            shrunk: dict[tuple[object, ...], CheckFinding] = {}
            for f in report.findings:
                f = self.shrink(f, report.rules)
                shrunk.setdefault((*f.key, tuple(t.name for t in f.case.transforms)), f)
            report.findings = list(shrunk.values())
        return report

    # ----------------------------------------------------------------------------- shrinking

    def shrink(self, finding: CheckFinding, rules: dict[str, Verdict], *, budget: int = 40) -> CheckFinding:
        """The smallest case (fewer levels, then smaller tensors) that still gives the same finding: same
        kind, oracle, verdict and error fingerprint."""
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
        return CheckFinding(finding.kind, case, result, tried)


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
    """One step smaller: a level dropped (the oracle must still apply), then a tensor dim cut."""
    stack = case.transforms
    for i in range(len(stack)):
        rest = stack[:i] + stack[i + 1 :]
        if rest and case.oracle in applicable_to(rest) and all(t.name != "autograd_grad" for t in rest):
            yield replace(case, transforms=rest)
    shapes = case.target.shapes
    for k, shape in enumerate(shapes):
        for d, size in enumerate(shape):
            for new in sorted({1, 2} | {size // 2}):
                if 0 < new < size:
                    cut = [s[:d] + (new,) + s[d + 1 :] if j == k else s for j, s in enumerate(shapes)]
                    try:
                        target = reprobe(shrunk_target(case.target, cut))
                    except TargetError:
                        continue
                    yield replace(case, target=target)
