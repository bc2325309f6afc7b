"""The command line: bad input gives one clear line and exit code 2; render prints the repro."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DATA, ROOT

from fuzzer.cli import main


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["run", "--duration", "abc"], "invalid duration 'abc'"),
        (["run", "--max-cases", "0"], "invalid count '0'"),
        (["run", "--seed", "x"], "invalid seed 'x'"),
        (["run", "--duration", "5", "--max-cases", "3"], "not allowed with argument"),
        (["run", "--frobnicate"], "unrecognized arguments: --frobnicate"),
        (["explode"], "invalid choice: 'explode'"),
        (["render", "does/not/exist.json"], "does/not/exist.json: cannot read"),
        (["run", "--modes", "compiled,jit"], "unknown mode 'jit' (known: compiled, compiled_autograd, checkpoint"),
        (["run", "--checkpoint-share", "2"], "--checkpoint-share"),
        (
            ["render", str(DATA / "seed_case.json"), "--oracle", "checkpoint_vs_plain"],
            "has no 'checkpoint' field, which --oracle checkpoint_vs_plain needs",
        ),
    ],
)
def test_bad_flags_and_paths_one_line_exit_2(argv: list[str], needle: str, capsys) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err and "error" in err, err


def test_render_invalid_case_names_file_and_field(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text((DATA / "seed_case.json").read_text().replace('"pow"', '"rm -rf"'))
    assert main(["render", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"{bad}: function.nodes[0].op: unknown op 'rm -rf'" in err
    assert "fix the file" in err


@pytest.mark.parametrize(
    "argv, hint",
    [
        (["render"], "fix the file or regenerate it with affuzz"),
        (["shrink"], "fix the file or regenerate it with affuzz"),
        (["bisect", "--versions", "2.0.1,2.13.0"], "fix the file or pass another case"),
    ],
)
def test_lower_layer_error_is_one_line_exit_2(argv: list[str], hint: str, tmp_path: Path, capsys) -> None:
    # a CaseError / CorpusError from below the CLI: main alone turns it into one line, the command named
    bad = tmp_path / "broken.json"
    bad.write_text("{ not json")
    assert main([argv[0], str(bad), *argv[1:]]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith(f"affuzz {argv[0]}: error: {bad}: not valid JSON (line 1")
    assert captured.err.rstrip().endswith(hint)


def test_run_refuses_non_empty_out(tmp_path: Path, capsys) -> None:
    (tmp_path / "keep.txt").write_text("precious")
    assert main(["run", "--max-cases", "1", "--out", str(tmp_path)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert (tmp_path / "keep.txt").read_text() == "precious"


def test_render_prints_repro(capsys) -> None:
    assert main(["render", str(DATA / "seed_case.json")]) == 0
    out = capsys.readouterr().out
    assert "class Fn(torch.autograd.Function):" in out and "create_graph = outcome(" in out
    compile(out, "<repro>", "exec")
    assert main(["render", str(DATA / "seed_case.json"), "--style", "full"]) == 0
    assert "def create_graph_mode(x0):" in capsys.readouterr().out
    assert main(["render", str(DATA / "seed_case.json"), "--style", "pytest"]) == 0
    assert "def test_functorch_agrees_with_create_graph():" in capsys.readouterr().out


def test_shrink_writes_a_smaller_repro_and_refuses_a_consistent_case(tmp_path: Path, capsys) -> None:
    out = tmp_path / "shrunk"
    assert main(["shrink", str(DATA / "planted_vmap_case.json"), "--oracle", "vmap_vs_loop", "--out", str(out)]) == 0
    assert {p.name for p in out.iterdir()} == {"case.json", "repro.py", "test_repro.py"}
    before, after = (int(n) for n in re.search(r"repro (\d+) -> (\d+) lines", capsys.readouterr().out).groups())
    assert after < before
    proc = subprocess.run([sys.executable, "repro.py"], capture_output=True, text=True, cwd=out)
    # a value mismatch ends in assert_close (NOTE [repro styles])
    assert proc.returncode == 1 and "not close" in proc.stderr, proc.stdout + proc.stderr
    assert "torch.func.vmap(f)" in proc.stdout and "vmap_loop(f)" in proc.stdout
    # the planted case is consistent under jacrev_vs_jacfwd: nothing to shrink, one line, exit 2
    assert main(["shrink", str(DATA / "planted_vmap_case.json"), "--oracle", "jacrev_vs_jacfwd"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "nothing to shrink" in err


def test_shrink_of_different_errors_ends_on_the_error_of_a_program_the_other_side_runs(tmp_path: Path, capsys) -> None:
    """NOTE [one-sided errors]: the repro of a different_errors finding whose other side's error the
    program caused ends on torch.func's error, plain autograd's result stated in a comment."""
    out = tmp_path / "shrunk"
    case = DATA / "view_output_modified_in_place_vmap_error_case.json"
    assert main(["shrink", str(case), "--out", str(out)]) == 0
    assert "different_errors -> error_functorch_only: repro" in capsys.readouterr().out
    proc = subprocess.run([sys.executable, "repro.py"], capture_output=True, text=True, cwd=out)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("RuntimeError: vmap: inplace arithmetic")
    assert re.search(r"^# autograd_grad\(.*\) returns tensor\(", (out / "repro.py").read_text(), re.M)


def test_module_and_console_script_help() -> None:
    proc = subprocess.run([sys.executable, "-m", "fuzzer", "run", "--help"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0
    for flag in ("--duration", "--max-cases", "--seed", "--out"):
        assert flag in proc.stdout
