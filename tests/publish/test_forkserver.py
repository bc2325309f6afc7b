"""The verification fork server runs scripts like a fresh `python script.py` would."""

from __future__ import annotations

import os
from pathlib import Path

from fuzzer.publish.forkserver import VERIFY_NICENESS, ForkServer


def test_exit_codes_output_and_isolation(tmp_path: Path) -> None:
    server = ForkServer()
    try:
        a = tmp_path / "a.py"
        a.write_text(
            "import sys, torch\nSEEN = globals().get('SEEN', 0)\nprint('n', torch.ones(2).sum().item())\nsys.exit(1)\n"
        )
        b = tmp_path / "b.py"
        b.write_text("import sys\nprint(__name__, 'leak' if 'SEEN' in globals() else 'clean')\n")
        c = tmp_path / "c.py"
        c.write_text("raise ValueError('boom')\n")
        code, out, _ = server.run(a)
        assert code == 1 and "n 2.0" in out
        code, out, _ = server.run(b)
        assert code == 0 and "__main__ clean" in out  # no state from a.py
        code, out, _ = server.run(c)
        assert code == 1 and "ValueError: boom" in out
        assert not list(tmp_path.glob("*.out"))  # outputs are read back and removed
    finally:
        server.close()


def test_scripts_run_a_little_below_the_workers_priority(tmp_path: Path) -> None:
    """NOTE [verification fork server]: the server and its children yield to the campaign's workers."""
    server = ForkServer()
    try:
        script = tmp_path / "nice.py"
        script.write_text("import os\nprint('niceness', os.getpriority(os.PRIO_PROCESS, 0))\n")
        code, out, _ = server.run(script)
        ours = os.getpriority(os.PRIO_PROCESS, 0)
        assert code == 0 and f"niceness {max(ours, VERIFY_NICENESS)}" in out
    finally:
        server.close()
