"""Per-torch-version virtual environments: ``.venvs/torch-X.Y.Z`` holding that torch plus affuzz (editable).

The one mechanism behind ``make torch-venv TORCH=X.Y.Z`` (and, later, bisection). Stdlib only, so it
runs with any ``python3`` before anything is installed:

    python3 -m fuzzer.history.torchenv 2.0.1
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def _version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split("+")[0].split(".")[:3] if p.isdigit())


def numpy_requirement(torch_version: str) -> str:
    """torch wheels before 2.3 were built against NumPy 1.x and break on NumPy 2."""
    return "numpy<2" if _version_tuple(torch_version) < (2, 3) else "numpy"


def venv_dir(torch_version: str, root: Path = ROOT) -> Path:
    return root / ".venvs" / f"torch-{torch_version}"


def python_of(env: Path) -> Path:
    return env / "bin" / "python"


def installed_torch(env: Path) -> str | None:
    py = python_of(env)
    if not py.exists():
        return None
    proc = subprocess.run(
        [str(py), "-c", "import torch, fuzzer; print(torch.__version__)"], capture_output=True, text=True
    )
    return proc.stdout.strip() if proc.returncode == 0 else None


def ensure(torch_version: str, root: Path = ROOT, *, quiet: bool = False) -> Path:
    """Create (or reuse) the venv for ``torch_version``; returns its python."""
    if not _version_tuple(torch_version) or _version_tuple(torch_version) < (2, 0):
        raise SystemExit(f"torchenv: error: torch version {torch_version!r} is not a release >= 2.0 (e.g. 2.0.1)")
    env = venv_dir(torch_version, root)
    have = installed_torch(env)
    ready = bool(have and have.split("+")[0] == torch_version)
    if not ready:
        venv.EnvBuilder(with_pip=True, clear=False).create(env)
    pip = [str(python_of(env)), "-m", "pip", "install", "--disable-pip-version-check"] + (["-q"] if quiet else [])
    # the torchdb extra: what torch's autograd_function_db imports, for `affuzz check --torch-db` on this torch
    steps = [[f"torch=={torch_version}", numpy_requirement(torch_version)], ["-e", f"{root}[torchdb]"]]
    # an existing venv keeps its torch but gets affuzz's current dependencies (they change between versions)
    for args in steps[1:] if ready else steps:
        # quiet: pip's output (warnings included) is shown only if it fails
        proc = subprocess.run([*pip, *args], capture_output=quiet, text=True)
        if proc.returncode != 0:
            raise SystemExit(
                f"torchenv: error: pip install {' '.join(args)} into {env} failed (exit {proc.returncode})"
                + (f":\n{(proc.stdout + proc.stderr)[-2000:]}" if quiet else "")
            )
    print(f"{env}: torch {installed_torch(env)} ready; run {env}/bin/affuzz run ...")
    return python_of(env)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m fuzzer.history.torchenv", description=__doc__.splitlines()[0])
    p.add_argument("torch_version", metavar="X.Y.Z")
    p.add_argument("-q", "--quiet", action="store_true")
    args = p.parse_args(argv)
    ensure(args.torch_version, quiet=args.quiet)
    return 0


if __name__ == "__main__":
    sys.exit(main())
