"""The case IR: a closed, torch-free description of one fuzz case.

A case is a custom ``torch.autograd.Function`` (:class:`FunctionDef`), the function ``f`` that calls
``Function.apply`` and combines its outputs (:class:`FDef`), the input tensors (:class:`Inputs`) and a
transform stack (:class:`Transform`, outermost first).

Invariants (checked by :func:`validate`, which :func:`case_from_json` always runs):

* The IR is a closed vocabulary. Every string is drawn from a fixed set (ops, view ops, transforms,
  styles...), every number is range-checked, and value references are ``x<i>`` (input), ``t<k>``
  (forward intermediate), ``o<j>`` (output). No code string from JSON is ever executed; the renderer
  only ever emits code for vocabulary items.
* All tensor inputs share one *base* shape (what ``f`` sees); each ``vmap`` level adds one leading batch
  dimension to every input, outermost level first.
* Forward intermediates are elementwise (they keep the base shape); only outputs may be views.
* The backward computes the exact vector-Jacobian product of the forward, except where the case says
  otherwise on purpose (``unused_grads``, ``none_grads``, and the planted ``custom_wrong`` vmap rule).
  Every value the backward needs is obtainable from ``saved`` (see NOTE [backward values]).

This module imports nothing from the rest of affuzz and nothing from torch.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import AffuzzError
from .ops import OP_KINDS
from .transforms import TRANSFORM_KINDS

SCHEMA_VERSION = 6
#: Versions :func:`case_from_json` reads. Version 1 lacks the fields version 2 added, all of which have
#: defaults that mean "not used", so a v1 case loads unchanged. Version 3 adds ``jvp_alias``: a case of
#: version <= 2 whose jvp rule returns an input's tangent for a shift node was rendered that way, so it
#: loads with ``jvp_alias`` set (its repro and verdicts unchanged). Version 4 adds the optional
#: ``compile`` (NOTE [compiled mode]); version 5 the optional ``checkpoint`` (NOTE [checkpoint mode]) and
#: ``compile.autograd``; version 6 the style ``custom_op`` (NOTE [custom op mode] in
#: :mod:`fuzzer.ir.custom_op`). A case without them is written as before.
READABLE_SCHEMA_VERSIONS = (1, 2, 3, 4, 5, 6)

#: Elementwise forward ops: name -> arity (NOTE [op table] in :mod:`fuzzer.ir.ops`: one row each).
OPS: dict[str, int] = {k.name: k.arity for k in OP_KINDS}
#: NOTE [custom gradients]: ``round`` is a straight-through estimator: forward rounds, the Function's rules
#: pass the gradient (and the tangent) through unchanged, as users write quantization.
STRAIGHT_THROUGH_OPS = tuple(k.name for k in OP_KINDS if k.straight_through)
# NOTE [custom gradients]
# Users write Functions whose backward is deliberately *not* the derivative of forward: a
# straight-through estimator (round forward, identity backward: the op ``round``), a scaled, reversed or
# blocked gradient (domain adaptation, gradient scaling, detach-like stops) or a clipped one. The
# Function's ``grad_rule`` applies to the gradient of each computed output (a node output, or a view of
# one) before backward carries it on: ``scaled`` multiplies it by 0.5, ``reversed`` by -1, ``blocked`` by 0,
# ``clipped`` clamps it to [-1, 1]. The jvp rule declares the same (the output's tangent scaled, negated,
# zeroed, clamped), so backward and jvp agree, except that clamping is not linear: a clipped rule's
# backward and jvp define different first derivatives (validity: nonlinear_gradient_rule). Rules that
# differ from forward's derivative are what a compiler that drops a Function's rules (and differentiates
# its forward instead) gets wrong, so the compiled oracle draws them often (NOTE [compiled mode]).
GRAD_RULES = ("exact", "scaled", "reversed", "blocked", "clipped")
# NOTE [in-place forward]
# The docs let forward modify in place what is its own: an intermediate (only a modified *input* needs
# ``mark_dirty``). A node with ``inplace`` is computed in place on its first argument (``t1 =
# t0.mul_(x1)``), which must be an intermediate that nothing else reads, returns or saves: the values are
# those of the out-of-place op, and backward, jvp and setup_context recompute out of place. What a
# compiler's functionalization must get right (the tracker has silent-correctness reports of it).
INPLACE_OPS = {k.name: k.inplace for k in OP_KINDS}
# NOTE [aliased inputs]
# ``f`` may pass one of its inputs to two tensor arguments of ``apply`` (``Fn.apply(x0, x0)``): the same
# tensor twice, whose gradient autograd sums over both arguments (FDef.apply_args). The input whose place
# it takes is then unused by ``f`` (its derivative is zero everywhere).
#: Ops that read a non-tensor (Python float) input of the Function: ``a * s`` and ``a + s``.
SCALAR_OPS = tuple(k.name for k in OP_KINDS if k.scalar)
MAX_SCALARS = 2
POW_EXPONENTS = (2, 3)
VIEW_OPS = (
    "view_as",
    "reshape",
    "unsqueeze",
    "select",
    "narrow",
    "transpose",
    "squeeze",
)
#: Views whose base can be recovered from the view alone (used when a saved output stands in for its base).
INVERTIBLE_VIEWS = ("view_as", "reshape", "unsqueeze", "transpose", "squeeze")
#: functorch transforms the stack may hold, plus the plain-autograd outer level (NOTE [transform table]
#: in :mod:`fuzzer.ir.transforms`: one row each).
FUNCTORCH_TRANSFORMS = tuple(k.name for k in TRANSFORM_KINDS if k.functorch)
#: Levels whose create_graph twin uses forward-mode AD (torch.autograd.forward_ad). Plain autograd has no
#: nested dual levels, so a stack holds at most one of them (see NOTE [mode equivalence]).
FORWARD_MODE_TRANSFORMS = tuple(k.name for k in TRANSFORM_KINDS if k.forward_mode)
VMAP_IN_DIMS = (0, 1, None)
VMAP_OUT_DIMS = (0, 1)
OUTER_TRANSFORMS = tuple(k.name for k in TRANSFORM_KINDS if not k.functorch)
TRANSFORMS = FUNCTORCH_TRANSFORMS + OUTER_TRANSFORMS
#: ``custom_op``: the Function written as a ``torch.library.custom_op`` (NOTE [custom op mode] in
#: :mod:`fuzzer.ir.custom_op`).
STYLES = ("setup_context", "legacy", "custom_op")
#: The styles of an ``autograd.Function`` (what the strategies draw; ``custom_op`` is the mode's).
FUNCTION_STYLES = ("setup_context", "legacy")
#: ``custom_wrong`` is a hand-written vmap rule that contradicts forward (outputs doubled): a planted
#: bug used by tests and quality checks. The default strategies never draw it.
VMAP_RULES = ("none", "generate", "custom", "custom_wrong")
DTYPES = ("float64", "float32")
COMBINES = ("add", "sum")
OUTPUT_KINDS = ("node", "input", "view")
#: The Python int a Function with ``non_tensor_output`` returns last; ``f`` scales its result by it.
NON_TENSOR_OUTPUT = 2
# NOTE [compiled mode]
# A case may also run under torch.compile (``Case.compile``): the oracle ``compiled_vs_eager`` compares
# a side run eagerly with the same computation compiled, which runs the same rules of the same Function,
# so the comparison is valid for every Function (NOTE [valid comparisons] in fuzzer/ir/validity.py).
# Where torch.compile goes (``placement``): ``plain``, around ``f`` under the plain-autograd twins (the
# eager side is then the create_graph side: how most users train); ``inside``, around ``f`` inside the
# torch.func stack (``torch.func.grad(torch.compile(f))``); ``around``, around the torch.func stack
# (``torch.compile(torch.func.grad(f))``; an outer plain autograd level stays outside). Each vocabulary
# is ordered simplest first, the order the shrinker walks: ``eager`` is Dynamo alone, ``aot_eager`` adds
# AOTAutograd, ``inductor`` the compiler: the smallest backend that shows a bug is the triage a
# maintainer does first. ``fullgraph=True`` (one graph, no graph-break machinery) is the simpler one.
COMPILE_BACKENDS = ("eager", "aot_eager", "inductor")
COMPILE_PLACEMENTS = ("plain", "inside", "around")
# ``Compile.autograd``: the compiled side also runs its backward under compiled autograd (the autograd
# engine's graph traced and compiled with the same backend: ``torch._dynamo.compiled_autograd``), which
# only the plain autograd engine uses: with placement ``plain`` only.
# NOTE [checkpoint mode]
# A case may also run with ``f`` under activation checkpointing or saved-tensor hooks (``Case.checkpoint``):
# the oracle ``checkpoint_vs_plain`` compares a side with the same side where ``f`` runs under
# ``torch.utils.checkpoint.checkpoint(f, ..., use_reentrant=False)`` (``checkpoint``), the same with a
# selective-checkpoint policy that saves the results of multiplications (``selective``), under
# ``torch.autograd.graph.saved_tensors_hooks`` with identity hooks (``hooks``) or with hooks that pack a
# copy (``hooks_copy``), or under ``torch.autograd.graph.save_on_cpu()`` (``save_on_cpu``). Each changes
# only how what backward needs is kept (recomputed, copied, moved), never what it computes: the docs of
# each say the gradients are those of the plain run, so the comparison is valid for every Function (the
# same rules at every order, like the compiled oracle). ``placement``: ``plain``, the create_graph side
# (plain autograd, where checkpointing is used); ``inside``, ``f`` wrapped inside the torch.func stack
# (torch.func refuses saved-tensor hooks under its reverse-mode transforms, a documented limitation;
# forward-mode transforms and vmap run them); ``compiled``, the plain side with ``torch.compile``
# (backend ``aot_eager``) around the checkpointed ``f``. Kinds are ordered simplest first, the order the
# shrinker walks. The reentrant variant is not drawn: the create_graph side calls ``torch.autograd.grad``,
# which reentrant checkpointing documents it does not support.
CHECKPOINT_KINDS = ("hooks", "hooks_copy", "save_on_cpu", "checkpoint", "selective")
CHECKPOINT_PLACEMENTS = ("plain", "inside", "compiled")
#: Kinds that recompute ``f``'s forward during backward (the others keep what was saved).
RECOMPUTING_KINDS = ("checkpoint", "selective")

MAX_INPUTS = 3
MAX_OUTPUTS = 3
MAX_NODES = 8
MAX_DEPTH = 4
MAX_BATCH = 4
MAX_DIM_SIZE = 4
MAX_NDIM = 2

_REF = re.compile(r"^([xto])(\d+)$")


class CaseError(AffuzzError, ValueError):
    """A case (usually loaded from JSON) is not valid. ``str(err)`` names the field and the problem."""


# --------------------------------------------------------------------------------------------- IR


@dataclass(frozen=True)
class Node:
    """``t<k> = op(args...)``: one elementwise forward intermediate. ``args`` are ``x<i>``/``t<j>`` refs (j < k)."""

    op: str
    args: tuple[str, ...]
    exponent: int = 2  # only meaningful for ``pow``
    scalar: int = 0  # scale/shift: index into FunctionDef.scalars
    # NOTE [in-place forward]: computed in place on its first argument, an intermediate nothing else reads
    inplace: bool = False


@dataclass(frozen=True)
class View:
    """A view op applied to an output's base. Fields not used by ``op`` stay at their defaults."""

    op: str
    dim: int = 0
    index: int = 0  # select: index; narrow: start
    length: int = 1  # narrow: length
    shape: tuple[int, ...] = ()  # reshape: target shape
    dim1: int = 1  # transpose: second dim


@dataclass(frozen=True)
class Output:
    """One Function output. ``node``: ref is ``t<k>``; ``input``: ref is ``x<i>`` returned as-is;
    ``view``: ``view`` applied to ref (an input, or an intermediate that is itself returned as an output)."""

    kind: str
    ref: str
    view: View | None = None


@dataclass(frozen=True)
class FunctionDef:
    n_inputs: int
    nodes: tuple[Node, ...]
    outputs: tuple[Output, ...]
    saved: tuple[str, ...] = ()  # refs saved for backward, in order
    unused_grads: tuple[int, ...] = ()  # output indices whose grad_output backward ignores
    none_grads: tuple[int, ...] = ()  # input indices for which backward returns None
    style: str = "setup_context"
    vmap_rule: str = "none"
    jvp_rule: bool = False  # a jvp staticmethod (correct by construction), inputs via ctx.save_for_forward
    once_differentiable: bool = False  # backward decorated with @once_differentiable
    materialize_grads: bool = True  # False: ctx.set_materialize_grads(False); backward handles None grads
    non_differentiable: tuple[int, ...] = ()  # node outputs passed to ctx.mark_non_differentiable
    on_ctx: tuple[str, ...] = ()  # saved refs kept as ctx attributes instead of save_for_backward
    detached: tuple[str, ...] = ()  # saved refs saved as .detach()
    non_tensor_output: bool = False  # forward also returns a Python int (NON_TENSOR_OUTPUT), last
    scalars: tuple[float, ...] = ()  # non-tensor inputs s<i>, passed to apply after the tensors
    dirty: tuple[int, ...] = ()  # inputs forward doubles in place (x.mul_(2)), returns, and marks dirty
    # NOTE [promises]: the jvp rule returns a tangent that is not a view (a clone, the same value) for
    # each output that is an input as-is or a view of one; documented-illegal, plain forward AD raises
    jvp_not_view: bool = False
    # the jvp rule returns an input's tangent itself as the tangent of a new output (a shift node of an
    # input: x + s), which breaks the documented rule that jvp match forward's view behaviour
    # (validity.jvp_alias); without it that tangent is a clone. Cases of schema <= 2 were rendered that
    # way, so loading one sets it where it applies (serde)
    jvp_alias: bool = False
    grad_rule: str = "exact"  # NOTE [custom gradients]: how backward and jvp treat a computed output's gradient


@dataclass(frozen=True)
class FDef:
    """``f(*inputs)``: applies the Function, keeps ``uses`` outputs and combines them.

    ``add``: elementwise sum (all used outputs have one shape); ``sum``: sum of each output's ``.sum()``.
    ``inplace``: node outputs ``f`` doubles in place (``o.mul_(2)``) right after ``apply``, under
    ``torch.no_grad()`` when ``inplace_no_grad``.
    """

    uses: tuple[int, ...] = (0,)
    combine: str = "add"
    inplace: tuple[int, ...] = ()
    inplace_no_grad: bool = False
    # NOTE [aliased inputs]: the input of ``f`` passed as each tensor argument of ``apply`` (() : x<i> as
    # argument i); one input passed twice is the same tensor in two arguments
    apply_args: tuple[int, ...] = ()


@dataclass(frozen=True)
class Inputs:
    """Tensor inputs: ``values[i]`` is input i flattened (row-major) over its full shape, which is the
    vmap batch sizes (outermost first) followed by ``shape`` (the base shape)."""

    shape: tuple[int, ...]
    values: tuple[tuple[float, ...], ...]
    dtype: str = "float64"


@dataclass(frozen=True)
class Transform:
    name: str
    argnums: int | tuple[int, ...] = 0  # every level but vmap; a tuple only on the outermost level
    batch_size: int = 0  # vmap only
    in_dims: tuple[int | None, ...] = ()  # vmap only: one entry per input; () means all 0
    out_dims: int = 0  # vmap only


@dataclass(frozen=True)
class Compile:
    """How the compiled side of ``compiled_vs_eager`` calls torch.compile (NOTE [compiled mode])."""

    backend: str = "eager"
    fullgraph: bool = True
    placement: str = "around"
    autograd: bool = False  # compiled autograd too (placement ``plain`` only)


@dataclass(frozen=True)
class Checkpoint:
    """How side B of ``checkpoint_vs_plain`` keeps what backward needs (NOTE [checkpoint mode])."""

    kind: str = "hooks"
    placement: str = "plain"


#: The compile a checkpoint placed ``compiled`` runs under (NOTE [checkpoint mode]).
CHECKPOINT_COMPILE = Compile(backend="aot_eager", fullgraph=False, placement="plain")


@dataclass(frozen=True)
class Case:
    function: FunctionDef
    f: FDef
    inputs: Inputs
    transforms: tuple[Transform, ...]  # outermost first
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)
    compile: Compile | None = None  # NOTE [compiled mode]: None, the case does not run compiled
    checkpoint: Checkpoint | None = None  # NOTE [checkpoint mode]: None, the case does not run checkpointed


# ------------------------------------------------------------------------------------ helpers


def ref_kind(ref: str) -> tuple[str, int]:
    m = _REF.match(ref)
    if not m:
        raise CaseError(f"bad value reference {ref!r} (expected x<i>, t<k> or o<j>)")
    return m.group(1), int(m.group(2))
