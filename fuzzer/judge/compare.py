"""From the script's raw verdict to affuzz's verdict: the known-limitations registry, applied per side.

The rendered script decides ``consistent`` / ``value_mismatch`` / ``structure_mismatch`` /
``error_functorch_only`` / ``error_reference_only`` / ``different_errors`` / ``torch_bug_error`` /
``nonfinite`` by itself (``torch.testing.assert_close`` tolerances for the dtype; two errors agree only
with the same type and message; an error PyTorch calls a bug is always ``torch_bug_error``). Here, an
error explained by a documented limitation (``known_limitations.json``: name, regex on the message, the
conditions under which the documentation says it happens, docs link) is explained *for the side that
raised it*, and only where the conditions hold for that Function and for what that side runs
(:class:`fuzzer.ir.validity.SideInfo`). A pair is ``expected`` only when every side that raised is
explained; otherwise the unexplained errors are the finding, and their fingerprints bucket it.

NOTE [promises]
Some registry entries are *promises* (``"promise"``: what the documentation or torch's own check says):
the error is not a limitation of one API but torch's rule for the program, so every side that runs
the program where the conditions hold owes that error. A side that raises it is explained; where the
other side runs the same program (the entry's conditions hold for it too) and returns a value, the pair
is ``promise_broken`` (a finding whatever the validity table says of the values, NOTE [broken rules] in
:mod:`fuzzer.judge.judge`), bucketed by the promised error's fingerprint, the side that returned being
the one at fault. The first promise: a jvp rule that returns a non-view tangent for an output that is
an input as-is or a view of one, which plain forward AD refuses (the generator draws such Functions
rarely, feature ``jvp_not_view``). The second: a tensor saved for backward and then modified in place
makes backward raise (the autograd docs' in-place correctness checks); it binds where ``f`` modifies a
saved output in place and the side runs the Function's backward (``promise_requires``: conditions
beyond those that explain the error, for both sides). torch.func checks versions too, so a side that
returns there has lost the check (a tensor returned twice gets two wrappers that share storage but not
a version counter: a hand check of the old corpus found it silently computing from the modified tensor).
Not a promise: double backward through ``@once_differentiable``. The docs say it "raises an error", but
the error node hangs off detached stand-ins of backward's outputs, so only ``.backward()`` (which
accumulates into every leaf) reaches it; torch.autograd.grad treats the once-differentiable gradient as
unrelated to the input (no error, that term's second derivative dropped), and torch.func's results were
made consistent with that on purpose (pytorch/pytorch#90224, 2023-01-17 comment). No side runs
``.backward()``, so no side owes the error (tests/judge/test_promises.py pins it).

NOTE [custom op promises]
Under the custom-op oracles (NOTE [custom op mode] in :mod:`fuzzer.ir.custom_op`) every limitation is a
promise from the autograd.Function twin to the op: register_autograd's docs say its ctx "is the same ctx
object used by torch.autograd.Function" and its backward has "the same semantics", so the op is the
Function written another way. Where the twin raises a documented error whose conditions hold for the op's
side too (no jvp rule under forward-mode AD: the custom op API has no way to register one), an op that
returns a value instead has dropped the rule the error enforces (on torch 2.13 torch.func's forward mode
gives such an op a zero tangent). The reverse is not owed: the op's own refusals are findings or known.

NOTE [compiled promises]
Under ``compiled_vs_eager`` (NOTE [compiled mode] in :mod:`fuzzer.ir.case`) every limitation is a promise
from the eager side to the compiled one: torch.compile runs the same program (a graph break falls back
to eager), so where the eager side raises a documented error whose conditions hold for the compiled
side too (no vmap rule under vmap, no jvp under forward AD, an input returned as-is and saved...), a
compiled side that returns a value instead has changed what the program does: Dynamo bypassed the rule
the error enforces (the tracker's reports of Dynamo dropping a Function's custom jvp are of this
shape). The reverse is not owed: a compiled side may raise a compile limitation (a graph break under
``fullgraph=True``) where eager returns; that is ``expected``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..ir.case import Case
from ..ir.dataflow import value_provided_by_saved
from ..ir.errors import AffuzzError
from ..ir.validity import SideInfo, jvp_not_view, values_meaningless
from ..ir.verdicts import ERROR_VERDICTS
from .execute import Outcome, Side

#: The closed vocabulary of a limitation's ``requires``: conditions on the side and on the Function.
CONDITIONS = (
    "side_functorch",
    "side_vmap",
    "side_forward_ad",
    "no_vmap_rule",
    "no_jvp_rule",
    "legacy_forward",
    "saves_input_returned_as_is",
    "f_modifies_output_in_place",
    "side_linearize_nested",
    "jvp_not_view",
    "side_reverse",
    "saved_output_modified_in_place",
    "side_compiled",
    "side_fullgraph",
    "side_aot_autograd",
    "side_higher_order",
    "inplace_in_forward",
    "custom_vmap_rule",
    "side_outputs_not_restacked",
    "side_saved_tensor_hooks",
    "side_functorch_reverse",
    "side_without_saved_tensor_hooks",
    "side_selective_checkpoint",
    "mutates_in_place",
    "side_compiled_autograd",
)
DEFAULT_REGISTRY = Path(__file__).with_name("known_limitations.json")


class RegistryError(AffuzzError, ValueError):
    pass


#: The conditions that are about the Function (and ``f``), not about what a side runs.
FUNCTION_CONDITIONS = (
    "no_vmap_rule",
    "no_jvp_rule",
    "legacy_forward",
    "saves_input_returned_as_is",
    "f_modifies_output_in_place",
    "jvp_not_view",
    "saved_output_modified_in_place",
    "inplace_in_forward",
    "custom_vmap_rule",
    "mutates_in_place",
)


def function_conditions(case: Case) -> dict[str, bool]:
    """Each of :data:`FUNCTION_CONDITIONS` for ``case``'s Function and ``f``."""
    fn = case.function
    return {
        "no_vmap_rule": fn.vmap_rule == "none",
        "no_jvp_rule": not fn.jvp_rule,
        "legacy_forward": fn.style == "legacy",
        "saves_input_returned_as_is": saves_input_returned_as_is(case),
        "f_modifies_output_in_place": bool(case.f.inplace),
        "jvp_not_view": jvp_not_view(fn),
        # and backward runs at all: some output f uses is differentiable (a run of run15 blamed a side that,
        # rightly, never ran backward through an output marked non-differentiable)
        "saved_output_modified_in_place": values_meaningless(case) == "saved_tensor_modified_in_place"
        and any(j not in fn.non_differentiable for j in case.f.uses),
        "inplace_in_forward": any(n.inplace for n in fn.nodes),  # NOTE [in-place forward]
        # NOTE [custom op mode]: a custom op is batched per sample and stacked anew with or without a vmap rule
        "custom_vmap_rule": fn.vmap_rule in ("custom", "custom_wrong") or fn.style == "custom_op",
        "mutates_in_place": mutates_in_place(case),
    }


def mutates_in_place(case: Case) -> bool:
    """Something in ``f`` modifies a tensor in place: ``f`` an output, forward an intermediate, or a dirty
    input."""
    fn = case.function
    return bool(case.f.inplace) or any(n.inplace for n in fn.nodes) or bool(fn.dirty)


def condition_holds(name: str, function: Mapping[str, bool], side: SideInfo) -> bool:
    """Whether condition ``name`` holds, ``function`` being :func:`function_conditions` (or the same
    conditions found another way, for a Function that is not a case: ``affuzz check``)."""
    sides = {
        "side_functorch": side.functorch,
        "side_vmap": side.vmap,
        "side_forward_ad": side.forward_ad,
        "side_linearize_nested": side.linearize_nested,
        "side_reverse": side.path[:1]
        == ("R",),  # the first order is the Function's backward (it unpacks what it saved)
        # NOTE [compiled mode]: what the side runs under torch.compile
        "side_compiled": side.compiled is not None,
        "side_fullgraph": side.compiled is not None and side.compiled.fullgraph,
        "side_aot_autograd": side.compiled is not None and side.compiled.backend in ("aot_eager", "inductor"),
        "side_higher_order": len(side.path) >= 2,  # a derivative of a derivative of the Function
        # a hand-written vmap rule stacks the per-sample outputs anew: what f then modifies in place under
        # vmap is the stack, not the tensors the Function saved (a hand check of an issue-22 run). Only
        # where the Function's forward runs on batched primals (an explicit vmap): jacrev and hessian vmap
        # their cotangents and tangents, the rule never runs, and f modifies the very outputs saved
        "side_outputs_not_restacked": not (side.batched and function.get("custom_vmap_rule", False)),
        # NOTE [checkpoint mode]: f runs under saved-tensor hooks (non-reentrant checkpointing is built on them)
        "side_saved_tensor_hooks": side.checkpoint is not None,
        "side_functorch_reverse": side.functorch_reverse,
        "side_without_saved_tensor_hooks": side.checkpoint is None,
        "side_selective_checkpoint": side.checkpoint is not None and side.checkpoint.kind == "selective",
        "side_compiled_autograd": side.compiled is not None and side.compiled.autograd,
    }
    return sides[name] if name in sides else bool(function.get(name, False))


def saves_input_returned_as_is(case: Case) -> bool:
    """A setup_context-style Function that returns an input as-is and saves it (for backward, directly
    or as that output, or for forward with a jvp rule, which saves every input)."""
    fn = case.function
    if fn.style != "setup_context":
        return False
    passed = case.f.apply_args or tuple(range(fn.n_inputs))  # NOTE [aliased inputs]: one tensor, two inputs

    def tensor(ref: str | None) -> str | None:  # the caller's tensor an input ref is
        return f"x{passed[int(ref[1:])]}" if ref is not None and ref.startswith("x") else ref

    returned = {o.ref for o in fn.outputs if o.kind == "input"}
    jvp_saved = returned - {f"x{i}" for i in fn.dirty}  # a jvp rule saves every input but a dirty one
    saved = {
        tensor(value_provided_by_saved(fn, r))
        for r in fn.saved
        if not r.startswith("o") or fn.outputs[int(r[1:])].kind == "input"
    }
    return bool({tensor(r) for r in returned} & saved) or (bool(jvp_saved) and fn.jvp_rule)


@dataclass(frozen=True)
class Limitation:
    name: str
    requires: tuple[str, ...]
    pattern: re.Pattern[str]
    docs: str
    issue: str | None = None
    promise: str | None = None  # NOTE [promises]: what the docs (or torch's own check) promise
    # NOTE [promises]: conditions under which the promise binds, beyond those that explain the error
    promise_requires: tuple[str, ...] = ()

    def holds_for(self, info: SideInfo, function: Mapping[str, bool]) -> bool:
        """Whether the promise's conditions (``requires`` and ``promise_requires``) hold for a side
        running ``info`` (the program the promise is about)."""
        return all(condition_holds(c, function, info) for c in self.requires + self.promise_requires)

    def explains(self, side: Side, info: SideInfo, function: Mapping[str, bool]) -> bool:
        """Whether this limitation explains ``side``'s error: the message matches and every condition
        the documentation names holds for this Function and for what this side runs."""
        return (
            not side.ok
            and not side.torch_bug
            and self.pattern.search(f"{side.error_type}: {side.error}") is not None
            and all(condition_holds(c, function, info) for c in self.requires)
        )


def load_registry(path: Path | str = DEFAULT_REGISTRY) -> tuple[Limitation, ...]:
    """Parse and check the registry; errors name the file and the entry."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise RegistryError(f"{path}: cannot read known limitations ({e})") from None
    if not isinstance(data, dict) or data.get("schema_version") != 2 or not isinstance(data.get("limitations"), list):
        raise RegistryError(f"{path}: expected {{'schema_version': 2, 'limitations': [...]}}")
    out = []
    for i, e in enumerate(data["limitations"]):
        where = f"{path}: limitations[{i}]"
        if not isinstance(e, dict) or not {"name", "requires", "pattern", "docs"} <= set(e):
            raise RegistryError(f"{where}: needs name, requires, pattern and docs")
        if not isinstance(e["requires"], list) or not e["requires"]:
            raise RegistryError(f"{where}: requires must list at least one condition")
        bad = [c for c in e["requires"] if c not in CONDITIONS]
        if bad:
            raise RegistryError(f"{where}: unknown condition(s) {bad} (known: {', '.join(CONDITIONS)})")
        try:
            pattern = re.compile(e["pattern"])
        except re.error as err:
            raise RegistryError(f"{where}: bad pattern ({err})") from None
        promise = e.get("promise")
        if promise is not None and (not isinstance(promise, str) or not promise.strip()):
            raise RegistryError(f"{where}: promise must be a sentence saying what torch promises")
        more = e.get("promise_requires", [])
        if more and promise is None or not isinstance(more, list) or any(c not in CONDITIONS for c in more):
            raise RegistryError(f"{where}: promise_requires must list known conditions, with a promise")
        out.append(
            Limitation(e["name"], tuple(e["requires"]), pattern, e["docs"], e.get("issue"), promise, tuple(more))
        )
    return tuple(out)


@dataclass(frozen=True)
class Classified:
    verdict: str
    limitation: str | None  # the limitations that explain an ``expected`` pair
    fingerprint: str  # NOTE [error buckets]: the unexplained (or torch-bug) errors, '' for value verdicts


def classify(
    outcome: Outcome,
    registry: tuple[Limitation, ...],
    case: Case | Mapping[str, bool],
    sides: tuple[SideInfo, SideInfo],
) -> Classified:
    """Classify the script's raw verdict: per side, by what that side runs (module docstring).

    NOTE [error buckets]
    An error finding's fingerprint (:attr:`Side.fingerprint`: type, first clause of the message with
    numbers, bracketed details and class names ignored, the torch frame that raised) is that of the
    first error no limitation explains, or that PyTorch calls a bug, side A (torch.func) before side B:
    the error torch.func raised is the one to file, whatever the other side then did. It is the same
    under every oracle, stack and verdict the error shows up in, so one torch error is one bucket
    (:func:`fuzzer.triage.buckets.error_bucket_id`).
    """
    v = outcome.verdict
    function = function_conditions(case) if isinstance(case, Case) else case
    pairs = ((outcome.functorch, sides[0]), (outcome.reference, sides[1]))
    if v == "torch_bug_error":
        return Classified(v, None, next(s.fingerprint for s, _ in pairs if s.torch_bug))
    if v not in ERROR_VERDICTS:
        return Classified(v, None, "")
    # NOTE [errors Dynamo wraps] in fuzzer/codegen/error_key.py: an error is explained, and two errors
    # agree, as the program's own error; the fingerprint stays the raised one's
    a, b = outcome.functorch.program_error(), outcome.reference.program_error()
    if v == "different_errors" and (outcome.functorch.inner or outcome.reference.inner) and a.key == b.key:
        return Classified("consistent", None, "")
    names: list[str] = []
    unexplained: list[str] = []
    broken: list[tuple[str, str]] = []  # NOTE [promises]: (promise, fingerprint) the other side broke
    for (side, info), (other, other_info) in zip(pairs, pairs[::-1], strict=True):
        if side.ok:
            continue
        hit = [lim for lim in registry if lim.explains(side.program_error(), info, function)]
        if hit:
            names += [lim.name for lim in hit]
            # NOTE [compiled promises]: the compiled side owes every error its eager side raised (where the
            # two run the same program: not a compiled side that is also checkpointed, NOTE [checkpoint mode])
            owed = (
                info.compiled is None and other_info.compiled is not None and info.checkpoint == other_info.checkpoint
            ) or (other_info.custom_op and not info.custom_op)  # NOTE [custom op promises]
            broken += [
                (lim.name, side.fingerprint)
                for lim in hit
                if (lim.promise or owed)
                and other.ok
                and lim.holds_for(info, function)
                and lim.holds_for(other_info, function)
            ]
        else:
            unexplained.append(side.fingerprint)
    if unexplained:
        return Classified(v, None, unexplained[0])
    if broken:
        return Classified("promise_broken", broken[0][0], broken[0][1])
    return Classified("expected", "+".join(dict.fromkeys(names)), "")
