"""README's example for users' own tests runs as written (fuzzer.testing.assert_consistent), and the
assertion fails with a repro on a real torch bug."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from fuzzer.history.corpus import load_entry
from fuzzer.testing import assert_consistent, judge_case

ROOT = Path(__file__).resolve().parents[1]


def test_readme_example_runs_as_written() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```python\n(from hypothesis import given, settings\n.*?)```", text, re.S)
    assert block is not None, "README lost its assert_consistent example"
    ns: dict[str, object] = {}
    exec(compile(block.group(1), "README.md example", "exec"), ns)
    test = ns["test_torch_func_agrees_with_plain_autograd"]
    test()  # a Hypothesis test: runs its 25 examples, raises on a finding


@pytest.mark.skipif(not torch.__version__.startswith("2.13"), reason="a torch 2.13 bug of the corpus")
def test_assert_consistent_fails_with_the_repro_on_a_real_bug() -> None:
    entry = load_entry(ROOT / "corpus" / "value_mismatch-70973dd0c0")  # G4, open on 2.13
    with pytest.raises(AssertionError) as info:
        assert_consistent(entry.case, oracles=[entry.oracle])
    message = str(info.value)
    assert message.startswith(f"value_mismatch under {entry.oracle}")
    assert "--- repro.py ---" in message and "class Fn(torch.autograd.Function)" in message
    assert "torch.testing.assert_close(a, b)" in message
    verdicts = {o: j.verdict for o, j in judge_case(entry.case).items()}
    assert verdicts[entry.oracle] == "value_mismatch"


def test_assert_consistent_passes_a_consistent_case(seed_case) -> None:
    # the seed is fixed on torch >= 2.1: both sides raise the documented error (expected), no finding
    if torch.__version__.startswith("2.0."):
        pytest.skip("the seed's bug is open on torch 2.0")
    assert_consistent(seed_case)
