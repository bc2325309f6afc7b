"""Known upstream issues: a small checked-in table (``known_issues.json``) from what a bucket shows to the
PyTorch issue that already reports it. A bucket that matches gets "known: #N" instead of an issue draft,
and is never filed again.

NOTE [known issues]
Each entry names its issue (``issue``: the URL, ``number``, ``title``), its ``state`` (``open`` or
``closed``; ``fixed_in``: the first release without the bug, ``fixed_by``: the PR), what it is about in
our words (``summary``), the ``evidence`` that it is the same mechanism (what the issue thread and our
corpus entry show), and the corpus entries it covers (``corpus``). An entry with ``"related": true`` is an
issue of a neighbouring mechanism: it is listed with the buckets it matches ("related: #N") but never
makes a bucket known, so it never stops a draft or a filing.

An entry's ``match`` is one rule or a list of rules (any may hold). A rule holds any of these keys, and
every key present must hold:

    fingerprint     a regex searched in the bucket's signature text (an error bucket's is its fingerprint,
                    NOTE [error buckets]): write it without file paths and line numbers, they vary by build
    verdict         a verdict, or a list of them
    oracle          an oracle, or a list of them
    transforms      a regex that must match the whole signature skeleton, outermost first and joined by
                    ``>`` (``hessian>jacrev``)
    features        all of them among the bucket's essential features
    case_features   all of them among the features of the bucket's case, essential or not (a feature
                    that ablation cannot make essential: without a custom jvp, forward AD of a Function
                    raises the documented error, so ``custom_jvp`` is never essential to a value bucket)
    exact_features  the bucket's essential features are exactly these
    not_features    none of them among the bucket's essential features
    ids             bucket ids

An entry with ``"one_bucket": true`` names a bug a mode meets under nearly every stack and case (NOTE
[known refusals]): every finding its rules match by what a worker knows before shrinking (fingerprint,
verdict, oracle, the case's features) is one bucket, shrunk and published once, never drafted.

``tests/publish/test_upstream.py`` loads every corpus entry as a bucket and checks which entry each
matches, so a rule that starts matching another mechanism's entry fails there.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ..ir.errors import AffuzzError

DEFAULT_TABLE = Path(__file__).with_name("known_issues.json")
PYTORCH_ISSUES = "https://github.com/pytorch/pytorch/issues/"
RULE_KEYS = frozenset(
    {
        "fingerprint",
        "verdict",
        "oracle",
        "transforms",
        "features",
        "case_features",
        "exact_features",
        "not_features",
        "ids",
    }
)
STATES = ("open", "closed")


class KnownIssuesError(AffuzzError, ValueError):
    pass


def _one_of(value: str | list[str], actual: str) -> bool:
    return actual in value if isinstance(value, list) else actual == value


def rule_holds(
    rule: dict[str, Any],
    *,
    signature: str,
    verdict: str,
    oracle: str,
    features: tuple[str, ...],
    bucket_id: str,
    transforms: tuple[str, ...] = (),
    case_features: tuple[str, ...] = (),
) -> bool:
    """Whether one ``match`` rule holds for a bucket (NOTE [known issues])."""
    essential = set(features)
    checks = {
        "fingerprint": lambda v: re.search(v, signature) is not None,
        "verdict": lambda v: _one_of(v, verdict),
        "oracle": lambda v: _one_of(v, oracle),
        "transforms": lambda v: re.fullmatch(v, ">".join(transforms)) is not None,
        "features": lambda v: set(v) <= essential,
        "case_features": lambda v: set(v) <= essential | set(case_features),
        "exact_features": lambda v: set(v) == essential,
        "not_features": lambda v: not set(v) & essential,
        "ids": lambda v: bucket_id in v,
    }
    return all(checks[key](value) for key, value in rule.items())


@dataclass(frozen=True)
class KnownIssue:
    issue: str  # its URL
    number: int
    summary: str  # what the issue is about, in our words (not its title)
    match: dict[str, Any] | list[dict[str, Any]]
    note: str = ""
    title: str = ""  # the issue's own title
    state: str = "open"  # open | closed
    fixed_in: str | None = None  # the first torch release without the bug
    fixed_by: str | None = None  # the PR that fixed it (URL)
    related: bool = False  # a neighbouring mechanism: listed, never makes a bucket known
    evidence: str = ""  # why this is (or is only related to) the bucket's mechanism
    corpus: tuple[str, ...] = ()  # the corpus entries it covers, or relates to
    one_bucket: bool = False  # NOTE [known refusals]: every finding it matches is one bucket

    @property
    def rules(self) -> list[dict[str, Any]]:
        return self.match if isinstance(self.match, list) else [self.match]

    @property
    def ref(self) -> str:
        """``#N`` for a PyTorch issue, ``owner/name#N`` for another repository's."""
        if self.issue.startswith(PYTORCH_ISSUES):
            return f"#{self.number}"
        m = re.match(r"https://github\.com/([^/]+/[^/]+)/issues/", self.issue)
        return f"{m.group(1)}#{self.number}" if m else f"#{self.number}"

    @property
    def state_text(self) -> str:
        """``open``, or ``closed, fixed in 2.14.1 by #178495``."""
        text = self.state
        if self.fixed_in:
            text += f", fixed in {self.fixed_in}"
        if self.fixed_by:
            m = re.search(r"/pull/(\d+)$", self.fixed_by)
            text += f" by #{m.group(1)}" if m else f" by {self.fixed_by}"
        return text

    def matches(
        self,
        *,
        signature: str,
        verdict: str,
        oracle: str,
        features: tuple[str, ...],
        bucket_id: str,
        transforms: tuple[str, ...] = (),
        case_features: tuple[str, ...] = (),
    ) -> bool:
        return any(
            rule_holds(
                rule,
                case_features=case_features,
                signature=signature,
                verdict=verdict,
                oracle=oracle,
                features=features,
                bucket_id=bucket_id,
                transforms=transforms,
            )
            for rule in self.rules
        )


def _entry(raw: dict[str, Any]) -> KnownIssue:
    entry = KnownIssue(**{**raw, "corpus": tuple(raw.get("corpus") or ())})
    if entry.state not in STATES:
        raise ValueError(f"#{entry.number}: state {entry.state!r} is not one of {', '.join(STATES)}")
    if not entry.rules:
        raise ValueError(f"#{entry.number}: match holds no rule")
    for rule in entry.rules:
        if not isinstance(rule, dict) or not rule:
            raise ValueError(f"#{entry.number}: a match rule must be a non-empty object")
        unknown = set(rule) - RULE_KEYS
        if unknown:
            raise ValueError(f"#{entry.number}: unknown match key {', '.join(sorted(unknown))}")
        for key in ("fingerprint", "transforms"):
            try:
                re.compile(rule.get(key, ""))
            except (re.error, TypeError) as e:
                raise ValueError(f"#{entry.number}: {key} {rule[key]!r} is not a regex: {e}") from None
    return entry


@cache
def _load(path: Path, mtime: float) -> tuple[KnownIssue, ...]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return tuple(_entry(raw) for raw in data["issues"])


def load_known_issues(path: Path = DEFAULT_TABLE) -> tuple[KnownIssue, ...]:
    """The table (NOTE [known issues]); raises :class:`KnownIssuesError` (one line) when it cannot be read."""
    try:
        return _load(path, path.stat().st_mtime)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise KnownIssuesError(f"{path}: cannot be read as a known-issues table ({e}); fix or restore it") from None


# NOTE [known refusals]
# A known bug can sit in the way of a whole mode: on torch 2.13 and 2.14.1 every reverse-mode torch.func
# transform refuses a torch.library custom op with register_autograd (pytorch#168393), so every custom-op
# case with such a level shows it, under each oracle that runs the op so and each stack. Bucketed by
# stack and oracle like other errors, it would become a bucket per family (up to ``family_limit`` each),
# each shrunk and verified, and its hits would be ablated one by one. Its known-issues entry says
# ``one_bucket``: a finding it matches, by what a worker knows of a finding before any shrinking, is one
# family whatever its verdict, oracle and stack (BucketBook's ``one_bucket``), shrunk and published once
# (known: never drafted), and once that bucket exists a worker counts each later one as its hit without
# ablating it.


def one_bucket_key(
    *, fingerprint: str, verdict: str, oracle: str, stack: tuple[str, ...], case_features: tuple[str, ...]
) -> str | None:
    """NOTE [known refusals]: ``known:<number>`` of the ``one_bucket`` entry a finding matches, or None."""
    for entry in load_known_issues():
        if (
            entry.one_bucket
            and not entry.related
            and entry.matches(
                signature=fingerprint,
                verdict=verdict,
                oracle=oracle,
                features=(),
                bucket_id="",
                transforms=stack,
                case_features=case_features,
            )
        ):
            return f"known:{entry.number}"
    return None


def _matching(bucket: dict[str, Any], table: tuple[KnownIssue, ...] | None) -> list[KnownIssue]:
    return [
        entry
        for entry in (load_known_issues() if table is None else table)
        if entry.matches(
            signature=bucket["signature"],
            verdict=bucket["verdict"],
            oracle=bucket["oracle"],
            features=tuple(bucket.get("signature_features") or ()),
            bucket_id=bucket["id"],
            transforms=tuple(bucket.get("transforms") or ()),
            case_features=tuple(bucket.get("features") or ()),
        )
    ]


def known_issue(bucket: dict[str, Any], table: tuple[KnownIssue, ...] | None = None) -> KnownIssue | None:
    """The known upstream issue of a bucket (a ``summary.json`` bucket: id, signature, verdict, oracle,
    transforms, signature_features), or None. Related entries never are one."""
    return next((entry for entry in _matching(bucket, table) if not entry.related), None)


def related_issues(bucket: dict[str, Any], table: tuple[KnownIssue, ...] | None = None) -> list[KnownIssue]:
    """The related (not the same mechanism) upstream issues a bucket matches."""
    return [entry for entry in _matching(bucket, table) if entry.related]


def corpus_bucket(meta: dict[str, Any]) -> dict[str, Any]:
    """A corpus entry's ``meta.json`` as a ``summary.json`` bucket (what :func:`known_issue` takes). An
    entry recorded before errors were bucketed by fingerprint keeps its old signature and the fingerprint
    under ``error``; its bucket gets the signature a campaign gives it now (NOTE [signatures])."""
    signature = str(meta.get("signature", ""))
    if meta.get("error") and not signature.startswith(("error|", "torch_bug_error|")):
        kind = "torch_bug_error" if meta.get("verdict") == "torch_bug_error" else "error"
        signature = f"{kind}|{meta['error']}"
    return {
        "id": meta["id"],
        "signature": signature,
        "verdict": meta["verdict"],
        "oracle": meta["oracle"],
        "transforms": list(meta.get("transforms") or ()),
        "signature_features": list(meta.get("essential_features") or ()),
        "features": list(meta.get("features") or ()),
    }
