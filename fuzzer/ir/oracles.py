"""Oracles: which two evaluations of the same case must agree. Torch-free.

NOTE [oracles]
Every oracle compares side A, the case's stack under torch.func ("functorch"), with a side B that must
compute the same mathematics another way:

    oracle                      side B
    ------                      ------
    functorch_vs_create_graph   each level replaced by its plain-autograd twin (NOTE [mode equivalence])
    jacrev_vs_jacfwd            first-order jacrev and jacfwd levels (no derivative level inside them)
                                swapped for each other, still under torch.func
    vmap_vs_loop                every vmap replaced by a Python loop over the batch (vmap_loop), the
                                other levels still torch.func (only with another level: a stack of vmaps
                                alone is the main oracle)
    forward_over_reverse        second-order levels recomputed the other way round: a jacrev directly
                                over a reverse level (grad, jacrev, vjp) becomes jacfwd, and hessian
                                (jacfwd over jacrev) becomes jacrev over jacrev

    compiled_vs_eager           the same computation under torch.compile (NOTE [compiled mode] in
                                fuzzer/ir/case.py); its side A is the eager side it compiles: the
                                case's stack under torch.func, or, where torch.compile goes around f
                                under plain autograd (placement ``plain``), the create_graph side
    checkpoint_vs_plain         the same computation with f under activation checkpointing or
                                saved-tensor hooks (NOTE [checkpoint mode] in fuzzer/ir/case.py); its
                                side A is the side it wraps (create_graph, or torch.func for placement
                                ``inside``)
    custom_op_vs_function       a case whose Function is written as a torch.library custom op (NOTE
                                [custom op mode] in fuzzer/ir/custom_op.py): the case's stack under
                                torch.func over the op (side A) and over its autograd.Function twin
    custom_op_vs_function_plain the same with both sides the create_graph twins (plain autograd)
    custom_op_opcheck           the create_graph side over the op, and the same once
                                torch.library.opcheck passed the op on the arguments f gives it (on
                                a sample of the custom-op Functions: OPCHECK_ONE_IN)

The first runs on every case; the metamorphic ones on every case they apply to; a mode's oracle (the
compiled and the checkpoint one) on the cases that carry its field (``compile``, ``checkpoint``; the
campaign gives each mode its own share of the time); the custom-op ones on the cases whose Function is
written as a custom op (every other oracle runs on those too, over the op). Verdict names stay the same
for all oracles: "functorch" is side A, "reference" is side B.

NOTE [oracle table]
One row per oracle (:data:`ORACLE_KINDS`): side B's mode name in a script, how side B is built from side A
(``side_b``: ``twins`` the create_graph twins, ``loops`` vmap as a loop, ``alternate`` another torch.func
stack, ``compiled``, ``checkpointed``, ``function_twin`` the op's autograd.Function twin, ``opcheck``
the op checked by torch.library.opcheck), the case field a mode's oracle needs (its other oracles' findings
are reported without it), side B in words for drafts, the torch APIs it needs (:func:`apis_needed`; where
this torch lacks one, the oracle is ``not_applicable`` with that reason), and whether ``affuzz check``
runs it. Every consumer (validity's sides, the composer, the renderers, drafts) dispatches on the row's
``side_b`` through a table of its own keyed by :data:`SIDE_B_RECIPES`, which a test checks is complete;
:func:`oracle_kind` raises on an unknown name. Adding an oracle is a row here and one entry in each of
those tables (docs/internals.md lists them).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, replace

from .case import FORWARD_MODE_TRANSFORMS, Case, Checkpoint, Compile, FunctionDef, Transform
from .errors import AffuzzError

#: How side B is built from side A (NOTE [oracle table]).
SIDE_B_RECIPES = ("twins", "loops", "alternate", "compiled", "checkpointed", "function_twin", "opcheck")
#: Case fields that carry a mode (NOTE [oracle table]): the oracle that needs one is the only one whose
#: findings keep it.
MODE_FIELDS = ("compile", "checkpoint")


@dataclass(frozen=True)
class OracleKind:
    """One oracle (NOTE [oracle table])."""

    name: str
    reference: str  # side B's mode name in a script and in a repro's output
    side_b: str  # one of SIDE_B_RECIPES
    words: str  # side B in words, where a draft cannot name its stack
    mode_field: str | None = None  # the case field this oracle needs (None: it applies by the stack alone)
    in_check: bool = True  # ``affuzz check`` runs it
    side_a: str = "functorch"  # side A's mode where no mode field decides it (see side_a_mode)
    # feature tags a case needs for this oracle to apply at all: essential to each of its findings by
    # definition, so neither ablation nor shrinking takes them away (the custom-op oracles: custom_op)
    needs_tags: tuple[str, ...] = ()
    apis: tuple[str, ...] = ()  # torch APIs it always needs (see apis_needed)
    # the documented limitations of its mode: known_limitations.json entries and the judge's own rules
    # (NOTE [torch.func of a compiled function], NOTE [checkpoint recomputed elsewhere]...)
    limitations: tuple[str, ...] = ()


ORACLE_KINDS: tuple[OracleKind, ...] = (
    OracleKind("functorch_vs_create_graph", "create_graph", "twins", "plain autograd"),
    OracleKind("jacrev_vs_jacfwd", "jacrev_jacfwd_swapped", "alternate", "the same with jacrev and jacfwd swapped"),
    OracleKind("vmap_vs_loop", "vmap_as_loop", "loops", "the same with a loop for vmap"),
    OracleKind("forward_over_reverse", "other_order", "alternate", "the same in the other order"),
    OracleKind(
        "checkpoint_vs_plain",
        "checkpointed",
        "checkpointed",
        "the same with f under activation checkpointing or saved-tensor hooks",
        mode_field="checkpoint",
        in_check=False,
        limitations=(
            "functorch_reverse_with_saved_tensor_hooks",
            "functorch_with_saved_tensor_hooks",
            "selective_checkpoint_cache_mutated",
            "selective_checkpoint_backward_once",
            "selective_checkpoint_inplace_under_compile",
            "checkpoint_recomputed_in_another_context",
        ),
    ),
    OracleKind(
        "custom_op_vs_function",
        "function_twin",
        "function_twin",
        "the same op written as an autograd.Function",
        in_check=False,
        apis=("torch.library.custom_op",),
        needs_tags=("custom_op",),
    ),
    OracleKind(
        "custom_op_vs_function_plain",
        "function_twin_create_graph",
        "function_twin",
        "the same op written as an autograd.Function, both under plain autograd",
        in_check=False,
        apis=("torch.library.custom_op",),
        side_a="create_graph",
        needs_tags=("custom_op",),
    ),
    OracleKind(
        "custom_op_opcheck",
        "opchecked",
        "opcheck",
        "the same where torch.library.opcheck checks the op first",
        in_check=False,
        apis=("torch.library.custom_op", "torch.library.opcheck"),
        side_a="create_graph",
        needs_tags=("custom_op",),
    ),
    OracleKind(
        "compiled_vs_eager",
        "compiled",
        "compiled",
        "the same under torch.compile",
        "compile",
        apis=("torch.compile",),
        limitations=(
            "graph_break_under_fullgraph",
            "aot_autograd_double_backward",
            "fx_trace_of_compiled_function",
            "compiled_autograd_unsupported_node",
            "compiled_autograd_higher_order_aot",
            "func_transform_of_compiled_function",
        ),
    ),
)
_BY_NAME = {k.name: k for k in ORACLE_KINDS}


class UnknownOracle(AffuzzError, KeyError):
    pass


def oracle_kind(name: str) -> OracleKind:
    """The row of oracle ``name``; an unknown name raises (NOTE [oracle table])."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise UnknownOracle(f"unknown oracle {name!r} (known: {', '.join(_BY_NAME)})") from None


MAIN = "functorch_vs_create_graph"
COMPILED = "compiled_vs_eager"
CHECKPOINT = "checkpoint_vs_plain"
CUSTOM_OP = "custom_op_vs_function"
CUSTOM_OP_PLAIN = "custom_op_vs_function_plain"
#: NOTE [custom op mode]: the oracles of a case whose Function is written as a custom op.
CUSTOM_OP_ORACLES = tuple(k.name for k in ORACLE_KINDS if k.side_b == "function_twin")
OPCHECK = "custom_op_opcheck"
#: NOTE [custom op mode]: torch.library.opcheck runs on one custom-op Function in this many (by a hash of
#: the Function: the same op is checked, or not, in every case that has it): it costs a few cases' time.
OPCHECK_ONE_IN = 8
ORACLES = tuple(k.name for k in ORACLE_KINDS)
#: What side B (the oracle's reference) runs, for each oracle: the name of its mode in a script and of
#: its result in a repro's output (side A is always "functorch"). Outcomes, verdicts and finding.json
#: call the two sides "functorch" and "reference" under every oracle.
REFERENCE_MODES = {k.name: k.reference for k in ORACLE_KINDS}


def side_a_mode(case: Case, oracle: str) -> str:
    """The mode of ``oracle``'s side A on ``case``: 'functorch' (the case's stack under torch.func, which
    every oracle shares), or 'create_graph' where a mode wraps the plain-autograd side (a compile placed
    ``plain``, a checkpoint placed ``plain`` or ``compiled``)."""
    kind = oracle_kind(oracle)
    if kind.side_b == "compiled" and case.compile is not None and case.compile.placement == "plain":
        return "create_graph"
    if kind.side_b == "checkpointed" and case.checkpoint is not None and case.checkpoint.placement != "inside":
        return "create_graph"
    return kind.side_a


def apis_needed(case: Case, oracle: str) -> tuple[str, ...]:
    """The torch APIs ``oracle`` needs to run ``case`` (a mode's choices may need more than its row):
    keys of the torch-side probes in :mod:`fuzzer.judge.apis` (API_PROBES)."""
    kind = oracle_kind(oracle)
    out = list(kind.apis)
    if case.function.style == "custom_op":  # NOTE [custom op mode]: every oracle runs the op
        out.append("torch.library.custom_op")
        if case.function.vmap_rule != "none":
            out.append("register_vmap")
    if kind.mode_field == "compile" and case.compile is not None and case.compile.autograd:
        out.append("compiled_autograd")
    if kind.mode_field == "checkpoint" and case.checkpoint is not None:
        if case.checkpoint.kind == "selective":
            out.append("selective_checkpoint")
        if case.checkpoint.placement == "compiled":
            out.append("torch.compile")
    return tuple(dict.fromkeys(out))


def mode_key(oracle: str, compiled: Compile | None, checkpoint: Checkpoint | None) -> str:
    """What of a mode's configuration tells a bug of ``oracle`` apart ('' for an oracle of no mode): the
    compiled oracle's backend and placement (the compiler's layer: Dynamo, AOTAutograd, Inductor) and
    compiled autograd; the checkpoint oracle's kind and placement. Bucket keys and per-mode counts use it."""
    field = oracle_kind(oracle).mode_field
    if field == "checkpoint" and checkpoint is not None:
        return f"checkpoint:{checkpoint.kind}/{checkpoint.placement}"
    if field != "compile" or compiled is None:
        return ""
    key = f"{compiled.backend}/{compiled.placement}"
    return f"{key}/compiled_autograd" if compiled.autograd else key


def without_modes(case: Case, oracle: str) -> Case:
    """``case`` without the mode fields ``oracle`` does not need: how a finding of ``oracle`` is kept."""
    keep = oracle_kind(oracle).mode_field
    drop = {f: None for f in MODE_FIELDS if f != keep and getattr(case, f) is not None}
    return replace(case, **drop) if drop else case


_REVERSE = ("grad", "jacrev", "vjp", "hessian")
_SWAP = {"jacrev": "jacfwd", "jacfwd": "jacrev"}


def _has_derivative_inside(stack: tuple[Transform, ...], i: int) -> bool:
    return any(t.name != "vmap" for t in stack[i + 1 :])


def _next_derivative_inside(stack: tuple[Transform, ...], i: int) -> Transform | None:
    return next((t for t in stack[i + 1 :] if t.name != "vmap"), None)


def alternate_stack(case: Case, oracle: str) -> tuple[Transform, ...] | None:
    """Side B's stack for the torch.func-only oracles (None where the oracle does not apply, including
    where side B would leave the generator's grammar: at most one of jacfwd/jvp/linearize)."""
    return alternate(case.transforms, oracle)


def alternate(stack: tuple[Transform, ...], oracle: str) -> tuple[Transform, ...] | None:
    """:func:`alternate_stack` of a bare stack (whatever Function it is applied to)."""
    out: list[Transform] = []
    changed = False
    for i, t in enumerate(stack):
        if oracle == "jacrev_vs_jacfwd" and t.name in _SWAP and not _has_derivative_inside(stack, i):
            out.append(replace(t, name=_SWAP[t.name]))
            changed = True
        elif oracle == "forward_over_reverse" and t.name == "hessian":
            out += [replace(t, name="jacrev"), replace(t, name="jacrev")]
            changed = True
        elif oracle == "forward_over_reverse" and t.name == "jacrev":
            inner = _next_derivative_inside(stack, i)
            if inner is not None and inner.name in _REVERSE:
                out.append(replace(t, name="jacfwd"))
                changed = True
            else:
                out.append(t)
        else:
            out.append(t)
    if not changed or sum(t.name in FORWARD_MODE_TRANSFORMS for t in out) > 1:
        return None  # nothing to swap, or a stack outside the generator's grammar (two forward-mode levels)
    return tuple(out)


def opchecked(fn: FunctionDef) -> bool:
    """Whether the custom-op oracle ``custom_op_opcheck`` runs on cases of ``fn`` (a custom-op Function): one
    Function in :data:`OPCHECK_ONE_IN`, by a hash of its definition."""
    return fn.style == "custom_op" and zlib.crc32(repr(fn).encode()) % OPCHECK_ONE_IN == 0


def applicable(case: Case) -> tuple[str, ...]:
    """The oracles that apply to ``case``, main first, then those of the modes the case carries (the
    compiled one last, where the case has a ``compile``)."""
    modes = tuple(k.name for k in ORACLE_KINDS if k.mode_field and getattr(case, k.mode_field) is not None)
    op: tuple[str, ...] = ()
    if case.function.style == "custom_op":  # NOTE [custom op mode]
        op = CUSTOM_OP_ORACLES + ((OPCHECK,) if opchecked(case.function) else ())
    return applicable_to(case.transforms) + op + modes


def applicable_to(stack: tuple[Transform, ...]) -> tuple[str, ...]:
    """The oracles that apply to a stack (whatever Function it is applied to), main first; not the
    compiled one, which a case asks for (:func:`applicable`)."""
    res = [MAIN]
    if alternate(stack, "jacrev_vs_jacfwd") is not None:
        res.append("jacrev_vs_jacfwd")
    if any(t.name == "vmap" for t in stack) and any(t.name != "vmap" for t in stack):
        res.append("vmap_vs_loop")  # (a stack of vmaps only: side B would be the main oracle's side B)
    if alternate(stack, "forward_over_reverse") is not None:
        res.append("forward_over_reverse")
    return tuple(res)


def reference_case(case: Case, oracle: str) -> Case:
    if oracle_kind(oracle).side_b != "alternate":
        return case
    alt = alternate_stack(case, oracle)
    return case if alt is None else replace(case, transforms=alt)
