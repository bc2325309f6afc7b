"""The bucket book: the one place that decides whether two findings are the same bug.

A pure class without I/O (:class:`BucketBook`), owned by the campaign driver, and the read-only view of
it that workers get (:class:`KnownBuckets`). Workers run cases; what a run must show for a finding to
count as an existing bucket's bug is said here.

NOTE [signature memo]
Ablation (a run per feature) and shrinking are what a campaign spends its time on, so each is done once
per new bug, not once per occurrence. A finding is a hit of what the book already knows when:

* its :func:`quick_key` (verdict, oracle, skeleton, feature set, error fingerprint) was seen before (the
  worker that saw it sends only this key);
* a worker found that its bug still shows (the same :class:`~fuzzer.triage.shrink.Goal`, NOTE
  [shrinking]) once its stack is cut to a known bucket's skeleton, or that it shows a full family's
  essential features (:meth:`KnownBuckets.cuts`: a run per essential feature, not one per feature);
* its pre-shrink signature (after ablation) was seen before;
* it is one more stack of a full family (NOTE [bucket families]);
* it is an error whose bucket (:func:`error_bucket_id`) is known.

Otherwise it becomes a :class:`ShrinkJob`; its repeats meanwhile count as hits of the job, and the job
checks its cut to every bucket known by then before it shrinks (:meth:`KnownBuckets.job_cuts`). A shrunk
finding is then bucketed by its shrunk signature (:meth:`BucketBook.settle`).

NOTE [bucket families]
On a torch with many disagreements, one mechanism (the same verdict, oracle, error fingerprint and
essential features: a :class:`Family`) shows up under hundreds of transform stacks, and shrinking rarely
brings two stacks down to the same skeleton: each would become a bucket of its own, each costing a shrink
(seconds) and a verification, so the shrink queue would grow without end and the report would bury
distinct bugs under variants of one. The book therefore shrinks at most ``family_limit`` stacks (default
3) of a family; later ones are counted as hits of the family's first bucket (its ``raw_signatures``
counts them). ``family_limit=0`` shrinks and publishes every stack.

An error finding is keyed by the fingerprint of the unexplained error (NOTE [error buckets] in
:mod:`fuzzer.judge.compare`), not by its features: one torch error is one bucket whatever Function or
stack raised it (:func:`error_bucket_id`), and a worker that meets a known error key skips ablation.

NOTE [smallest repro]
A bucket publishes its smallest shrunk case: a smaller one found later replaces the published repro
once it, too, has been verified (:meth:`BucketBook.settle` says when to publish again).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from ..ir.case import Case
from ..ir.features import features
from ..judge.execute import Outcome
from .reduce import is_subsequence, size, to_skeleton
from .shrink import Goal
from .signature import Signature, compile_key, skeleton


def quick_key(verdict: str, oracle: str, case: Case, fp: str) -> str:
    """NOTE [signature memo]: what makes two occurrences the same bug without ablating again."""
    return f"{verdict}|{oracle}|{'>'.join(skeleton(case))}|{'+'.join(features(case))}|{fp}|{compile_key(case, oracle)}"


def error_bucket_id(verdict: str, oracle: str, stack: tuple[str, ...], fingerprint: str) -> str:
    """NOTE [error buckets]: the bucket of an error finding, known before any ablation."""
    return Signature(verdict, oracle, stack, (), fingerprint).id


@dataclass(frozen=True)
class Family:
    """NOTE [bucket families]: one mechanism under any transform stack."""

    verdict: str
    oracle: str
    fingerprint: str
    features: tuple[str, ...]  # the essential features

    @property
    def goal(self) -> Goal:
        return Goal(self.verdict, self.oracle, self.features, self.fingerprint)

    @property
    def key(self) -> str:
        """The family's name in ``state.json``."""
        return json.dumps([self.verdict, self.oracle, self.fingerprint, list(self.features)])

    @classmethod
    def from_key(cls, key: str) -> Family:
        verdict, oracle, fingerprint, tags = json.loads(key)
        return cls(verdict, oracle, fingerprint, tuple(tags))


@dataclass(frozen=True)
class RawFinding:
    """A finding as a worker saw it. ``raw``, ``case`` and ``outcome`` are None when this worker already
    reported the same ``quick`` key (the book counts it as a hit). ``untriaged``: its triage (ablation)
    waits for the triage share (NOTE [triage share] in fuzzer/campaign/schedule.py): ``case`` and
    ``outcome`` are set, ``raw`` is None, and a worker is handed it later."""

    oracle: str
    verdict: str
    quick: str
    fingerprint: str
    stack: tuple[str, ...] = ()  # the case's transform skeleton (where the bucket was hit)
    raw: Signature | None = None
    case: Case | None = None
    outcome: Outcome | None = None
    same_as: str | None = None  # an existing bucket whose bug this is (checked without ablating)
    untriaged: bool = False

    @property
    def goal(self) -> Goal:
        """What shrinking this finding keeps (NOTE [shrinking]): its verdict, oracle, essential features
        and error fingerprint."""
        assert self.raw is not None
        return Goal(self.verdict, self.oracle, self.raw.features, self.fingerprint)

    @property
    def where(self) -> str:
        """``"oracle: stack"``: what the book counts a bucket's hits under."""
        return f"{self.oracle}: {'>'.join(self.stack)}"


@dataclass(frozen=True)
class KnownBucket:
    id: str
    goal: Goal
    skeleton: tuple[str, ...] | None  # None: a full family, whose bug shows under any stack


@dataclass(frozen=True)
class KnownBuckets:
    """What a worker knows of the book (sent with its commands): each bucket's goal and skeleton, and
    each full family. Says which runs would show that a finding is a known bucket's bug; the worker runs
    them (NOTE [signature memo])."""

    entries: tuple[KnownBucket, ...] = ()

    def has(self, bucket_id: str) -> bool:
        return any(b.id == bucket_id for b in self.entries)

    def refused(self) -> bool:
        """NOTE [known refusals]: whether some known refusal's bucket exists."""
        return any(b.goal.oracle.startswith("known:") for b in self.entries)

    def refusal(self, key: str) -> str | None:
        """NOTE [known refusals]: the id of the one bucket of the known bug ``key`` (``known:<number>``), or None."""
        return next((b.id for b in self.entries if b.goal.oracle == key), None)

    def cuts(self, case: Case, seen: Goal) -> Iterator[tuple[str, Goal, Case]]:
        """(bucket id, its goal, ``case`` cut to its skeleton) for each bucket the finding ``seen`` may be:
        same verdict, oracle and error fingerprint, the bucket's essential features among the case's, its
        skeleton a subsequence of the case's stack (a family: any stack). The bug is that bucket's if the
        cut still shows the goal with its essential features still essential."""
        tags, stack = set(features(case)), skeleton(case)
        for b in self.entries:
            if (b.goal.verdict, b.goal.oracle, b.goal.fingerprint) != (seen.verdict, seen.oracle, seen.fingerprint):
                continue
            if not set(b.goal.features) <= tags:
                continue
            if b.skeleton is None:
                yield b.id, b.goal, case
            elif is_subsequence(b.skeleton, stack):
                cut = to_skeleton(case, b.skeleton)
                if cut is not None:
                    yield b.id, b.goal, cut

    def job_cuts(self, case: Case, goal: Goal) -> Iterator[tuple[str, Case]]:
        """Before a job shrinks: (bucket id, ``case`` cut to its skeleton) for each bucket with exactly the
        job's goal whose skeleton is a subsequence of the case's stack."""
        stack = skeleton(case)
        for b in self.entries:
            if b.skeleton is None or b.goal != goal or not is_subsequence(b.skeleton, stack):
                continue
            cut = to_skeleton(case, b.skeleton)
            if cut is not None:
                yield b.id, cut


class HasCase(Protocol):
    """What the book needs of a finding (a :class:`fuzzer.publish.findings.Finding`)."""

    case: Case
    seconds_to_find: float
    cases_to_find: int


F = TypeVar("F", bound=HasCase)


@dataclass
class Bucket(Generic[F]):
    """Findings with one (shrunk) signature. ``first`` is the finding that opened it, ``finding`` the
    one whose repro is published: the smallest shrunk case verified so far (NOTE [smallest repro])."""

    signature: Signature
    first: F
    hits: int = 1
    status: str = "pending"  # pending -> verified | unverified
    path: Path | None = None
    finding: F | None = None
    goal: Goal | None = None  # what shrinking kept (NOTE [shrinking])
    raw_signatures: int = 1  # distinct pre-shrink signatures that shrank into this bucket
    shrink_seconds: list[float] = field(default_factory=list)
    announced: bool = False  # its new_bucket event is written

    @property
    def published(self) -> F:
        return self.finding or self.first


@dataclass
class ShrinkJob:
    """A new finding waiting for (or in) a shrink job; ``hits`` counts its occurrences so far."""

    raw: Signature
    goal: Goal
    case: Case
    outcome: Outcome
    buffer: bytes | None
    seconds_to_find: float
    cases_to_find: int
    hits: int = 1
    position: int = 0  # the case's stream position (NOTE [worker streams])
    slot: int = 0  # the stream's slot (its swarm configuration: NOTE [swarm])


@dataclass(frozen=True)
class Seen:
    """What :meth:`BucketBook.see` made of a finding: ``hit`` (counted under ``id``: a bucket or a job),
    ``new`` (shrink it: ``open`` a job under the raw signature ``id``) or ``orphan`` (a repeat whose
    first report never arrived; not counted)."""

    kind: str
    id: str


class BucketBook(Generic[F]):
    """Buckets, jobs and the memo that maps every way of naming a bug (quick key, pre-shrink signature,
    family) to the bucket (or job) it is. No I/O; the driver persists it (:mod:`fuzzer.campaign.state`)."""

    def __init__(self, family_limit: int = 3, *, one_bucket: Callable[[RawFinding], str | None] | None = None) -> None:
        self.family_limit = family_limit
        # NOTE [known refusals] (fuzzer/publish/upstream.py): a finding's one-bucket family key, or None
        self.one_bucket = one_bucket
        self.buckets: dict[str, Bucket[F]] = {}
        self.jobs: dict[str, ShrinkJob] = {}  # raw signature id -> job not yet bucketed
        self.raw: dict[str, str] = {}  # pre-shrink signature id -> bucket id (each is shrunk once)
        self.quick: dict[str, str] = {}  # quick key -> raw signature / bucket id
        self.families: dict[str, list[str]] = {}  # Family.key -> its raw signature ids
        # "oracle: stack" -> hits, per raw signature or bucket id (merged on remapping)
        self.stacks: defaultdict[str, Counter[str]] = defaultdict(Counter)
        self.version = 0  # bumped whenever :meth:`known` changes (workers are sent it again)

    # ------------------------------------------------------------------------------ findings

    def see(self, rf: RawFinding) -> Seen:
        """Count a finding a worker reported (NOTE [signature memo], NOTE [bucket families])."""
        known = self.quick.get(rf.quick) or (self.raw.get(rf.same_as, rf.same_as) if rf.same_as else None)
        if known is None and rf.raw is not None:
            known = self.raw.get(rf.raw.id)
        self.stacks[known or (rf.raw.id if rf.raw is not None else rf.quick)][rf.where] += 1
        if known is not None:
            self.quick[rf.quick] = known
            self._hit(known)
            return Seen("hit", known)
        if rf.raw is None or rf.case is None or rf.outcome is None:
            return Seen("orphan", rf.quick)
        family_key, limit = Family(rf.verdict, rf.oracle, rf.fingerprint, rf.raw.features).key, self.family_limit
        special = self.one_bucket(rf) if self.one_bucket is not None else None
        if special is not None:  # NOTE [known refusals]: one bucket whatever the verdict, oracle and stack
            family_key, limit = special, 1
        members = self.families.setdefault(family_key, [])
        if limit and len(members) >= limit:
            target = self.raw.get(members[0], members[0])
            self.quick[rf.quick] = self.raw[rf.raw.id] = target
            self.stacks[target].update(self.stacks.pop(rf.raw.id, Counter()))
            self._hit(target, raw_signature=True)
            return Seen("hit", target)
        members.append(rf.raw.id)
        if len(members) == limit:
            self.version += 1  # workers learn of the full family
        self.quick[rf.quick] = self.raw[rf.raw.id] = rf.raw.id
        return Seen("new", rf.raw.id)

    def open(self, job: ShrinkJob) -> None:
        """Register the job for a finding :meth:`see` called new."""
        self.jobs[job.raw.id] = job

    def _hit(self, target: str, *, raw_signature: bool = False) -> None:
        job = self.jobs.get(target)
        if job is not None:
            job.hits += 1
        elif target in self.buckets:
            self.buckets[target].hits += 1
            self.buckets[target].raw_signatures += raw_signature

    def merge(self, job: ShrinkJob, bucket_id: str) -> Bucket[F]:
        """A job's worker found that an existing bucket already shows its bug."""
        self.jobs.pop(job.raw.id, None)
        self._remap(job.raw.id, bucket_id)
        bucket = self.buckets[bucket_id]
        bucket.hits += job.hits
        bucket.raw_signatures += 1
        return bucket

    def settle(self, job: ShrinkJob, signature: Signature, finding: F, shrink_seconds: float) -> tuple[Bucket[F], bool]:
        """Bucket a job's shrunk finding by its shrunk ``signature``: (its bucket, whether ``finding`` is
        to be published: a new bucket's first finding, or a smaller repro of a verified or unverified one;
        NOTE [smallest repro])."""
        self.jobs.pop(job.raw.id, None)
        self._remap(job.raw.id, signature.id)
        bucket = self.buckets.get(signature.id)
        if bucket is None:
            bucket = self.buckets[signature.id] = Bucket(
                signature, finding, hits=job.hits, goal=job.goal, shrink_seconds=[shrink_seconds]
            )
            self.version += 1
            return bucket, True
        bucket.hits += job.hits
        bucket.raw_signatures += 1
        bucket.shrink_seconds.append(shrink_seconds)
        if bucket.status == "pending":
            return bucket, False
        if bucket.status == "verified" and size(finding.case) >= size(bucket.published.case):
            return bucket, False
        finding.cases_to_find, finding.seconds_to_find = bucket.first.cases_to_find, bucket.first.seconds_to_find
        return bucket, True

    def add(self, signature: Signature, finding: F) -> Bucket[F] | None:
        """A finding that is bucketed as it is (a crash or hang): its new bucket, or None when it is a hit."""
        bucket = self.buckets.get(signature.id)
        if bucket is not None:
            bucket.hits += 1
            return None
        bucket = self.buckets[signature.id] = Bucket(signature, finding)
        return bucket

    def found_published(self, signature: Signature, finding: F, goal: Goal, path: Path) -> Bucket[F]:
        """A verified finding directory met on resume (published after the last save)."""
        bucket = self.buckets.get(signature.id)
        if bucket is None:
            bucket = self.buckets[signature.id] = Bucket(signature, finding, goal=goal)
        bucket.status, bucket.path, bucket.finding = "verified", path, finding
        self._remap(signature.id, signature.id)
        self.jobs.pop(signature.id, None)
        return bucket

    def _remap(self, raw_id: str, bucket_id: str) -> None:
        if raw_id != bucket_id and raw_id in self.stacks:
            self.stacks[bucket_id].update(self.stacks.pop(raw_id))
        for memo in (self.quick, self.raw):
            for key, value in list(memo.items()):
                if value == raw_id:
                    memo[key] = bucket_id
        self.raw[raw_id] = bucket_id

    # ------------------------------------------------------------------------------ views

    def known(self) -> KnownBuckets:
        """What workers check new findings against: every bucket with a goal, and every full family."""
        entries = [KnownBucket(bid, b.goal, b.signature.skeleton) for bid, b in self.buckets.items() if b.goal]
        for key, members in self.families.items():
            if key.startswith("known:"):  # NOTE [known refusals]: its one bucket, by its key
                entries.append(KnownBucket(self.raw.get(members[0], members[0]), Goal("*", key, (), ""), None))
        if self.family_limit:
            for key, members in self.families.items():
                if not key.startswith("known:") and len(members) >= self.family_limit:
                    entries.append(KnownBucket(self.raw.get(members[0], members[0]), Family.from_key(key).goal, None))
        return KnownBuckets(tuple(entries))
