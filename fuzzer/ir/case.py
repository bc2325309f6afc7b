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

SCHEMA_VERSION = 3
#: Versions :func:`case_from_json` reads. Version 1 lacks the fields version 2 added, all of which have
#: defaults that mean "not used", so a v1 case loads unchanged. Version 3 adds ``jvp_alias``: a case of
#: version <= 2 whose jvp rule returns an input's tangent for a shift node was rendered that way, so it
#: loads with ``jvp_alias`` set (its repro and verdicts unchanged).
READABLE_SCHEMA_VERSIONS = (1, 2, 3)

#: Elementwise forward ops: name -> arity.
OPS: dict[str, int] = {"pow": 1, "mul": 2, "add": 2, "sin": 1, "exp": 1, "scale": 1, "shift": 1}
#: Ops that read a non-tensor (Python float) input of the Function: ``a * s`` and ``a + s``.
SCALAR_OPS = ("scale", "shift")
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
#: functorch transforms the stack may hold, plus the plain-autograd outer level.
FUNCTORCH_TRANSFORMS = ("grad", "vmap", "jacrev", "jacfwd", "jvp", "vjp", "hessian", "linearize")
#: Levels whose create_graph twin uses forward-mode AD (torch.autograd.forward_ad). Plain autograd has no
#: nested dual levels, so a stack holds at most one of them (see NOTE [mode equivalence]).
FORWARD_MODE_TRANSFORMS = ("jacfwd", "jvp", "linearize")
VMAP_IN_DIMS = (0, 1, None)
VMAP_OUT_DIMS = (0, 1)
OUTER_TRANSFORMS = ("autograd_grad",)
TRANSFORMS = FUNCTORCH_TRANSFORMS + OUTER_TRANSFORMS
STYLES = ("setup_context", "legacy")
#: ``custom_wrong`` is a hand-written vmap rule that contradicts forward (outputs doubled): a planted
#: bug used by tests and quality checks. The default strategies never draw it.
VMAP_RULES = ("none", "generate", "custom", "custom_wrong")
DTYPES = ("float64", "float32")
COMBINES = ("add", "sum")
OUTPUT_KINDS = ("node", "input", "view")
#: The Python int a Function with ``non_tensor_output`` returns last; ``f`` scales its result by it.
NON_TENSOR_OUTPUT = 2
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
class Case:
    function: FunctionDef
    f: FDef
    inputs: Inputs
    transforms: tuple[Transform, ...]  # outermost first
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)


# ------------------------------------------------------------------------------------ helpers


def ref_kind(ref: str) -> tuple[str, int]:
    m = _REF.match(ref)
    if not m:
        raise CaseError(f"bad value reference {ref!r} (expected x<i>, t<k> or o<j>)")
    return m.group(1), int(m.group(2))
