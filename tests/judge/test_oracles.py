"""Metamorphic oracles (NOTE [oracles]) and finite-difference triage, on real torch."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

import fuzzer.codegen.repro_lib as lib
from fuzzer.codegen.repro_fd import fd_grad, fd_jac
from fuzzer.ir.case import Case, Transform
from fuzzer.ir.oracles import ORACLES, alternate_stack, applicable
from fuzzer.judge.execute import run_case
from fuzzer.judge.judge import Judge


def _with_stack(case: Case, *names: str) -> Case:
    return replace(
        case, transforms=tuple(Transform("vmap", batch_size=2) if n == "vmap" else Transform(n) for n in names)
    )


@pytest.mark.parametrize(
    "stack, oracle, expected",
    [
        (("jacrev",), "jacrev_vs_jacfwd", ("jacfwd",)),
        (("jacfwd", "vmap"), "jacrev_vs_jacfwd", ("jacrev", "vmap")),
        (("jacrev", "grad"), "jacrev_vs_jacfwd", None),  # second order: forward_over_reverse's job
        (("jacrev", "grad"), "forward_over_reverse", ("jacfwd", "grad")),
        (("jacrev", "vmap", "jacrev"), "forward_over_reverse", ("jacfwd", "vmap", "jacrev")),
        (("hessian",), "forward_over_reverse", ("jacrev", "jacrev")),
        (("grad",), "forward_over_reverse", None),
    ],
)
def test_alternate_stacks(seed_case: Case, stack, oracle, expected) -> None:
    case = _with_stack(seed_case, *stack)
    alt = alternate_stack(case, oracle)
    assert (None if alt is None else tuple(t.name for t in alt)) == expected


def test_applicable_oracles(seed_case: Case) -> None:
    assert applicable(_with_stack(seed_case, "grad")) == ("functorch_vs_create_graph",)
    assert applicable(_with_stack(seed_case, "jacrev", "vmap")) == ORACLES[:3]
    assert applicable(_with_stack(seed_case, "hessian", "vmap")) == (ORACLES[0], ORACLES[2], ORACLES[3])


def test_correct_function_agrees_under_every_oracle(planted_case: Case) -> None:
    fn = replace(planted_case.function, vmap_rule="generate", jvp_rule=True)
    for stack in (("jacrev", "vmap"), ("hessian",), ("jacrev", "grad")):
        case = _with_stack(replace(planted_case, function=fn), *stack)
        case = replace(
            case,
            inputs=replace(
                case.inputs, values=tuple(v[:2] * (2 if "vmap" in stack else 1) for v in case.inputs.values)
            ),
        )
        for oracle in applicable(case):
            outcome = run_case(case, oracle)
            assert outcome.verdict == "consistent", (stack, oracle, outcome)


def test_vmap_vs_loop_catches_a_wrong_vmap_rule_without_create_graph(planted_case: Case) -> None:
    assert Judge()(planted_case, "vmap_vs_loop").verdict == "value_mismatch"


# ----------------------------------------------------------------------------------------- triage


@pytest.fixture
def cube_script(monkeypatch):
    """repro_lib's triage() as it runs inside a script: fd_mode and inputs() defined by the script."""
    monkeypatch.setattr(lib, "fd_mode", fd_grad(lambda x: x**3), raising=False)
    monkeypatch.setattr(lib, "inputs", lambda: (torch.tensor(1.0, dtype=torch.float64),), raising=False)
    return lib


def test_triage_blames_the_side_that_misses_finite_differences(cube_script) -> None:
    right, wrong = torch.tensor(3.0, dtype=torch.float64), torch.tensor(0.0, dtype=torch.float64)
    assert cube_script.triage(wrong, right)[0] == "functorch_wrong"
    assert cube_script.triage(right, wrong)[0] == "reference_wrong"
    assert cube_script.triage(wrong, torch.tensor(5.0, dtype=torch.float64))[0] == "both_wrong"
    assert "finite differences: 3.0000" in cube_script.triage(wrong, right)[1]


def test_triage_undetermined_when_rules_are_not_exact(monkeypatch) -> None:
    monkeypatch.setattr(lib, "fd_mode", None, raising=False)
    assert lib.triage(torch.tensor(1.0), torch.tensor(2.0))[0] == "undetermined"


def test_triage_undetermined_at_a_kink(monkeypatch) -> None:
    monkeypatch.setattr(lib, "fd_mode", fd_jac(lambda x: torch.relu(x) * 1e3), raising=False)
    monkeypatch.setattr(lib, "inputs", lambda: (torch.tensor([0.0], dtype=torch.float64),), raising=False)
    label, detail = lib.triage(torch.tensor([[0.0]]), torch.tensor([[1.0]]))
    assert label == "undetermined" and "not smooth" in detail
