"""What one ``affuzz check`` script may cost: time scaled to its input's size, and memory.

NOTE [check budgets]
A library's Function comes with inputs of its own size, and the oracles' cost grows with it: a first-order
rule oracle runs the forward twice per input element, a second-order one four times per pair of elements,
and a stack's create_graph side one backward per output element per level. So the per-script timeout
(``--timeout``, the budget of a small case) is scaled by the work the script does over the work of a
16-element case (:func:`scaled_timeout`), at most :data:`MAX_SCALE` times; and each script runs under a
memory limit (``--max-memory``: the address space it may add, ``RLIMIT_AS`` for the time of the script,
:func:`memory_limit`), so that an allocation past it fails inside the script as ``MemoryError`` or
torch's "can't allocate memory" instead of the kernel killing the process and everything written with it.
Neither is a finding: a script that ran out of time or memory is a note in the table (``timeout``,
``memory``), and the rest of the check goes on.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator

#: The scale of a script's timeout is its work over that of a case of REFERENCE_ELEMENTS elements, at most
#: MAX_SCALE.
REFERENCE_ELEMENTS = 16
MAX_SCALE = 10.0
#: Verdicts of a script that ran out of its budget: notes, never findings (NOTE [check budgets]).
BUDGET_VERDICTS = ("timeout", "memory")
_OUT_OF_MEMORY = re.compile(r"can't allocate memory|DefaultCPUAllocator: not enough memory|out of memory", re.I)


def scaled_timeout(base: float | None, *, elements: int, outputs: int, order: int) -> float | None:
    """NOTE [check budgets]: ``base`` scaled by the script's work: ``elements`` (input elements
    differentiated), ``outputs`` (output elements), ``order`` (levels of differentiation)."""
    if base is None:
        return None
    work = max(1, elements) ** max(1, order) * max(1, outputs)
    ref = REFERENCE_ELEMENTS ** max(1, order) * REFERENCE_ELEMENTS
    return base * min(MAX_SCALE, max(1.0, work / ref))


def _address_space() -> int:
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


@contextlib.contextmanager
def memory_limit(mib: float | None) -> Iterator[None]:
    """NOTE [check budgets]: for the time of the block, this process may add at most ``mib`` MiB of address
    space (None, or a system without ``RLIMIT_AS``: no limit)."""
    try:
        import resource
    except ImportError:  # not POSIX
        mib = None
    if mib is None or not os.path.exists("/proc/self/statm"):
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = _address_space() + int(mib * 2**20)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def out_of_memory(error_type: str | None, error: str | None) -> bool:
    """Whether a side's error is the memory limit's (NOTE [check budgets])."""
    return error_type == "MemoryError" or bool(error and _OUT_OF_MEMORY.search(error))
