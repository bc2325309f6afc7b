"""Quality: published repros are maintainer-size (NOTE [repro styles]) and still reproduce. Sizes pinned
for the seed and for real torch 2.13 bugs of the corpus, each repro run in a fresh process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fuzzer.codegen.render import render
from fuzzer.history.corpus import load_entry
from fuzzer.ir.case import Case
from fuzzer.publish.findings import Finding, repro_lines
from fuzzer.publish.verify import reproduced, stage, verify_and_publish

ROOT = Path(__file__).resolve().parents[2]
ON_2_13 = torch.__version__.startswith("2.13")


def lines(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.strip())


def published(
    case: Case, oracle: str, tmp_path: Path, judged_finding
) -> tuple[Finding, str, subprocess.CompletedProcess[str]]:
    """The repro the campaign publishes for ``case`` on this torch (staged, verified in a fresh process,
    falling back as verification does: NOTE [straight-line sides]), and one more run of it."""
    finding, _ = judged_finding(case, oracle)
    verified, dest = verify_and_publish(tmp_path, stage(tmp_path, finding), finding)
    assert verified, (dest / "finding.json").read_text()
    script = dest / "repro.py"
    text = script.read_text()
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    return finding, text, proc


def test_the_seed_repro_is_no_longer_than_the_hand_minimized_one(seed_case: Case) -> None:
    """The seed's class as a published repro on torch 2.0.1 (a value mismatch): at most 31 non-blank lines,
    the size of the repro a maintainer minimized by hand (../shared/seed)."""
    from fuzzer.codegen.render import Expect

    text = render(seed_case, header=["h"], style="repro", expect=Expect())
    # the hand-minimized 31 has no header line and cannot exit 0 once both sides raise one same error
    # (NOTE [repro exit status]); this one has both
    assert lines(text) <= 31
    assert lines(text) == repro_lines(seed_case, "functorch_vs_create_graph", Expect())
    code = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert [line for line in code if line.startswith(("import", "from"))] == ["import torch"]
    assert "torch.testing.assert_close(a, b)" in text and "def verdict" not in text
    assert "autograd_grad(torch.func.grad(f))" in text  # sides named by what they run


@pytest.mark.skipif(not ON_2_13, reason="pinned on torch 2.13, where these corpus bugs are open")
@pytest.mark.parametrize(
    "entry,most",
    [
        (
            "value_mismatch-63c0cdb50a",
            45,
        ),  # G5: linearize const-folding, autograd_grad>linearize (composed twins: no gradient reaches x)
        ("torch_bug_error-f21bcfaafd", 32),  # G7: generate_vmap_rule loses mark_non_differentiable
        ("error_functorch_only-6be8afd306", 19),  # G9: generate_vmap_rule + mark_dirty under vmap
    ],
)
def test_real_bugs_publish_short_repros_that_reproduce(entry: str, most: int, tmp_path: Path, judged_finding) -> None:
    e = load_entry(ROOT / "corpus" / entry)
    finding, text, proc = published(e.case, e.oracle, tmp_path, judged_finding)
    assert finding.signature.verdict not in ("consistent", "expected"), finding.signature.verdict
    assert lines(text) <= most, text
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert reproduced(finding, proc.stdout + proc.stderr, compact=True), proc.stdout + proc.stderr
    if finding.outcome.functorch.ok and finding.outcome.reference.ok:
        assert "not close" in proc.stderr
    else:  # an error repro: the error is the script's own traceback, ending in that error
        side = finding.outcome.functorch if not finding.outcome.functorch.ok else finding.outcome.reference
        assert "Traceback" in proc.stderr and f"{side.error_type}: " in proc.stderr.strip().splitlines()[-1]
        if side.frame:  # raised in torch's Python code: that frame is in the traceback
            assert side.frame.split(":")[0] in proc.stderr


def test_scalar_jacobian_levels_are_written_as_derivatives(tmp_path: Path) -> None:
    """NOTE [scalar levels]: at a 0-d input the plain-autograd twin of jacrev > jacfwd is a
    torch.autograd.grad call over one forward_ad block, straight-line; it agrees with torch.func on a
    faithful Function (exit 0, the second derivative 2) and is shorter than the Jacobian loops."""
    import dataclasses

    from fuzzer.codegen.render import Expect
    from fuzzer.ir.case import Transform

    base = load_entry(ROOT / "corpus" / "value_mismatch-63c0cdb50a").case  # x ** 2, faithful rules
    fn = dataclasses.replace(base.function, vmap_rule="generate")  # jacrev's basis is vmapped
    case = dataclasses.replace(base, function=fn, transforms=(Transform(name="jacrev"), Transform(name="jacfwd")))
    text = render(case, header=["h"], style="repro", expect=Expect())
    loops = render(case, header=["h"], style="repro", expect=dataclasses.replace(Expect(), straight=False))
    assert "jacrev_loop" not in text and "jacfwd_dual" not in text
    assert text.count("torch.autograd.grad(") == 1 and "dual_level()" in text
    assert lines(text) < lines(loops)
    script = tmp_path / "repro.py"
    script.write_text(text)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "tensor(2., dtype=torch.float64" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.skipif(not ON_2_13, reason="pinned on torch 2.13, where these corpus bugs are open")
@pytest.mark.parametrize(
    "entry,plain",
    [
        ("value_mismatch-b5cf95d152", True),  # G13: linearize drops jacrev's fill_: x**2 alone shows it
        ("value_mismatch-ffc0c71408", False),  # G10: forward AD drops a tangent after a custom view output
    ],
)
def test_a_value_repro_drops_the_function_only_where_its_forward_alone_shows_the_bug(
    entry: str, plain: bool, tmp_path: Path, judged_finding
) -> None:
    """NOTE [plain forward]: the published repro of a value finding is written with the Function's forward
    as a plain function where that script shows the disagreement too (and says so), else with the class;
    either way it is what verification ran."""
    import json

    from fuzzer.publish.verify import PLAIN_HEADER

    e = load_entry(ROOT / "corpus" / entry)
    finding, text, proc = published(e.case, e.oracle, tmp_path, judged_finding)
    assert finding.signature.verdict == "value_mismatch"
    record = json.loads((tmp_path / "findings" / finding.signature.id / "finding.json").read_text())
    assert bool(record["verification"].get("plain_forward")) is plain
    assert ("class Fn(torch.autograd.Function)" not in text) is plain, text
    assert (PLAIN_HEADER in text) is plain
    assert proc.returncode == 1 and "not close" in proc.stderr, proc.stdout + proc.stderr
