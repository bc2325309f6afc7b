"""Corpus repros re-rendered from a replay in the current published style, kept only where they reproduce
(NOTE [corpus repros]). Real torch 2.13, real corpus entries."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fuzzer.history.corpus import load_entry
from fuzzer.history.replay import ThisInterpreter, replay
from fuzzer.history.rerender import rerender_from_replay
from fuzzer.publish.verify import exception_line, line_key

ROOT = Path(__file__).resolve().parents[2]
ON_2_13 = torch.__version__.startswith("2.13")


@pytest.mark.skipif(not ON_2_13, reason="these corpus entries are pinned on torch 2.13")
def test_replay_update_rerenders_a_repro_that_shows_its_bucket(tmp_path: Path) -> None:
    for name in ("error-8af76b925e", "value_mismatch-b718dc0154"):
        shutil.copytree(ROOT / "corpus" / name, tmp_path / name)
    errors = load_entry(tmp_path / "error-8af76b925e")
    seed = load_entry(tmp_path / "value_mismatch-b718dc0154")
    seed_before = (seed.path / "repro.py").read_text()
    (errors.path / "repro.py").write_text("# an old-style repro\n")
    results = replay([errors, seed], [ThisInterpreter()], timeout=60)
    lines = rerender_from_replay(results)
    assert lines == [f"error-8af76b925e: repro.py re-rendered and reproduced on torch {torch.__version__}"]
    # the seed's bug is gone on 2.13 (both sides raise one documented error): its repro stays as it was
    assert (seed.path / "repro.py").read_text() == seed_before
    text = (errors.path / "repro.py").read_text()
    assert text.startswith("# affuzz corpus entry error-8af76b925e, shown on torch 2.13")
    proc = subprocess.run([sys.executable, "repro.py"], cwd=errors.path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1
    fingerprint = errors.meta["signature"].split("|", 1)[1]
    assert line_key(exception_line(proc.stderr)) == fingerprint.rsplit(" @ ", 1)[0]
    assert rerender_from_replay(results) == []  # a second --update has nothing to rewrite
