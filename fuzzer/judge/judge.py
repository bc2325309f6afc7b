"""The judge: the one place that runs a case under an oracle and decides its verdict.

Every caller goes through :class:`Judge`: fuzzing (:mod:`fuzzer.campaign.worker`), ablation and signatures,
shrinking (:func:`fuzzer.triage.shrink.case_runner`), replay in process and in replay workers. What it does,
in order:

1. NOTE [valid comparisons] (:mod:`fuzzer.ir.validity`): with torch under test, a comparison of rules the
   Function itself makes disagree decides nothing about values: ``not_applicable`` with its reason,
   unless torch calls its own error a bug (NOTE [broken rules]).
2. NOTE [the repro is what runs] (:mod:`fuzzer.judge.execute`): the rendered script's own ``check()``
   decides the raw verdict (including ``nonfinite`` and ``torch_bug_error``).
3. :func:`fuzzer.judge.compare.classify`: documented limitations per side; ``expected`` only when every
   error is explained; error findings get the fingerprint that buckets them (NOTE [error buckets]).
4. NOTE [float32 findings] (below).

NOTE [broken rules]
A Function that breaks a documented rule, or whose own rules disagree (the validity table), makes a
comparison of *values* meaningless; it never makes an internal assertion of torch acceptable. Such an
oracle still runs (in the same script as the others, NOTE [one exec per case]): a ``torch_bug_error``
there is a finding, its judgement naming the rule (``broken_rule``, a reason of
:data:`fuzzer.ir.validity.REASONS`) so the finding, its repro header and its draft say it; every other
verdict is ``not_applicable`` with that reason, as before, with no float32 re-check. A program that
corrupts what the Function saved (:func:`fuzzer.ir.validity.values_meaningless`) makes only values
meaningless: a value or structure mismatch there is ``not_applicable``, an unexplained error still a
finding.

NOTE [float32 findings]
A float32 ``value_mismatch`` counts only if it persists in float64; otherwise it is rounding noise
(``consistent``, counted as ``float32_noise``). Nothing else is re-checked: an error, a hang or a
structure mismatch in float32 is a finding as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from ..ir.case import RECOMPUTING_KINDS, Case
from ..ir.features import features
from ..ir.oracles import CHECKPOINT, COMPILED, apis_needed, oracle_kind
from ..ir.validate import validate
from ..ir.validity import VALUES_ONLY_RULES, SideInfo, repair, rule_conflict, sides, values_meaningless
from ..ir.verdicts import FINDING_VERDICTS
from .apis import API_REASONS, first_missing
from .compare import Limitation, classify, load_registry, mutates_in_place
from .execute import Outcome, run_oracles

SUBJECTS = ("torch", "function")
#: ``not_applicable`` reason of an oracle whose case lacks the feature tags it needs (``needs_tags``: a
#: custom-op oracle on a case whose Function is not written as a custom op, e.g. a shrinker's variant)
NOT_AN_OP = "case_lacks_needed_tags"
#: ``not_applicable`` reason of the compiled oracle where this torch (and Python) has no torch.compile
NO_COMPILE = API_REASONS["torch.compile"]
#: ``not_applicable`` reason of a compiled side stopped by the recompile limit (NOTE [compiled cases] in
#: fuzzer/judge/execute.py: made a hard error so that it never compares eager with eager); counted, not a
#: finding: the published repro, in a fresh process, would not reach the limit
RECOMPILE_LIMIT = "compile_recompile_limit"

# NOTE [torch.func of a compiled function]
# "Applying a torch.func transform to a torch.compile'd function: This doesn't work and is being tracked
# by https://github.com/pytorch/pytorch/issues/100320. As a workaround, please put the torch.compile
# outside of the torch.func transform" (docs/source/compile/torchfunc-and-torchcompile.rst). Dynamo
# refuses it with "Unsupported functorch tracing attempt" for every backend but ``eager``, which is let
# through on purpose. So where the compiled side places torch.compile inside a torch.func level
# (placement ``inside``) no comparison with eager is promised: a value or error disagreement, or a
# documented check the compiled side skips, is ``expected`` under this name (a hand check found such
# findings to be this, e.g. Dynamo's ApplyTemplate wrapper accepting a legacy Function eager refuses).
# An error PyTorch calls a bug of its own (torch_bug_error, an internal assert) is still a finding.
FUNC_OF_COMPILED = "func_transform_of_compiled_function"
# NOTE [selective checkpoint under torch.compile]
# torch.compile warns, where a selective-checkpoint policy (``context_fn``) is traced, "Please make sure the
# checkpointed region does not contain in-place ops": compiled selective checkpointing of a region that
# modifies tensors in place promises nothing (NOTE [checkpoint mode]). Such a comparison's value or error
# disagreement is ``expected`` under this name; torch's own internal errors stay findings.
SAC_INPLACE_COMPILED = "selective_checkpoint_inplace_under_compile"
# NOTE [checkpoint recomputed elsewhere]
# torch.utils.checkpoint's docs: "If the function invocation during the backward pass differs from the
# forward pass, e.g., due to a global variable, the checkpointed version may not be equivalent,
# potentially causing an error being raised or leading to silently incorrect gradients." A recomputing
# checkpoint (kinds checkpoint and selective) recomputes f where backward runs: outside a forward-AD dual
# level the forward ran in (a jvp or jacfwd level, or their dual-tensor twins), outside a torch.func level
# wrapped around it (placement inside). There the recomputation differs from the forward by design, so a
# value or error disagreement is ``expected`` under this name; torch's own internal errors stay findings.
RECOMPUTED_ELSEWHERE = "checkpoint_recomputed_in_another_context"
#: What no documentation promises there (a hang, a crash or an internal assert stays a finding).
_UNPROMISED = (
    "value_mismatch",
    "structure_mismatch",
    "error_functorch_only",
    "error_reference_only",
    "different_errors",
    "promise_broken",
    "slow",
)


@dataclass(frozen=True)
class Judgement:
    verdict: str
    oracle: str
    reason: str | None = None  # limitation(s) for ``expected``, the reason for ``not_applicable``
    fingerprint: str = ""  # NOTE [error buckets]
    outcome: Outcome | None = None
    float32_noise: bool = False
    broken_rule: str | None = None  # a torch_bug_error of a Function that breaks this rule (NOTE [broken rules])
    repaired: Case | None = None  # NOTE [repaired rules]: the clean twin this finding is of, when not the case

    @property
    def seconds(self) -> float:
        return self.outcome.seconds if self.outcome is not None else 0.0


class Judge:
    """Runs and classifies cases. ``subject="torch"`` (fuzzing) skips comparisons of rules that
    disagree by the Function's own definition; ``subject="function"`` (the Function is under test)
    runs them all."""

    def __init__(
        self,
        registry: tuple[Limitation, ...] | None = None,
        *,
        timeout: float | None = 60.0,
        subject: str = "torch",
    ) -> None:
        if subject not in SUBJECTS:
            raise ValueError(f"subject must be one of {SUBJECTS}, not {subject!r}")
        self.registry = registry if registry is not None else load_registry()
        self.timeout = timeout
        self.subject = subject

    def __call__(self, case: Case, oracle: str, *, recheck: bool = True) -> Judgement:
        return self.all(case, (oracle,), recheck=recheck)[0]

    def all(
        self,
        case: Case,
        oracles: tuple[str, ...],
        *,
        before: Callable[[str], None] | None = None,
        recheck: bool = True,
    ) -> list[Judgement]:
        """The judgement of ``case`` under each of ``oracles``, every oracle that runs run from one script
        (NOTE [one exec per case]): the Function is defined once and side A, the same under every
        oracle, runs once. ``before(o)`` is called before oracle ``o`` runs."""
        # NOTE [oracle table]: a mode whose torch API this torch lacks is decided without running it
        missing = {o: r for o in oracles if (r := first_missing(apis_needed(case, o)))}
        tags = set(features(case)) if any(oracle_kind(o).needs_tags for o in oracles) else set()
        missing |= {o: NOT_AN_OP for o in oracles if not set(oracle_kind(o).needs_tags) <= tags}
        if missing:
            rest = tuple(o for o in oracles if o not in missing)
            done = self.all(case, rest, before=before, recheck=recheck) if rest else []
            return [
                next((j for j in done if j.oracle == o), None) or Judgement("not_applicable", o, missing[o])
                for o in oracles
            ]
        todo = [(o, sides(case, o)) for o in oracles]
        outcomes = run_oracles(case, oracles, timeout=self.timeout, before=before)
        torch_under_test = self.subject == "torch"
        corrupt = values_meaningless(case) if torch_under_test else None  # the same under every oracle
        done: list[Judgement] = []
        for oracle, both in todo:
            ref = outcomes[oracle].reference
            if oracle == COMPILED and ref.error_type == "FailOnRecompileLimitHit":
                done.append(Judgement("not_applicable", oracle, RECOMPILE_LIMIT, outcome=outcomes[oracle]))
                continue
            rule = rule_conflict(case, *both) if torch_under_test else None
            j = self._classify(case, oracle, both, outcomes[oracle], recheck and rule is None)
            if rule in VALUES_ONLY_RULES and j.verdict not in ("value_mismatch", "structure_mismatch"):
                rule = None  # an error pair is judged as usual
            if rule is not None:  # NOTE [broken rules]
                if j.verdict in ("torch_bug_error", "promise_broken"):  # NOTE [promises]: errors, not values
                    j = replace(j, broken_rule=rule)
                else:
                    twin = self._repaired(case, oracle, rule) if j.verdict in FINDING_VERDICTS else None
                    j = twin or Judgement("not_applicable", oracle, rule, outcome=j.outcome)
            elif corrupt is not None and j.verdict in ("value_mismatch", "structure_mismatch"):
                j = Judgement("not_applicable", oracle, corrupt, outcome=j.outcome)
            if torch_under_test and j.verdict in _UNPROMISED:
                unpromised = next((n for o, n, holds in UNPROMISED if o == oracle and holds(case, both[1])), None)
                if unpromised is not None:
                    j = Judgement("expected", oracle, unpromised, outcome=j.outcome)
            done.append(j)
        return done

    def _repaired(self, case: Case, oracle: str, rule: str) -> Judgement | None:
        """NOTE [repaired rules]: the finding of ``case``'s repaired twin under ``oracle``, or None."""
        twin = repair(case, rule)
        if twin is None:
            return None
        try:
            twin = validate(twin)
        except Exception:  # noqa: BLE001 (a twin the IR refuses: no repair)
            return None
        j = self(twin, oracle)
        if j.verdict not in FINDING_VERDICTS:
            return None
        return replace(j, repaired=j.repaired or twin)

    def _classify(
        self, case: Case, oracle: str, both: tuple[SideInfo, SideInfo], outcome: Outcome, recheck: bool
    ) -> Judgement:
        c = classify(outcome, self.registry, case, both)
        if c.verdict == "value_mismatch" and recheck and case.inputs.dtype != "float64":
            wide = replace(case, inputs=replace(case.inputs, dtype="float64"))
            if self(wide, oracle, recheck=False).verdict == "consistent":
                return Judgement("consistent", oracle, outcome=outcome, float32_noise=True)
        return Judgement(c.verdict, oracle, c.limitation, c.fingerprint, outcome)


def func_of_compiled(case: Case) -> bool:
    """NOTE [torch.func of a compiled function]: the compiled side applies a torch.func transform to a
    torch.compile'd function."""
    return (
        case.compile is not None
        and case.compile.placement == "inside"
        and any(t.name != "autograd_grad" for t in case.transforms)
    )


def sac_inplace_compiled(case: Case) -> bool:
    """NOTE [selective checkpoint under torch.compile]: a compiled selective checkpoint of a region that
    modifies a tensor in place."""
    c = case.checkpoint
    return c is not None and c.kind == "selective" and c.placement == "compiled" and mutates_in_place(case)


def recomputed_elsewhere(case: Case, side: SideInfo) -> bool:
    """NOTE [checkpoint recomputed elsewhere]: ``side`` recomputes a checkpointed f in another context than
    its forward ran in."""
    c = case.checkpoint
    if c is None or c.kind not in RECOMPUTING_KINDS:
        return False
    return side.forward_ad or (c.placement == "inside" and side.functorch)


#: The comparisons the docs promise nothing of, by oracle, in the order they are tried: (oracle, the
#: ``expected`` reason, whether it holds for the case and its side B). A disagreement there is
#: ``expected`` (but torch's own internal errors, hangs and crashes, which stay findings).
UNPROMISED: tuple[tuple[str, str, Callable[[Case, SideInfo], bool]], ...] = (
    (COMPILED, FUNC_OF_COMPILED, lambda case, side: func_of_compiled(case)),  # NOTE [torch.func of a compiled function]
    (CHECKPOINT, SAC_INPLACE_COMPILED, lambda case, side: sac_inplace_compiled(case)),
    (CHECKPOINT, RECOMPUTED_ELSEWHERE, recomputed_elsewhere),  # NOTE [checkpoint recomputed elsewhere]
)


def judgement_detail(j: Judgement) -> str:
    """One line for a replay table: the reason of a quiet verdict, the error fingerprint or side A's
    value of a finding."""
    if j.verdict in ("expected", "not_applicable"):
        return j.reason or ""
    if j.verdict in ("consistent", "nonfinite") or j.outcome is None:
        return ""
    return j.fingerprint or f"functorch: {j.outcome.functorch.summary()}"
