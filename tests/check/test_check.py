"""``affuzz check`` end to end on real torch: three Functions written for it (tests/check/three_functions.py),
torch's own autograd_function_db, and bad targets."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fuzzer.cli import main
from fuzzer.ir.target import Arg, Target, TargetError, target_from_json, target_to_json

ROOT = Path(__file__).resolve().parents[2]
MODULE = "tests.check.three_functions"


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict, Path]:
    """Every stack of depth <= 2 of the three Functions, eagerly (the compiled oracle: ``compiled`` below,
    on fewer stacks: a compiled stack costs about 50 eager ones)."""
    out = tmp_path_factory.mktemp("check3")
    code = main(["check", MODULE, "--compile-backend", "none", "--out", str(out)])
    return code, json.loads((out / "check.json").read_text()), out


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """``affuzz check`` with its default compiled oracle (aot_eager) on the first 8 stacks (every depth-1
    stack: jvp, jacfwd, vmap among them) of the two Functions with a wrong rule."""
    summaries = {}
    for name in ("SinWrongJvp", "CenterWrongVmap"):
        out = tmp_path_factory.mktemp(f"check-{name}")
        main(["check", f"{MODULE}:{name}", "--max-cases", "8", "--out", str(out)])
        (summaries[name],) = json.loads((out / "check.json").read_text())["targets"]
    return summaries


def _target(summary: dict, name: str) -> dict:
    return next(t for t in summary["targets"] if t["title"] == f"{MODULE}:{name}")


def test_each_function_is_reported_as_what_it_is(three) -> None:
    code, summary, _ = three
    assert code == 1  # findings
    cube, sin, center = (_target(summary, n) for n in ("Cube", "SinWrongJvp", "CenterWrongVmap"))
    # the correct Function: every rule checks out, no finding of kind function
    assert {o: r["verdict"] for o, r in cube["rules"].items()} == {
        "backward_vs_fd": "consistent",
        "jvp_vs_fd": "consistent",
        "backward_vs_jvp": "consistent",
        "double_backward_vs_fd": "consistent",
        "jvp_of_backward_vs_fd": "consistent",
        "backward_of_jvp_vs_fd": "consistent",
        "vmap_rule_vs_loop": "not_applicable",  # generate_vmap_rule: torch's rule, judged by the torch oracles
        "opcheck": "not_applicable",  # not a custom op
    }
    assert not [f for f in cube["findings"] if f["kind"] == "function"]
    # the jvp that contradicts its backward: exactly the rules that involve the jvp
    kinds = {(f["kind"], f["oracle"]) for f in sin["findings"] if f["kind"] == "function"}
    assert kinds == {("function", o) for o in ("jvp_vs_fd", "backward_vs_jvp", "backward_of_jvp_vs_fd")}
    assert sin["rules"]["backward_vs_fd"]["verdict"] == "consistent"
    # comparisons of torch that would go through the wrong jvp on one side only are not torch's findings
    assert sin["stacks"]["jacrev_vs_jacfwd"] == {"not_applicable": sum(sin["stacks"]["jacrev_vs_jacfwd"].values())}
    # the wrong vmap rule: that rule's finding, and no torch finding that goes through it
    assert [(f["kind"], f["oracle"]) for f in center["findings"]] == [("function", "vmap_rule_vs_loop")]
    assert center["stacks"]["vmap_vs_loop"].get("not_applicable", 0) > 0
    # and says why (check.json's stack_reasons: a table cell's n/a and exp, explained)
    assert center["stack_reasons"]["vmap_vs_loop"]["rules disagree (vmap_rule_vs_loop)"] > 0
    for t in (cube, sin, center):
        assert all(f["reproduced"] for f in t["findings"])
        assert "compiled_vs_eager" not in t["stacks"]  # --compile-backend none


def test_compiled_the_dropped_jvp_is_torchs_finding_and_the_wrong_vmap_rule_is_not(compiled) -> None:
    """NOTE [check oracles]: compiled, Dynamo drops the jvp staticmethod (it traces forward's derivative):
    where the jvp is wrong, compiled_vs_eager sees it, a finding of torch (the compiled side must run the
    Function's own rule); the wrong vmap rule gives no compiled finding (both sides run the same rule)."""
    sin, center = compiled["SinWrongJvp"], compiled["CenterWrongVmap"]
    found = [f for f in sin["findings"] if f["oracle"] == "compiled_vs_eager"]
    assert found and all(f["kind"] == "torch" and f["reproduced"] for f in found)
    assert any(f["verdict"] == "value_mismatch" and "jvp" in f["transforms"] for f in found)
    assert sin["stacks"]["compiled_vs_eager"].get("consistent", 0) > 0  # stacks that never call the jvp agree
    assert [(f["kind"], f["oracle"]) for f in center["findings"]] == [("function", "vmap_rule_vs_loop")]
    assert sum(center["stacks"]["compiled_vs_eager"].values()) == 8


def test_findings_are_kept_apart_and_repros_stand_alone(three) -> None:
    _, summary, out = three
    for t in summary["targets"]:
        for f in t["findings"]:
            assert f["dir"].startswith(f["kind"] + "/")
            record = json.loads((out / f["dir"] / "finding.json").read_text())
            assert record["kind"] == f["kind"] and record["reproduced"]
            repro = (out / f["dir"] / "repro.py").read_text()
            assert f"from {MODULE} import {t['target']['name']}" in repro
            assert "affuzz" not in repro.replace("# affuzz check", "") and "fuzzer" not in repro
    # the wrong vmap rule's repro, run here as a user would: fails with assert_close, fixed rule -> passes
    center = _target(summary, "CenterWrongVmap")["findings"][0]
    p = subprocess.run(
        [sys.executable, str(out / center["dir"] / "repro.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert p.returncode == 1 and "AssertionError" in p.stderr and "vmap_rule" in p.stdout
    assert "table.md" in {p.name for p in out.iterdir()}
    assert "| tests.check.three_functions:SinWrongJvp | ok | FINDING value_mismatch |" in (out / "table.md").read_text()


def test_findings_are_shrunk_over_levels_never_out_of_the_domain(three) -> None:
    """A finding is shrunk over its stack's levels; the sample's shapes are the Function's domain (a
    quaternion's 4, a batch of 3x3 matrices: only the user knows) and are kept."""
    _, summary, out = three
    for name in ("SinWrongJvp", "Cube"):
        t = _target(summary, name)
        for f in t["findings"]:
            record = json.loads((out / f["dir"] / "finding.json").read_text())
            assert record["target"]["args"][0]["shape"] == t["target"]["args"][0]["shape"] == [3]
    (f,) = [f for f in _target(summary, "Cube")["findings"] if f["kind"] == "torch"]
    record = json.loads((out / f["dir"] / "finding.json").read_text())
    assert record["shrink_attempts"] > 0 and f["transforms"] == ["grad", "linearize"]


def test_inputs_spec_and_max_cases(tmp_path: Path) -> None:
    code = main(
        ["check", f"{MODULE}:Cube", "--inputs", "2x2", "--max-cases", "3", "--no-shrink", "--out", str(tmp_path)]
    )
    summary = json.loads((tmp_path / "check.json").read_text())
    (cube,) = summary["targets"]
    assert cube["target"]["args"][0]["shape"] == [2, 2] and cube["cases"] == 3
    assert code == 0  # the first 3 stacks (grad, vjp, jvp) agree on a correct Function


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["check", "no_such_pkg.fns:Fn"], "no module named 'no_such_pkg'"),
        (["check", f"{MODULE}:torch"], "is not a torch.autograd.Function subclass or a torch.library custom op"),
        (["check", f"{MODULE}:Nope"], "has no attribute 'Nope'"),
        (["check", f"{MODULE}:Cube", "--inputs", "3y4"], "--inputs: cannot read '3y4'"),
        (["check"], "give a TARGET"),
        (["check", "tests/check/three_functions.py"], "expected pkg.module:Name"),
        (["check", f"{MODULE}:Cube", "--stacks", "grad>nope"], "nope is not one of grad, vjp"),
        (
            ["check", f"{MODULE}:Cube", "--inputs-from", f"{MODULE}:torch"],
            "--inputs-from tests.check.three_functions:torch: calling it raised TypeError",
        ),
        (["check", "torch.ops.affuzz_tests.nope"], "say which module registers it with --import pkg.module"),
    ],
)
def test_bad_target_is_one_line_exit_2(argv: list[str], message: str, capsys) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and err.startswith("affuzz check: error: ")


def test_forward_that_rejects_every_input(tmp_path: Path, monkeypatch, capsys) -> None:
    (tmp_path / "picky.py").write_text(
        "import torch\n\n\n"
        "class Picky(torch.autograd.Function):\n"
        "    @staticmethod\n"
        "    def forward(x):\n"
        "        if x.shape != (5,):\n"
        "            raise ValueError(f'needs 5 elements, got {tuple(x.shape)}')\n"
        "        return x * 2\n\n"
        "    @staticmethod\n"
        "    def setup_context(ctx, inputs, output):\n"
        "        pass\n\n"
        "    @staticmethod\n"
        "    def backward(ctx, g):\n"
        "        return 2 * g\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["check", "picky:Picky", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert "forward rejects every input tried" in err and "--inputs" in err and len(err.splitlines()) == 1
    # told the shape, it checks the Function
    assert main(["check", "picky:Picky", "--inputs", "5", "--max-cases", "1", "--out", str(tmp_path / "o")]) == 0


def test_torch_db_rules_table(tmp_path: Path) -> None:
    """Every Function of torch's autograd_function_db: the rule verdicts (README, "affuzz check --torch-db")."""
    pytest.importorskip("expecttest")
    code = main(
        ["check", "--torch-db", "--max-cases", "1", "--no-shrink", "--compile-backend", "none", "--out", str(tmp_path)]
    )
    summary = json.loads((tmp_path / "check.json").read_text())
    rules = {t["title"]: {o: r["verdict"] for o, r in t["rules"].items()} for t in summary["targets"]}
    assert len(rules) == 14
    wrong = {
        (name, o)
        for name, row in rules.items()
        for o, v in row.items()
        if v not in ("consistent", "not_applicable", "expected")
    }
    # the db's Functions whose rules contradict their forward on purpose (or by mistake): README explains each
    assert wrong == {
        ("NumpySortAutogradFunction", "backward_vs_fd"),  # forward returns x unsorted, backward/jvp permute
        ("NumpySortAutogradFunction", "jvp_vs_fd"),
        ("CubeGenVmapAutogradFunction", "backward_vs_fd"),  # backward: 6 * dinput instead of 6 * grad_saved * x
        ("CubeGenVmapAutogradFunction", "backward_vs_jvp"),
        ("CubeGenVmapAutogradFunction", "double_backward_vs_fd"),
        ("CubeGenVmapAutogradFunction", "jvp_of_backward_vs_fd"),
        (
            "CubeGenVmapAutogradFunction",
            "backward_of_jvp_vs_fd",
        ),  # its jvp uses the saved output 3x**2: through backward
        ("ScaleGradGenVmapAutogradFunction", "backward_vs_fd"),  # scales gradients by 3.14 on purpose
        ("ScaleGradGenVmapAutogradFunction", "jvp_vs_fd"),
        ("ZeroGradientsGenVmapAutogradFunction", "backward_vs_fd"),  # zero gradients on purpose
        ("ZeroGradientsGenVmapAutogradFunction", "jvp_vs_fd"),
    }
    assert rules["NumpyCubeNotComposableAutogradFunction"]["double_backward_vs_fd"] == "expected"  # once_differentiable
    assert code == 1
    assert all(f["reproduced"] and f["kind"] == "function" for t in summary["targets"] for f in t["findings"])


def test_target_json_round_trip_and_no_code_from_json() -> None:
    t = Target(MODULE, "Cube", (Arg("tensor", (2,), "float64", (1.0, 2.0)), Arg("const", literal="(2,)")), None, (2,))
    assert target_from_json(target_to_json(t)) == t
    bad = target_to_json(t)
    bad["args"][1]["literal"] = "__import__('os').system('true')"
    with pytest.raises(TargetError, match="literal"):
        target_from_json(bad)
    bad = target_to_json(t)
    bad["module"] = "os; import sys"
    with pytest.raises(TargetError, match="dotted Python name"):
        target_from_json(bad)


def test_repro_raises_the_unexplained_error() -> None:
    """Of two errors the repro runs uncaught the one no limitation explains (the finding's fingerprint),
    here side B's, with side A's explained error as a comment."""
    from fuzzer.check.engine import CheckFinding, Verdict
    from fuzzer.check.output import repro
    from fuzzer.ir.case import Transform
    from fuzzer.ir.target import CheckCase
    from fuzzer.judge.execute import Outcome, Side

    t = Target(MODULE, "Cube", (Arg("tensor", (2,), "float64", (1.0, 2.0)),), None, (2,), ("jvp", "setup_context"))
    explained = Side(None, "RuntimeError", "Batching rule not implemented for aten::_make_dual", "", False, "k1")
    unexplained = Side(None, "IndexError", "list index out of range", "torch/fx/x.py:y", False, "k2")
    outcome = Outcome("different_errors", explained, unexplained, 0.1)
    case = CheckCase(t, (Transform("vmap", batch_size=2), Transform("linearize")), "vmap_vs_loop")
    text = repro(CheckFinding("torch", case, Verdict("different_errors", "", unexplained.fingerprint, outcome)))
    last = [line for line in text.splitlines() if line.strip()][-1]
    assert last.startswith("vmap_loop(linearize_ones(f))") and "raises" in last
    assert "# functorch raises RuntimeError: Batching rule" in text


def test_duration_goes_past_the_depth_2_stacks(tmp_path: Path) -> None:
    """--duration longer than the enumerated stacks goes on with random depth-3 ones (NOTE [check stacks])."""
    from fuzzer.check.stacks import stacks
    from fuzzer.check.targets import resolve

    (cube,) = resolve(f"{MODULE}:Cube")
    listed = len(list(stacks(cube)))
    main(["check", f"{MODULE}:Cube", "--duration", "6", "--compile-backend", "none", "--out", str(tmp_path)])
    (summary,) = json.loads((tmp_path / "check.json").read_text())["targets"]
    assert summary["cases"] > listed


def test_an_argument_the_backward_does_not_differentiate_is_a_constant(tmp_path: Path, monkeypatch) -> None:
    """NOTE [check inputs]: forward(x, s) with backward returning None for s: s is passed as a constant,
    not reported as a wrong gradient."""
    (tmp_path / "scaling.py").write_text(
        "import torch\n\n\n"
        "class Scale(torch.autograd.Function):\n"
        "    @staticmethod\n"
        "    def forward(x, s):\n"
        "        return x * s\n\n"
        "    @staticmethod\n"
        "    def setup_context(ctx, inputs, output):\n"
        "        ctx.s = inputs[1]\n\n"
        "    @staticmethod\n"
        "    def backward(ctx, g):\n"
        "        return g * ctx.s, None\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    # (torch.compile left out: compiled, torch.func.jvp of it returns a value where eager raises the
    # documented "must implement the jvp function", a finding of kind torch: test_compiled_check below)
    out = tmp_path / "out"
    assert main(["check", "scaling:Scale", "--max-cases", "4", "--compile-backend", "none", "--out", str(out)]) == 0
    (t,) = json.loads((tmp_path / "out" / "check.json").read_text())["targets"]
    assert t["target"]["constants"] == [1] and t["target"]["args"][1]["kind"] == "const"
    assert t["rules"]["backward_vs_fd"]["verdict"] == "consistent"


def test_compiled_check_of_a_function_without_jvp(tmp_path: Path, monkeypatch) -> None:
    """NOTE [check oracles]: is it safe under torch.compile? x * s without a jvp staticmethod: eager
    torch.func.jvp raises the documented error, the compiled side returns a value (Dynamo traces forward
    instead): promise_broken, of kind torch, reproduced by its repro; it fails the run only where
    --fail-on says torch."""
    (tmp_path / "nojvp.py").write_text(
        "import torch\n\n\n"
        "class Twice(torch.autograd.Function):\n"
        "    @staticmethod\n"
        "    def forward(x):\n"
        "        return x * 2\n\n"
        "    @staticmethod\n"
        "    def setup_context(ctx, inputs, output):\n"
        "        pass\n\n"
        "    @staticmethod\n"
        "    def backward(ctx, g):\n"
        "        return g * 2\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    argv = ["check", "nojvp:Twice", "--max-cases", "4", "--out", str(tmp_path / "out"), "--fail-on", "torch"]
    assert main(argv) == 1
    (t,) = json.loads((tmp_path / "out" / "check.json").read_text())["targets"]
    (f,) = t["findings"]
    assert (f["kind"], f["oracle"], f["transforms"], f["verdict"]) == (
        "torch",
        "compiled_vs_eager",
        ["jvp"],
        "promise_broken",
    )
    assert f["reproduced"]
    assert (
        "torch.compile(jvp_ones(f), backend='aot_eager', fullgraph=False)"
        in (tmp_path / "out" / f["dir"] / "repro.py").read_text()
    )


def test_assert_function_consistent_in_a_users_test() -> None:
    from fuzzer.testing import assert_function_consistent
    from tests.check.three_functions import Cube, SinWrongJvp

    assert_function_consistent(Cube, max_cases=3)  # correct rules, and the first stacks agree
    with pytest.raises(AssertionError) as e:
        assert_function_consistent(SinWrongJvp, kinds=("function",), max_cases=1)
    text = str(e.value)
    assert "the Function's rules disagree: value_mismatch under jvp_vs_fd" in text
    assert "from tests.check.three_functions import SinWrongJvp" in text and "torch.testing.assert_close" in text
