"""NOTE [oracle table]: one row per oracle; every consumer dispatches on the row, and raises on a name it
does not have. NOTE [modes]: one row per mode."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import fuzzer.codegen.compose as compose
import fuzzer.ir.validity as validity
from fuzzer.codegen.parts import lib_sources
from fuzzer.gen.modes import MODE_NAMES, MODES, UnknownMode, checkpoint_at, parse_modes
from fuzzer.ir.case import CHECKPOINT_KINDS, CHECKPOINT_PLACEMENTS, Case, Checkpoint, Compile, Transform
from fuzzer.ir.oracles import (
    CHECKPOINT,
    COMPILED,
    CUSTOM_OP,
    MAIN,
    MODE_FIELDS,
    ORACLE_KINDS,
    ORACLES,
    REFERENCE_MODES,
    SIDE_B_RECIPES,
    UnknownOracle,
    apis_needed,
    oracle_kind,
    side_a_mode,
    without_modes,
)
from fuzzer.ir.serde import case_from_json, case_to_json, loads
from fuzzer.ir.validate import CaseError, validate

ROOT = Path(__file__).resolve().parents[2]


def test_every_row_is_complete_and_names_are_unique() -> None:
    assert ORACLES[0] == MAIN and ORACLES[-1] == COMPILED  # main first; the compiled one last (NOTE [oracles])
    assert len(set(ORACLES)) == len(ORACLES) and len(set(REFERENCE_MODES.values())) == len(ORACLES)
    for kind in ORACLE_KINDS:
        assert oracle_kind(kind.name) is kind
        assert kind.side_b in SIDE_B_RECIPES and kind.words and kind.reference.isidentifier()
        assert kind.mode_field in (None, *MODE_FIELDS)
    assert {k.mode_field for k in ORACLE_KINDS if k.mode_field} == set(MODE_FIELDS)


def test_each_consumer_has_an_entry_for_every_recipe() -> None:
    assert set(validity._SIDES) == set(SIDE_B_RECIPES)
    assert set(compose._SIDE_B) == set(SIDE_B_RECIPES)
    from fuzzer.codegen.check_render import _CHECK_SIDE_B, TORCH_ORACLES

    in_check = {k.side_b for k in ORACLE_KINDS if k.in_check}  # (check's engine: tests/check/test_check.py)
    assert set(_CHECK_SIDE_B) == in_check
    assert TORCH_ORACLES == tuple(k.name for k in ORACLE_KINDS if k.in_check)


def test_an_unknown_oracle_raises_everywhere() -> None:
    with pytest.raises(UnknownOracle, match="unknown oracle 'compiled_vs_jit'"):
        oracle_kind("compiled_vs_jit")
    with pytest.raises(KeyError, match="unknown oracle"):
        validity.stack_sides((Transform("grad"),), "compiled_vs_jit")


def test_every_api_an_oracle_can_need_is_named() -> None:
    """(tests/judge/test_checkpoint.py checks that each has a probe.)"""
    seed = loads((ROOT / "tests" / "data" / "seed_case.json").read_text())
    needed: set[str] = set()
    for kind in CHECKPOINT_KINDS:
        for placement in CHECKPOINT_PLACEMENTS:
            needed |= set(apis_needed(_with(seed, checkpoint=Checkpoint(kind, placement)), CHECKPOINT))
    needed |= set(apis_needed(_with(seed, compile=Compile(placement="plain", autograd=True)), COMPILED))
    assert needed == {"torch.compile", "selective_checkpoint", "compiled_autograd"}


def _with(case: Case, **fields: object) -> Case:
    from dataclasses import replace

    return validate(replace(case, **fields))


def test_a_mode_field_is_kept_by_its_oracle_only_and_decides_side_a() -> None:
    seed = loads((ROOT / "tests" / "data" / "seed_case.json").read_text())
    both = _with(seed, compile=Compile(placement="plain"), checkpoint=Checkpoint("hooks", "inside"))
    assert without_modes(both, COMPILED).checkpoint is None and without_modes(both, COMPILED).compile is not None
    assert without_modes(both, CHECKPOINT).compile is None and without_modes(both, MAIN) == seed
    assert side_a_mode(both, COMPILED) == "create_graph" and side_a_mode(both, CHECKPOINT) == "functorch"
    assert side_a_mode(_with(seed, checkpoint=Checkpoint("hooks", "compiled")), CHECKPOINT) == "create_graph"


def test_mode_fields_round_trip_and_are_validated() -> None:
    seed = loads((ROOT / "tests" / "data" / "seed_case.json").read_text())
    case = _with(seed, compile=Compile("aot_eager", False, "plain", autograd=True), checkpoint=Checkpoint("selective"))
    data = case_to_json(case)
    assert data["checkpoint"] == {"kind": "selective", "placement": "plain"} and data["compile"]["autograd"] is True
    assert case_from_json(data) == case
    assert "checkpoint" not in case_to_json(seed) and "compile" not in case_to_json(seed)
    with pytest.raises(CaseError, match="needs schema_version 5"):
        case_from_json({**data, "schema_version": 4})
    with pytest.raises(CaseError, match="checkpoint.kind: unknown kind 'remat'"):
        case_from_json({**data, "checkpoint": {"kind": "remat", "placement": "plain"}})
    with pytest.raises(CaseError, match="compile.autograd: compiled autograd .* placement 'plain' only"):
        _with(seed, compile=Compile(placement="around", autograd=True))


def test_every_checkpoint_kind_has_a_helper_that_takes_and_returns_a_function() -> None:
    lib = lib_sources()
    assert set(compose.CHECKPOINT_HELPERS) == set(CHECKPOINT_KINDS)
    for helper in [*compose.CHECKPOINT_HELPERS.values(), "compiled_autograd"]:
        assert helper in compose.HELPER_ORDER and helper in lib
        args = ast.parse(lib[helper]).body[0].args  # type: ignore[attr-defined]
        assert args.args[0].arg == "fn"


def test_modes_parse_and_an_unknown_one_names_the_known() -> None:
    assert [m.name for m in MODES] == list(MODE_NAMES) and {m.oracle for m in MODES} == {
        COMPILED,
        CHECKPOINT,
        CUSTOM_OP,
    }
    assert parse_modes("all") == MODE_NAMES and parse_modes("none") == ()
    assert parse_modes("checkpoint, compiled") == ("compiled", "checkpoint")  # the table's order
    with pytest.raises(
        UnknownMode, match="unknown mode 'jit' .*known: compiled, compiled_autograd, checkpoint, custom_op"
    ):
        parse_modes("compiled,jit")


def test_checkpoint_draws_depend_on_the_position_only_and_cover_the_vocabulary() -> None:
    drawn = [checkpoint_at(7, 0, k) for k in range(400)]
    assert drawn == [checkpoint_at(7, 0, k) for k in range(400)]
    assert {c.kind for c in drawn} == set(CHECKPOINT_KINDS) and {c.placement for c in drawn} == set(
        CHECKPOINT_PLACEMENTS
    )
