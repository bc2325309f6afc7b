"""The transforms a case's stack is made of: one row each. Torch-free.

NOTE [transform table]
A transform is a row of :data:`TRANSFORM_KINDS` (:class:`TransformKind`), read by every consumer that
needs to know what a level *is*: the derivative directions it contributes to a side's path
(:func:`fuzzer.ir.validity.stack_sides`: which documented rules apply), its output's shape
(:func:`fuzzer.ir.shapes.transform_output_shape`), whether it runs vmap inside, its rank and simpler
replacement for the shrinker (:func:`fuzzer.triage.reduce.size`: lower reads simpler in a repro), what the
rendered scripts call it and its twins by (:mod:`fuzzer.codegen.compose`), and a draft's words for its
twin (:mod:`fuzzer.publish.drafts`). An unknown name raises
(:func:`transform_kind`) instead of being judged like some other transform: a new derivative level
judged like a vmap would make comparisons valid that are not. The order of the rows is the order of
``FUNCTORCH_TRANSFORMS`` (swarm configurations draw in it, NOTE [swarm]), then the plain autograd level.
"""

from __future__ import annotations

from dataclasses import dataclass

#: What a level's output is, given its inner function's output ``out`` and its input ``x``.
OUTPUTS = ("batched", "input", "jacobian", "hessian", "same")


@dataclass(frozen=True)
class TransformKind:
    """NOTE [transform table]: one transform's row.

    ``functorch``: a ``torch.func`` transform (False: the plain ``torch.autograd.grad`` level).
    ``path``: the derivative directions it adds to a side's path, innermost first ("R" reverse, "F"
    forward; empty for vmap); ``path_create_graph`` where the create_graph side computes it otherwise
    (hessian: jacrev over jacrev there). ``output``: one of :data:`OUTPUTS` (``batched``: ``out`` with the
    batch dimension at ``out_dims``; ``input``: ``x``'s shape; ``jacobian``: ``out + x``; ``hessian``:
    ``out + x + x``; ``same``: ``out``). ``vmaps``: it runs vmap inside. ``shrink_rank``: lower is simpler.
    """

    name: str
    functorch: bool
    path: tuple[str, ...]
    output: str
    vmaps: bool
    shrink_rank: int
    path_create_graph: tuple[str, ...] | None = None
    #: what the rendered scripts call it by: the torch.func side (``torch.func.<name>`` where ``torch_func``,
    #: else a runtime helper of that name), its create_graph-mode twin and its finite-difference twin
    #: (NOTE [mode equivalence] in fuzzer/codegen/repro_lib.py; fuzzer/codegen/repro_fd.py)
    functorch_call: str = ""
    torch_func: bool = False
    create_graph_twin: str = ""
    fd_twin: str = ""
    #: the shrinker's simpler replacement (same direction innermost; None: none)
    simpler: str | None = None
    #: a draft's words for its twin: (alone, in a list)
    twin_words: tuple[str, str] | None = None

    def __post_init__(self) -> None:
        if self.output not in OUTPUTS:
            raise ValueError(f"{self.name}: output must be one of {OUTPUTS}, not {self.output!r}")
        if any(d not in ("R", "F") for d in self.path + (self.path_create_graph or ())):
            raise ValueError(f"{self.name}: a path is made of 'R' and 'F'")
        if not (self.functorch_call and self.create_graph_twin and self.fd_twin):
            raise ValueError(f"{self.name}: needs its functorch call, create_graph twin and finite-difference twin")

    def derivative_path(self, *, create_graph: bool = False) -> tuple[str, ...]:
        """The directions this level adds to a side's path (``create_graph``: on the create_graph side)."""
        return self.path_create_graph if create_graph and self.path_create_graph is not None else self.path

    @property
    def forward_mode(self) -> bool:
        """Whether it differentiates in forward mode (a jvp at its core)."""
        return self.path == ("F",)


_REVERSE_WORDS = ("autograd.grad(create_graph=True)", "autograd.grad")
_FORWARD_WORDS = ("autograd.forward_ad", "forward_ad")
_LOOP_WORDS = ("a Python loop", "a loop for vmap")

TRANSFORM_KINDS: tuple[TransformKind, ...] = (
    TransformKind(
        "grad",
        True,
        ("R",),
        "input",
        vmaps=False,
        shrink_rank=0,
        functorch_call="grad",
        torch_func=True,
        create_graph_twin="autograd_grad",
        fd_twin="fd_grad",
        twin_words=_REVERSE_WORDS,
    ),
    TransformKind(
        "vmap",
        True,
        (),
        "batched",
        vmaps=True,
        shrink_rank=1,
        functorch_call="vmap",
        torch_func=True,
        create_graph_twin="vmap_loop",
        fd_twin="vmap_loop",
        twin_words=_LOOP_WORDS,
    ),
    TransformKind(
        "jacrev",
        True,
        ("R",),
        "jacobian",
        vmaps=True,
        shrink_rank=2,
        functorch_call="jacrev",
        torch_func=True,
        create_graph_twin="jacrev_loop",
        fd_twin="fd_jac",
        simpler="grad",
        twin_words=_REVERSE_WORDS,
    ),
    TransformKind(
        "jacfwd",
        True,
        ("F",),
        "jacobian",
        vmaps=True,
        shrink_rank=3,
        functorch_call="jacfwd",
        torch_func=True,
        create_graph_twin="jacfwd_dual",
        fd_twin="fd_jac",
        simpler="jvp",
        twin_words=_FORWARD_WORDS,
    ),
    TransformKind(
        "jvp",
        True,
        ("F",),
        "same",
        vmaps=False,
        shrink_rank=2,
        functorch_call="jvp_ones",
        create_graph_twin="jvp_dual",
        fd_twin="fd_jvp",
        twin_words=_FORWARD_WORDS,
    ),
    TransformKind(
        "vjp",
        True,
        ("R",),
        "input",
        vmaps=False,
        shrink_rank=1,
        functorch_call="vjp_ones",
        create_graph_twin="autograd_grad",
        fd_twin="fd_vjp",
        simpler="grad",
        twin_words=_REVERSE_WORDS,
    ),
    TransformKind(
        "hessian",
        True,
        ("R", "F"),
        "hessian",
        vmaps=True,
        shrink_rank=4,
        path_create_graph=("R", "R"),
        functorch_call="hessian",
        torch_func=True,
        create_graph_twin="jacrev_loop",
        fd_twin="fd_hessian",
        simpler="jacrev",
        twin_words=_REVERSE_WORDS,
    ),
    TransformKind(
        "linearize",
        True,
        ("F",),
        "same",
        vmaps=False,
        shrink_rank=4,
        functorch_call="linearize_ones",
        create_graph_twin="jvp_dual",
        fd_twin="fd_jvp",
        simpler="jvp",
        twin_words=_FORWARD_WORDS,
    ),
    TransformKind(
        "autograd_grad",
        False,
        ("R",),
        "input",
        vmaps=False,
        shrink_rank=0,
        functorch_call="autograd_grad",
        create_graph_twin="autograd_grad",
        fd_twin="fd_vjp",
    ),
)
#: The reverse-mode torch.func transforms (grad, vjp, jacrev, hessian): what refuses saved-tensor hooks
#: (NOTE [checkpoint mode]) and a register_autograd custom op (NOTE [known refusals]).
FUNCTORCH_REVERSE = tuple(k.name for k in TRANSFORM_KINDS if k.functorch and "R" in k.path)
_BY_NAME = {k.name: k for k in TRANSFORM_KINDS}


def transform_kind(name: str) -> TransformKind:
    """The row of transform ``name`` (NOTE [transform table]); an unknown name raises ``KeyError``."""
    try:
        return _BY_NAME[name]
    except KeyError:
        known = ", ".join(_BY_NAME)
        raise KeyError(f"unknown transform {name!r} (known: {known})") from None
