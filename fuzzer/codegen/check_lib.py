"""Runtime pieces of ``affuzz check`` scripts only (NOTE [check oracles] in :mod:`fuzzer.codegen.check_render`).

Like :mod:`fuzzer.codegen.repro_lib`, real Python whose source is copied into the standalone scripts.
"""

from __future__ import annotations

import torch

#: NOTE [finite differences] in fuzzer/codegen/repro_fd.py: at eps = 1e-3 up to two nested central
#: differences are within ~1e-6 of the derivative (relative to its size ~1); 1e-4 leaves a margin of
#: 100 and is still far below what a wrong rule gives.
FD_TOLERANCE = {"rtol": 1e-4, "atol": 1e-4}


def all_inputs(twin, fn, n):
    """``twin(fn, argnums=i)`` for each of fn's ``n`` inputs, as one tuple."""
    return lambda *args: tuple(twin(fn, argnums=i)(*args) for i in range(n))


def verdict_fd(a, b):
    """verdict() with finite differences on one side: values agree within FD_TOLERANCE."""
    if torch_bug(a) or torch_bug(b):  # noqa: F821 (repro_lib, in the same script)
        return "torch_bug_error"
    if isinstance(a, Exception) or isinstance(b, Exception):
        if isinstance(a, Exception) and isinstance(b, Exception) and error_key(a) == error_key(b):  # noqa: F821
            return "consistent"
        return ERRORS[isinstance(a, Exception), isinstance(b, Exception)]  # noqa: F821
    if layout(a) != layout(b):  # noqa: F821
        return "structure_mismatch"
    try:
        return torch.testing.assert_close(a, b, equal_nan=True, **FD_TOLERANCE) or "consistent"
    except AssertionError:
        return "value_mismatch"
