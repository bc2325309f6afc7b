"""The worker protocol (NOTE [worker protocol]): frozen messages between driver and worker."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..ir.case import Case, Checkpoint, Compile
from ..judge.execute import Outcome
from ..triage.buckets import KnownBuckets, RawFinding
from ..triage.shrink import Goal


@dataclass(frozen=True)
class WorkerInit:
    slot: int
    seed: int
    strategy_kwargs: dict[str, Any] = field(default_factory=dict)
    case_timeout: float | None = 60.0
    coverage: dict[str, Any] | None = None  # Coverage.to_json() the worker starts steering from
    steer: bool = True
    steer_by: str = "time"  # NOTE [cost-aware steering]
    recycle_cases: int | None = None  # answer ``recycle`` after this many cases
    max_rss_mb: float | None = None  # ... or once the process is larger than this
    database: str | None = None  # Hypothesis example database directory (a cache; None: none)
    subject: str = "torch"  # NOTE [valid comparisons]: what is under test
    swarm: bool = True  # NOTE [swarm]
    compile_share: float = 0.0  # NOTE [compile share]: most of the case time the compiled oracle may take
    modes: tuple[str, ...] = ()  # NOTE [modes]: the modes switched on (compiled runs only with compile_share > 0)
    checkpoint_share: float = 0.0  # NOTE [modes]: most of the case time the checkpoint oracle may take
    custom_op_share: float = 0.0  # NOTE [modes]: most of the case time custom-op cases may take
    campaign_seconds: float = 0.0  # how far into the campaign the worker starts
    own_process: bool = False  # a process to itself: NOTE [frozen heap] in fuzzer.judge.torch_state


@dataclass(frozen=True)
class Fuzz:
    start: int  # first stream position
    max_cases: int  # run at most this many cases
    seconds: float  # stop starting new cases after this long
    skip: frozenset[int] = frozenset()  # positions not to run (cases that killed a worker)
    careful: bool = False  # no steering (re-running positions after a crash)
    span: int | None = None  # look at most this many positions (1: exactly ``start``)
    buckets: KnownBuckets | None = None  # the campaign's buckets so far (None: as in the last command)
    # NOTE [triage share]: seconds this command may spend triaging new findings (past them a new finding
    # is reported untriaged), and untriaged findings (stream position, finding) to triage first
    triage_budget: float = math.inf
    triage: tuple[tuple[int, RawFinding], ...] = ()


@dataclass(frozen=True)
class CaseReport:
    k: int
    features: tuple[str, ...]
    transforms: tuple[str, ...]
    verdicts: tuple[tuple[str, str, str | None], ...]  # (oracle, verdict, limitation or not_applicable reason)
    findings: tuple[RawFinding, ...] = ()
    float32_noise: int = 0
    internal_errors: tuple[str, ...] = ()
    seconds: float = 0.0  # the whole case: its oracles, float64 re-checks, ablation
    torch_seconds: float = 0.0  # running the rendered scripts of the case's oracles once each
    triage_seconds: float = 0.0  # of ``seconds``: telling a new finding's bug (ablation, known-bucket checks)
    generate_seconds: float = 0.0  # decoding it (and the draws steering skipped before it)
    oracle_seconds: tuple[tuple[str, float], ...] = ()  # (oracle, seconds its sides ran), each oracle run
    # NOTE [worker time]: the whole fuzz-loop iteration of this case (its decoding, the draws steering
    # skipped before it, running and judging it, the worker's bookkeeping), triage apart
    loop_seconds: float = 0.0
    compile: Compile | None = None  # how it also ran compiled (NOTE [compile share]); None: it did not
    checkpoint: Checkpoint | None = None  # how it also ran checkpointed (NOTE [modes]); None: it did not
    compiled_seconds: float = 0.0  # of ``seconds``: what running it compiled cost (NOTE [worker time])
    custom_op_seconds: float = 0.0  # of ``seconds``: what running it as a custom op cost (NOTE [modes])
    compiled_triage_seconds: float = 0.0  # of ``triage_seconds``: the compiled oracle's findings'


@dataclass(frozen=True)
class FuzzResult:
    reports: tuple[CaseReport, ...]
    next: int  # the first stream position not yet drawn
    skipped: int = 0  # draws steering did not run
    invalid: int = 0  # buffers that decoded to no case
    recycle: str | None = None  # why the worker asks to be replaced
    rss_mb: float = 0.0
    # NOTE [triage share]: the command's untriaged findings, triaged (or still untriaged: no budget left),
    # with their stream positions, and the seconds that took (of them, the compiled oracle's findings')
    triaged: tuple[tuple[int, RawFinding], ...] = ()
    triage_seconds: float = 0.0
    compiled_triage_seconds: float = 0.0


@dataclass(frozen=True)
class Job:
    """Shrink a new finding (NOTE [shrinking]) unless an existing bucket already shows its bug."""

    id: str  # the raw signature id
    goal: Goal
    case: Case
    buffer: bytes | None
    budget: int
    buckets: KnownBuckets = KnownBuckets()  # the buckets so far
    position: int = 0  # the case's stream position (which entry of the buffer's group it is)
    slot: int = 0  # the stream's slot: with position, the swarm configuration the buffer decodes under


@dataclass(frozen=True)
class JobResult:
    id: str
    same_as: str | None = None  # the bucket whose bug this is
    case: Case | None = None  # the shrunk case
    outcome: Outcome | None = None  # of the shrunk case
    verdict: str = (
        ""  # of the shrunk case, where shrinking narrowed it (NOTE [one-sided errors] in fuzzer/triage/shrink.py)
    )
    info: dict[str, Any] = field(default_factory=dict)  # runs, seconds, steps, exhausted
    triage: tuple[str, str] | None = None  # (label, detail) for a value_mismatch
    error: str | None = None  # the job failed (traceback); the finding is published unshrunk
    seconds: float = 0.0


Beat = Callable[[tuple[str, Any]], None]
