"""What each torch version gives for a few probe cases, as a table (the version-dependent skips of the
other tests, said once): one row per probe, one column per torch version affuzz is checked against.

``make test`` runs it under the default torch; ``make test-versions`` under every ``.venvs/torch-X.Y.Z``
that exists (``make torch-venv TORCH=X.Y.Z`` makes one). A version with no column is skipped, naming it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from fuzzer.ir.case import Case, Checkpoint, Compile, FDef, FunctionDef, Inputs, Node, Output, Transform
from fuzzer.ir.custom_op import as_custom_op
from fuzzer.ir.oracles import CHECKPOINT, COMPILED, CUSTOM_OP, CUSTOM_OP_PLAIN, MAIN
from fuzzer.ir.serde import loads
from fuzzer.ir.validate import validate
from fuzzer.judge.judge import Judge

SEED = loads((Path(__file__).resolve().parents[1] / "data" / "seed_case.json").read_text())


def _exp_x(*, stack: tuple[str, ...] = ("autograd_grad", "grad"), **modes: object) -> Case:
    """exp(x) * x with a faithful backward; x and the output saved; generate_vmap_rule=True."""
    nodes = (Node("exp", ("x0",)), Node("mul", ("t0", "x0")))
    fn = FunctionDef(1, nodes, (Output("node", "t1"),), saved=("x0", "o0"), vmap_rule="generate")
    levels = tuple(Transform(t, batch_size=2) if t == "vmap" else Transform(t) for t in stack)
    values = (0.5, 1.5, 0.25, 1.0) if "vmap" in stack else (0.5, 1.5)
    case = Case(fn, FDef(), Inputs((2,), (values,)), levels)
    return validate(replace(case, **modes))


def _op(stack: tuple[str, ...]) -> Case:
    """NOTE [custom op mode]: exp(x) * x as a torch.library custom op (no vmap rule: torch's fallback)."""
    case = as_custom_op(replace(_exp_x(stack=stack), function=replace(_exp_x().function, vmap_rule="none")))
    assert case is not None
    return case


#: probe -> (case, oracle), and per torch version (major.minor) the verdict and reason it gives.
PROBES: dict[str, tuple[Case, str]] = {
    "seed: grad then autograd.grad vs double autograd.grad": (SEED, MAIN),
    "compiled around torch.func.grad": (_exp_x(stack=("grad",), compile=Compile("eager", True, "around")), COMPILED),
    "compiled autograd, first order": (
        _exp_x(stack=("grad",), compile=Compile("eager", False, "plain", autograd=True)),
        COMPILED,
    ),
    "non-reentrant checkpoint, second order": (_exp_x(checkpoint=Checkpoint("checkpoint", "plain")), CHECKPOINT),
    "selective checkpoint, second order": (_exp_x(checkpoint=Checkpoint("selective", "plain")), CHECKPOINT),
    "saved-tensor hooks inside torch.func.grad": (_exp_x(checkpoint=Checkpoint("hooks", "inside")), CHECKPOINT),
    "saved-tensor hooks inside torch.func.vmap": (
        _exp_x(stack=("vmap",), checkpoint=Checkpoint("hooks", "inside")),
        CHECKPOINT,
    ),
    "custom op, double autograd.grad vs its Function": (_op(("autograd_grad", "grad")), CUSTOM_OP_PLAIN),
    "custom op under torch.func.grad": (_op(("grad",)), MAIN),
    "custom op under torch.func.vmap vs its Function": (_op(("vmap",)), CUSTOM_OP),
    "custom op under torch.func.jvp vs its Function": (_op(("jvp",)), CUSTOM_OP),
}
NO_CUSTOM_OP = ("not_applicable", "custom_op_unavailable")
NO_COMPILE = ("not_applicable", "torch_compile_unavailable")
OUTCOMES: dict[str, dict[str, tuple[str, str | None]]] = {
    "2.0": {
        # the seed's bug (found by hand on 2.0.1): double autograd.grad gives 6, grad then autograd.grad 0
        "seed: grad then autograd.grad vs double autograd.grad": ("value_mismatch", None),
        # no torch.compile on Python 3.11 with torch 2.0
        "compiled around torch.func.grad": NO_COMPILE,
        "compiled autograd, first order": NO_COMPILE,
        "non-reentrant checkpoint, second order": ("consistent", None),
        "selective checkpoint, second order": ("not_applicable", "selective_checkpoint_unavailable"),
        # torch 2.0 refuses saved-tensor hooks under every torch.func transform, in other words
        "saved-tensor hooks inside torch.func.grad": ("expected", "functorch_with_saved_tensor_hooks"),
        "saved-tensor hooks inside torch.func.vmap": ("expected", "functorch_with_saved_tensor_hooks"),
        # torch.library.custom_op came in torch 2.4
        "custom op, double autograd.grad vs its Function": NO_CUSTOM_OP,
        "custom op under torch.func.grad": NO_CUSTOM_OP,
        "custom op under torch.func.vmap vs its Function": NO_CUSTOM_OP,
        "custom op under torch.func.jvp vs its Function": NO_CUSTOM_OP,
    },
    "2.13": {
        # since 2.1 the seed's Function is refused (it saves an input it returns as-is), by both sides alike
        "seed: grad then autograd.grad vs double autograd.grad": ("consistent", None),
        "compiled around torch.func.grad": ("consistent", None),
        "compiled autograd, first order": ("consistent", None),
        "non-reentrant checkpoint, second order": ("consistent", None),
        "selective checkpoint, second order": ("consistent", None),
        "saved-tensor hooks inside torch.func.grad": ("expected", "functorch_reverse_with_saved_tensor_hooks"),
        "saved-tensor hooks inside torch.func.vmap": ("consistent", None),
        "custom op, double autograd.grad vs its Function": ("consistent", None),
        # pytorch#168393 (open): register_autograd's generated Function is refused by torch.func's reverse mode
        "custom op under torch.func.grad": ("error_functorch_only", None),
        "custom op under torch.func.vmap vs its Function": ("consistent", None),
        # torch.func.jvp gives the op a zero tangent where its Function (no jvp rule) raises the documented error
        "custom op under torch.func.jvp vs its Function": ("promise_broken", "forward_mode_without_jvp"),
    },
}
OUTCOMES["2.14"] = dict(OUTCOMES["2.13"])
VERSION = ".".join(torch.__version__.split("+")[0].split(".")[:2])


def test_every_version_has_a_row_for_every_probe() -> None:
    for version, row in OUTCOMES.items():
        assert set(row) == set(PROBES), version


@pytest.mark.parametrize("probe", PROBES)
def test_this_torch_gives_what_its_column_says(probe: str) -> None:
    if VERSION not in OUTCOMES:
        pytest.skip(f"no column for torch {torch.__version__} in OUTCOMES: run the probes and add one")
    case, oracle = PROBES[probe]
    j = Judge()(case, oracle)
    assert (j.verdict, j.reason) == OUTCOMES[VERSION][probe], (j.verdict, j.reason, j.fingerprint)
