"""Which torch APIs this torch has: one probe per API a mode needs (NOTE [oracle table] in
:mod:`fuzzer.ir.oracles`, :func:`fuzzer.ir.oracles.apis_needed`).

A mode whose API this torch lacks is ``not_applicable`` with the reason :data:`API_REASONS` names, decided
without running the case; a test checks that every API the oracle table can ask for has a probe here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from .execute import compile_unavailable


def _compiled_autograd() -> str | None:
    why = compile_unavailable()
    if why:
        return why
    try:
        import torch._dynamo.compiled_autograd as ca
    except Exception as e:  # noqa: BLE001 (any reason is the reason)
        return f"{type(e).__name__}: {e}"
    if not hasattr(ca, "_enable") and not hasattr(ca, "enable"):
        return "torch._dynamo.compiled_autograd has neither _enable nor enable"
    return None


def _selective_checkpoint() -> str | None:
    import torch.utils.checkpoint

    if not hasattr(torch.utils.checkpoint, "create_selective_checkpoint_contexts"):
        return "torch.utils.checkpoint has no create_selective_checkpoint_contexts (torch 2.4 added it)"
    return None


def _custom_op() -> str | None:
    import torch.library

    if not hasattr(torch.library, "custom_op"):
        return "torch.library has no custom_op (torch 2.4 added it)"
    return None


def _register_vmap() -> str | None:
    why = _custom_op()
    if why:
        return why
    from torch._library.custom_ops import CustomOpDef

    if not hasattr(CustomOpDef, "register_vmap"):
        return "torch.library.custom_op's ops have no register_vmap (torch 2.5 added it)"
    return None


def _opcheck() -> str | None:
    import torch.library

    if not hasattr(torch.library, "opcheck"):
        return "torch.library has no opcheck (torch 2.4 added it)"
    return None


#: API -> a probe that says why this torch cannot run it (None: it can).
API_PROBES: dict[str, Callable[[], str | None]] = {
    "torch.compile": compile_unavailable,
    "compiled_autograd": _compiled_autograd,
    "selective_checkpoint": _selective_checkpoint,
    "torch.library.custom_op": _custom_op,  # NOTE [custom op mode]
    "register_vmap": _register_vmap,
    "torch.library.opcheck": _opcheck,
}
#: API -> the ``not_applicable`` reason of an oracle that needs it where this torch lacks it.
API_REASONS = {
    "torch.compile": "torch_compile_unavailable",
    "compiled_autograd": "compiled_autograd_unavailable",
    "selective_checkpoint": "selective_checkpoint_unavailable",
    "torch.library.custom_op": "custom_op_unavailable",
    "register_vmap": "register_vmap_unavailable",
    "torch.library.opcheck": "opcheck_unavailable",
}


@functools.cache
def api_missing(api: str) -> str | None:
    """Why this torch lacks ``api`` (None: it has it); an unknown API raises."""
    if api not in API_PROBES:
        raise KeyError(f"no probe for torch API {api!r} (known: {', '.join(API_PROBES)})")
    return API_PROBES[api]()


def first_missing(apis: tuple[str, ...]) -> str | None:
    """The ``not_applicable`` reason of the first of ``apis`` this torch lacks, or None."""
    return next((API_REASONS[a] for a in apis if api_missing(a)), None)
