"""The bucket book alone decides "same bug" (NOTE [signature memo], NOTE [bucket families], NOTE [smallest
repro]). Fast: no torch, no worker; findings are built by hand from the seed's case."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from fuzzer.ir.case import Case, Transform
from fuzzer.judge.execute import Outcome, Side
from fuzzer.triage.buckets import (
    BucketBook,
    Family,
    KnownBucket,
    KnownBuckets,
    RawFinding,
    ShrinkJob,
    error_bucket_id,
    quick_key,
)
from fuzzer.triage.reduce import size
from fuzzer.triage.shrink import Goal
from fuzzer.triage.signature import Signature, skeleton

OUTCOME = Outcome("value_mismatch", Side("0.", None, None), Side("6.", None, None), 0.0)


@dataclass
class Found:
    """What the book needs of a finding (fuzzer.publish.findings.Finding has more)."""

    case: Case
    seconds_to_find: float = 1.0
    cases_to_find: int = 10
    shrink: dict[str, Any] = field(default_factory=dict)


def raw(case: Case, features: tuple[str, ...] = ("saved_output",), *, verdict: str = "value_mismatch") -> RawFinding:
    sig = Signature(verdict, "functorch_vs_create_graph", skeleton(case), features)
    quick = quick_key(verdict, sig.oracle, case, "")
    return RawFinding(sig.oracle, verdict, quick, "", skeleton(case), sig, case, OUTCOME)


def job_of(book: BucketBook[Found], rf: RawFinding) -> ShrinkJob:
    assert rf.raw is not None and rf.case is not None
    job = ShrinkJob(rf.raw, rf.goal, rf.case, OUTCOME, None, 1.0, 10)
    book.open(job)
    return job


def with_stack(case: Case, *names: str) -> Case:
    return replace(case, transforms=tuple(Transform(n) for n in names))


def test_a_repeat_is_a_hit_of_the_job_then_of_its_bucket(seed_case: Case) -> None:
    book: BucketBook[Found] = BucketBook()
    rf = raw(seed_case)
    assert book.see(rf).kind == "new"
    job = job_of(book, rf)
    again = replace(rf, raw=None, case=None, outcome=None)  # the worker sends only the quick key
    assert book.see(again).kind == "hit" and job.hits == 2
    sig = replace(rf.raw, skeleton=("grad",))
    bucket, publish = book.settle(job, sig, Found(seed_case), 1.5)
    assert publish and bucket.hits == 2 and sig.id in book.buckets and not book.jobs
    seen = book.see(again)
    assert (seen.kind, seen.id) == ("hit", sig.id) and bucket.hits == 3
    assert book.stacks[sig.id]["functorch_vs_create_graph: autograd_grad>grad"] == 3


def test_a_repeat_before_its_first_report_is_not_counted(seed_case: Case) -> None:
    book: BucketBook[Found] = BucketBook()
    orphan = replace(raw(seed_case), raw=None, case=None, outcome=None)
    assert book.see(orphan).kind == "orphan" and not book.buckets and not book.jobs


def test_the_same_raw_signature_under_another_quick_key_is_a_hit(seed_case: Case) -> None:
    book: BucketBook[Found] = BucketBook()
    first = raw(seed_case)
    book.see(first)
    job = job_of(book, first)
    other = replace(first, quick=first.quick + "-float32")
    assert book.see(other).kind == "hit" and job.hits == 2


def test_a_worker_checked_same_as_names_the_bucket_it_was_merged_into(seed_case: Case) -> None:
    book: BucketBook[Found] = BucketBook()
    first = raw(seed_case)
    book.see(first)
    job = job_of(book, first)
    bucket, _ = book.settle(job, replace(first.raw, skeleton=("grad",)), Found(seed_case), 1.0)
    # a later finding the worker found to be that bucket's bug, named by the pre-shrink id
    later = RawFinding(first.oracle, first.verdict, "another-quick-key", "", ("vmap",), same_as=first.raw.id)
    seen = book.see(later)
    assert (seen.kind, seen.id) == ("hit", bucket.signature.id) and bucket.hits == 2


def test_a_family_shrinks_at_most_family_limit_stacks(seed_case: Case) -> None:
    book: BucketBook[Found] = BucketBook(family_limit=2)
    stacks = [("autograd_grad", "grad"), ("autograd_grad", "jacrev"), ("autograd_grad", "jacfwd")]
    findings = [raw(with_stack(seed_case, *s)) for s in stacks]
    assert book.see(findings[0]).kind == "new"
    job_of(book, findings[0])
    version = book.version
    assert book.see(findings[1]).kind == "new"
    assert book.version == version + 1  # the family is full: workers are told
    job_of(book, findings[1])
    third = book.see(findings[2])
    assert (third.kind, third.id) == ("hit", findings[0].raw.id)
    assert book.jobs[findings[0].raw.id].hits == 2
    family = Family("value_mismatch", "functorch_vs_create_graph", "", ("saved_output",))
    assert book.families[family.key] == [f.raw.id for f in findings[:2]]
    assert Family.from_key(family.key) == family
    full = [b for b in book.known().entries if b.skeleton is None]
    assert full == [KnownBucket(findings[0].raw.id, family.goal, None)]


def test_family_limit_zero_shrinks_every_stack(seed_case: Case) -> None:
    book: BucketBook[Found] = BucketBook(family_limit=0)
    for s in [("grad",), ("vmap",), ("jacrev",), ("jacfwd",)]:
        assert book.see(raw(with_stack(seed_case, *s))).kind == "new"


def test_a_job_merged_into_a_bucket_moves_its_hits_and_stacks(seed_case: Case) -> None:
    book: BucketBook[Found] = BucketBook()
    a, b = raw(seed_case), raw(with_stack(seed_case, "autograd_grad", "jacrev"), ("saved_output", "grad_unused"))
    book.see(a)
    job_a = job_of(book, a)
    bucket, _ = book.settle(job_a, a.raw, Found(seed_case), 1.0)
    book.see(b)
    job_b = job_of(book, b)
    job_b.hits = 4
    assert book.merge(job_b, bucket.signature.id) is bucket
    assert bucket.hits == 5 and bucket.raw_signatures == 2 and not book.jobs
    assert book.raw[b.raw.id] == bucket.signature.id and book.quick[b.quick] == bucket.signature.id
    assert sum(book.stacks[bucket.signature.id].values()) == 2 and b.raw.id not in book.stacks


def test_settle_publishes_a_smaller_repro_only_of_a_settled_bucket(seed_case: Case) -> None:
    """NOTE [smallest repro]: while the first finding is being verified nothing replaces it; once
    verified, only a strictly smaller case is published again (with the bucket's first find time)."""
    book: BucketBook[Found] = BucketBook(family_limit=0)
    small = seed_case
    big = with_stack(seed_case, "autograd_grad", "jacrev", "grad")
    assert size(big) > size(small)
    sig = Signature("value_mismatch", "functorch_vs_create_graph", ("grad",), ("saved_output",))
    jobs = []
    for i in range(4):
        rf = raw(with_stack(seed_case, "autograd_grad", *(["grad"] * (i + 1))))
        book.see(rf)
        jobs.append(job_of(book, rf))
    bucket, publish = book.settle(jobs[0], sig, Found(big, cases_to_find=5), 1.0)
    assert publish
    assert book.settle(jobs[1], sig, Found(small), 1.0) == (bucket, False)  # still pending
    bucket.status = "verified"
    assert book.settle(jobs[2], sig, Found(big), 1.0) == (bucket, False)  # not smaller
    smaller = Found(small, cases_to_find=99)
    assert book.settle(jobs[3], sig, smaller, 2.0) == (bucket, True)
    assert smaller.cases_to_find == 5  # found when the bucket was
    assert bucket.hits == 4 and bucket.raw_signatures == 4 and bucket.shrink_seconds == [1.0, 1.0, 1.0, 2.0]


def test_crashes_are_bucketed_as_they_are(seed_case: Case) -> None:
    book: BucketBook[Found] = BucketBook()
    sig = Signature("crash", "functorch_vs_create_graph", skeleton(seed_case), ())
    bucket = book.add(sig, Found(seed_case))
    assert bucket is not None and book.add(sig, Found(seed_case)) is None and bucket.hits == 2
    assert book.known().entries == ()  # no goal: workers cannot check a crash by running it


def test_error_findings_are_keyed_by_their_fingerprint(seed_case: Case) -> None:
    """NOTE [error buckets]: every error verdict of one torch error is one bucket, whatever the stack."""
    fp = "RuntimeError: boom @ torch/autograd/function.py:apply"
    a = error_bucket_id("error_functorch_only", "functorch_vs_create_graph", ("grad",), fp)
    b = error_bucket_id("different_errors", "jacrev_vs_jacfwd", ("vmap", "jacrev"), fp)
    assert a == b and a.startswith("error-")
    assert error_bucket_id("torch_bug_error", "vmap_vs_loop", (), fp).startswith("torch_bug_error-")
    assert KnownBuckets((KnownBucket(a, Goal("x", "y", ()), ("grad",)),)).has(a)


def test_known_buckets_say_which_cuts_to_check(seed_case: Case) -> None:
    """NOTE [signature memo]: a finding is checked against a bucket only with the same verdict, oracle and
    fingerprint, the bucket's essential features among its own, and a skeleton it can be cut to."""
    case = with_stack(seed_case, "autograd_grad", "jacrev", "grad")
    goal = Goal("value_mismatch", "functorch_vs_create_graph", ("saved_output",))
    other_oracle = replace(goal, oracle="jacrev_vs_jacfwd")
    needs_more = replace(goal, features=("saved_output", "mark_dirty"))
    known = KnownBuckets(
        (
            KnownBucket("b-grad", goal, ("autograd_grad", "grad")),
            KnownBucket("b-jacfwd", goal, ("jacfwd",)),  # not a subsequence of the stack
            KnownBucket("b-oracle", other_oracle, ("grad",)),
            KnownBucket("b-features", needs_more, ("grad",)),
            KnownBucket("family", goal, None),
        )
    )
    seen = Goal("value_mismatch", "functorch_vs_create_graph", (), "")
    cuts = list(known.cuts(case, seen))
    assert [c[0] for c in cuts] == ["b-grad", "family"]
    assert [t.name for t in cuts[0][2].transforms] == ["autograd_grad", "grad"]
    assert cuts[1][2] is case  # a family's bug shows under any stack
    # before shrinking, a job is checked against buckets with exactly its goal (never a family)
    assert [b for b, _ in known.job_cuts(case, goal)] == ["b-grad"]
    assert [b for b, _ in known.job_cuts(case, needs_more)] == ["b-features"]


@pytest.mark.parametrize("limit", [1, 3])
def test_known_lists_buckets_with_a_goal_and_full_families(seed_case: Case, limit: int) -> None:
    book: BucketBook[Found] = BucketBook(family_limit=limit)
    rf = raw(seed_case)
    book.see(rf)
    job = job_of(book, rf)
    book.settle(job, rf.raw, Found(seed_case), 1.0)
    entries = book.known().entries
    assert KnownBucket(rf.raw.id, rf.goal, rf.raw.skeleton) in entries
    assert any(e.skeleton is None for e in entries) == (limit == 1)
