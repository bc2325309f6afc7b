"""Filing issue drafts (:mod:`.drafts`) with the GitHub CLI, each bucket at most once per repository.

NOTE [filing]
``affuzz file OUT --repo OWNER/NAME`` is a dry run unless ``--yes``: it lists what it would file, what it
skips and why (not verified, known upstream per NOTE [known issues], already in the ledger) and the
tracker searches it would run; it calls gh only with ``--search``, which runs those searches and lists
their candidates. With ``--yes`` it first checks that ``gh`` is on PATH and logged in (else one line,
exit 2, nothing filed), then, for each draft:

1. asks the repository for an issue whose title carries the draft's token ``[affuzz:<bucket id>]`` (open
   or closed, ``gh issue list --search``); one is there: skipped, never filed twice;
2. searches the repository for the bug (``gh search issues``, open and closed): an error finding by its
   fingerprint's message (NOTE [error buckets]; numbers, paths and the frame left out), a value finding
   by its stack's transforms and essential features (:func:`search_queries`). The candidates (number,
   title, state, url) are listed. A candidate whose title or body carries the finding's error message
   (both normalized as the fingerprint is) is the same error: the draft is skipped unless ``--force``;
3. files it with ``gh issue create --repo R --title T --body-file F`` (the draft below its title line).

The ledger ``OUT/filed.json`` (``{schema_version, filed: [{bucket, repo, url, title, filed_at,
candidates}], skipped: [{bucket, repo, reason, candidates, skipped_at}]}``, written atomically) gets each
created issue right away, so a crash midway loses nothing and a second run files nothing twice (the token
search covers a ledger that was lost), and, per bucket and repository, why the last ``--yes`` run skipped
it. PyTorch's own tracker is used only when named exactly, ``--repo pytorch/pytorch``; near misses
(``pytorch/PyTorch``, ``pytorch/pytorch.git``, its URL) are refused.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..ir.features import feature
from ..ir.files import atomic_write_text
from .drafts import INDEX, ISSUES_DIR, LABELS_PREFIX, TOKEN, draft_plan, write_drafts
from .fingerprints import bucket_fingerprint, error_message
from .ledger import FilingError, ledger_path, load_ledger, now_utc, record_filed, record_skipped
from .rundata import BucketData, load_run
from .upstream import DEFAULT_TABLE, KnownIssue, known_issue

ALREADY_FILED = "already filed in "  # how a skip the ledger itself explains begins
PYTORCH = "pytorch/pytorch"
REPO = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?/[A-Za-z0-9._-]+")
BODIES = ".body"  # OUT/issues/.body/<id>.md: a draft below its title line, what --body-file gets
GH_TIMEOUT = 120.0  # seconds per gh call
SEARCH_LIMIT = 20  # candidates per tracker search
MIN_MESSAGE = 20  # characters an error message needs to be searched for and compared
PHRASE_LIMIT = 100  # characters of the phrase an error finding is searched by
#: The word an issue about a transform most likely contains, where it is not the transform's name (a
#: feature's word is its row's ``search_term``, NOTE [feature tags] in fuzzer/ir/features.py).
TRANSFORM_TERMS = {"autograd_grad": "autograd.grad"}


class GhUnavailable(FilingError):
    """No usable ``gh``: not on PATH, or not logged in. Nothing was filed."""


def repo_problem(repo: str) -> str | None:
    """Why ``repo`` cannot be filed to (one line), or None: OWNER/NAME, and PyTorch only as ``pytorch/pytorch``."""
    norm = re.sub(r"\s+", "", repo).lower()
    norm = re.sub(r"^(?:(?:https?|ssh|git)://)?(?:[^@/]+@)?(?:www\.)?github\.com[/:]", "", norm)
    norm = norm.strip("/").removesuffix(".git").strip("/")
    if repo != PYTORCH and norm == PYTORCH:
        return f"--repo {repo!r}: to file in PyTorch's tracker, name it exactly: --repo {PYTORCH}"
    if not REPO.fullmatch(repo) or repo.endswith(".git"):
        return f"--repo {repo!r}: not a GitHub repository as OWNER/NAME (e.g. --repo you/sandbox)"
    return None


# ---------------------------------------------------------------------------------------------- drafts


def drafts_stale(out: Path, known: tuple[KnownIssue, ...] | None = None) -> bool:
    """Whether ``OUT/issues/`` is missing, older than the run's files (or the known-issues table, which
    says what is drafted), or lacks a draft it should have."""
    index = out / ISSUES_DIR / INDEX
    if not index.exists():
        return True
    sources = [out / name for name in ("summary.json", "stats.json", "state.json")]
    sources += [DEFAULT_TABLE] if known is None else []
    sources += [p for p in (out / "findings").rglob("*") if p.is_file()] if (out / "findings").exists() else []
    newest = max((p.stat().st_mtime for p in sources if p.exists()), default=0.0)
    if newest > index.stat().st_mtime:
        return True
    to_draft = draft_plan(load_run(out), known).to_draft
    return any(not (out / ISSUES_DIR / f"{b.id}.md").exists() for b in to_draft)


def ensure_drafts(out: Path, *, python: str | None = None, known: tuple[KnownIssue, ...] | None = None) -> bool:
    """Write the drafts when :func:`drafts_stale`; True when they were (re)written."""
    if not drafts_stale(out, known):
        return False
    write_drafts(out, python=python, known=known)
    return True


@dataclass(frozen=True)
class Draft:
    bucket: str
    path: Path
    title: str
    labels: tuple[str, ...]
    queries: tuple[str, ...] = ()  # what the tracker is searched for (:func:`search_queries`)
    message: str = ""  # an error finding's normalized message (:func:`normalized`), "" for a value finding

    @property
    def token(self) -> str:
        return f"[affuzz:{self.bucket}]"

    def body(self) -> str:
        """The draft below its title line: what the issue's body is."""
        lines = self.path.read_text(encoding="utf-8").splitlines()
        return "\n".join(lines[1:]).lstrip("\n") + "\n"


def read_draft(path: Path) -> Draft:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise FilingError(f"{path}: cannot read the draft ({e.strerror}); rebuild it (delete {path.parent})") from None
    first = text.splitlines()[0] if text else ""
    m = TOKEN.search(first)
    if not first.startswith("# ") or m is None:
        raise FilingError(f"{path}: its first line must be '# <title> [affuzz:<bucket id>]'; fix or delete the draft")
    labels: tuple[str, ...] = ()
    for line in text.splitlines():
        if line.startswith(LABELS_PREFIX):
            labels = tuple(re.findall(r"`([^`]+)`", line))
    return Draft(m.group(1), path, first.removeprefix("# ").strip(), labels)


# ---------------------------------------------------------------------------------------------- searching


def normalized(text: str) -> str:
    """Text as an error fingerprint writes a message (NOTE [error buckets]): file paths with their line
    numbers dropped, bracketed parts ``[...]``, names starting with ``Fn`` as ``Fn``, numbers ``N``, blanks
    collapsed, lower case; so a fingerprint's message is a substring of an issue that quotes the error."""
    text = re.sub(r'\s+at\s+"[^"]*"(?::\d+|:N)?', "", text)
    text = re.sub(r"\[[^\]]*\]+", "[...]", text)
    text = re.sub(r"Fn[A-Za-z]*", "Fn", text)
    text = re.sub(r"[0-9]+", "N", text)
    return re.sub(r"\s+", " ", text).strip().lower()


def _phrase(message: str) -> str:
    """The longest stretch of ``message`` without a placeholder (N, [...]) or quote, cut at a word to
    :data:`PHRASE_LIMIT` characters: what GitHub can find verbatim."""
    parts = re.split(r"\[\.\.\.\]|\bN\b|\"|…", message)
    best = max((p.strip(" ,.;:()'`") for p in parts), key=len, default="")
    phrase = ""
    for word in best.split():
        if len(phrase) + len(word) + 1 > PHRASE_LIMIT:
            break
        phrase = f"{phrase} {word}".strip()
    return phrase


def _terms(bucket: BucketData) -> list[str]:
    transforms = [TRANSFORM_TERMS.get(t, t) for t in bucket.transforms]
    terms = (feature(f).search_term for f in bucket.signature_features)  # NOTE [feature tags]
    features = [t for t in terms if t is not None]
    return list(dict.fromkeys(["autograd.Function", *transforms, *features]))


def error_of(bucket: BucketData) -> str:
    """An error finding's message, normalized (:func:`normalized`), or "" (a value finding, or a message
    too short to tell one error from another)."""
    fp = bucket_fingerprint(bucket)
    message = normalized(error_message(fp)) if fp else ""
    return message if len(message) >= MIN_MESSAGE else ""


def search_queries(bucket: BucketData) -> tuple[str, ...]:
    """What the tracker is searched for: an error finding's message as a quoted phrase, else (a value
    finding, or an error whose message is too short) its stack's transforms and essential features."""
    fp = bucket_fingerprint(bucket)
    phrase = _phrase(error_message(fp)) if fp else ""
    if len(phrase) >= MIN_MESSAGE // 2:
        return (f'"{phrase}"',)
    return (" ".join(_terms(bucket)),)


@dataclass(frozen=True)
class Candidate:
    """An issue of the repository that a tracker search found."""

    number: int
    title: str
    state: str  # open | closed
    url: str
    same_error: bool = False  # its title or body carries the finding's error message

    def to_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "title": self.title,
            "state": self.state,
            "url": self.url,
            "same_error": self.same_error,
        }

    def line(self) -> str:
        return f"#{self.number} [{self.state}] {self.title} {self.url}" + (
            " (the same error message)" if self.same_error else ""
        )


def candidates(gh: Gh, repo: str, draft: Draft) -> list[Candidate]:
    """The issues of ``repo`` that the draft's searches find, each once, the same error first."""
    found: dict[int, Candidate] = {}
    for query in draft.queries:
        for issue in gh.search(repo, query):
            number = issue.get("number")
            if not isinstance(number, int) or number in found:
                continue
            text = normalized(f"{issue.get('title', '')}\n{issue.get('body', '')}")
            found[number] = Candidate(
                number,
                str(issue.get("title", "")),
                str(issue.get("state", "")).lower(),
                str(issue.get("url", "")),
                bool(draft.message) and draft.message in text,
            )
    return sorted(found.values(), key=lambda c: (not c.same_error, -c.number))


# ---------------------------------------------------------------------------------------------- the ledger


@dataclass(frozen=True)
class Skip:
    bucket: str
    reason: str
    candidates: tuple[Candidate, ...] = ()

    def to_json(self, repo: str) -> dict[str, Any]:
        return {
            "bucket": self.bucket,
            "repo": repo,
            "reason": self.reason,
            "candidates": [c.to_json() for c in self.candidates],
            "skipped_at": now_utc(),
        }


@dataclass
class Plan:
    out: Path
    repo: str
    to_file: list[Draft] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)


def plan(out: Path, repo: str, *, known: tuple[KnownIssue, ...] | None = None) -> Plan:
    """What ``affuzz file`` would file to ``repo`` and what it skips and why (from the drafts, the run and
    the ledger; the repository itself is asked only when filing, or searched with ``--search``). Each
    draft carries its tracker searches (:func:`search_queries`)."""
    problem = repo_problem(repo)
    if problem:
        raise FilingError(problem)
    run = load_run(out)
    ledger = {r["bucket"]: r for r in load_ledger(out) if r.get("repo") == repo}
    result = Plan(out, repo)
    for b in run.buckets:
        if not b.verified:
            result.skipped.append(
                Skip(
                    b.id,
                    f"not verified ({b.status or '?'}): only findings whose repro reproduced are filed",
                )
            )
            continue
        k = known_issue(b.summary, known)
        if k is not None:
            result.skipped.append(Skip(b.id, f"known upstream: {k.ref} {k.issue} ({k.state_text}; {k.summary})"))
            continue
        if b.id in ledger:
            result.skipped.append(Skip(b.id, f"{ALREADY_FILED}{repo}: {ledger[b.id]['url']} ({ledger_path(out)})"))
            continue
        path = out / ISSUES_DIR / f"{b.id}.md"
        if not path.exists():
            raise FilingError(
                f"{path}: no draft for verified bucket {b.id}; delete {path.parent} to rebuild the drafts"
            )
        result.to_file.append(replace(read_draft(path), queries=search_queries(b), message=error_of(b)))
    return result


# ---------------------------------------------------------------------------------------------- gh


class Gh:
    """The GitHub CLI, found on PATH (raises :class:`GhUnavailable` when it is not)."""

    def __init__(self, executable: str | None = None) -> None:
        exe = executable or shutil.which("gh")
        if exe is None:
            raise GhUnavailable(
                "gh (the GitHub CLI) is not on PATH; install it (https://cli.github.com) and run `gh auth login`; "
                "nothing was filed"
            )
        self.exe = exe

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "GH_PROMPT_DISABLED": "1", "GH_NO_UPDATE_NOTIFIER": "1", "NO_COLOR": "1"}
        try:
            return subprocess.run(
                [self.exe, *args],
                capture_output=True,
                text=True,
                timeout=GH_TIMEOUT,
                env=env,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            raise FilingError(f"`gh {' '.join(args[:2])}` did not answer within {GH_TIMEOUT:.0f} s") from None
        except OSError as e:
            raise GhUnavailable(f"{self.exe} cannot be run ({e.strerror or e}); nothing was filed") from None

    @staticmethod
    def _said(proc: subprocess.CompletedProcess[str]) -> str:
        lines = [line.strip() for line in (proc.stderr + "\n" + proc.stdout).splitlines() if line.strip()]
        return lines[0] if lines else f"exit status {proc.returncode}"

    def check_auth(self) -> None:
        proc = self.run("auth", "status")
        if proc.returncode != 0:
            raise GhUnavailable(
                f"gh is not logged in to GitHub (`gh auth status`: {self._said(proc)}); run `gh auth login`; "
                "nothing was filed"
            )

    def existing(self, repo: str, token: str) -> str | None:
        """The URL of an issue of ``repo`` (open or closed) whose title carries ``token``, or None."""
        proc = self.run(*token_command(repo, token))
        if proc.returncode != 0:
            raise FilingError(f"cannot search {repo} for {token} (`gh issue list`: {self._said(proc)})")
        try:
            issues = json.loads(proc.stdout or "[]")
        except ValueError:
            raise FilingError(f"`gh issue list` printed no JSON for {repo}: {proc.stdout[:200]!r}") from None
        for issue in issues if isinstance(issues, list) else []:
            if isinstance(issue, dict) and token in str(issue.get("title", "")):
                return str(issue.get("url", ""))
        return None

    def search(self, repo: str, query: str, limit: int = SEARCH_LIMIT) -> list[dict[str, Any]]:
        """The issues of ``repo`` (open and closed, no pull requests) that GitHub's search finds for
        ``query``: number, title, state, url, body."""
        proc = self.run(*search_command(repo, query, limit))
        if proc.returncode != 0:
            raise FilingError(f"cannot search {repo} for {query[:60]!r} (`gh search issues`: {self._said(proc)})")
        try:
            issues = json.loads(proc.stdout or "[]")
        except ValueError:
            raise FilingError(f"`gh search issues` printed no JSON for {repo}: {proc.stdout[:200]!r}") from None
        return [i for i in issues if isinstance(i, dict)] if isinstance(issues, list) else []

    def create(self, repo: str, title: str, body_file: Path, labels: tuple[str, ...] = ()) -> str:
        """File one issue; its URL."""
        args = ["issue", "create", "--repo", repo, "--title", title, "--body-file", str(body_file)]
        for label in labels:
            args += ["--label", label]
        proc = self.run(*args)
        if proc.returncode != 0:
            raise FilingError(f"`gh issue create` failed for {repo} ({title[-60:]!r}): {self._said(proc)}")
        urls = re.findall(r"https?://\S+", proc.stdout)
        if not urls:
            raise FilingError(f"`gh issue create` printed no issue URL for {repo}: {proc.stdout.strip()[:200]!r}")
        return urls[-1]


def token_command(repo: str, token: str) -> list[str]:
    """The gh arguments of the search for a draft's token in the titles of ``repo``'s issues."""
    return ["issue", "list", "--repo", repo, "--search", f'"{token}" in:title', "--state", "all", "--json", "url,title"]


def search_command(repo: str, query: str, limit: int = SEARCH_LIMIT) -> list[str]:
    """The gh arguments of one tracker search (what a dry run prints, what ``--yes`` runs)."""
    return ["search", "issues", "--repo", repo, "--json", "number,title,state,url,body", "--limit", str(limit)] + [
        "--",
        query,
    ]


@dataclass(frozen=True)
class Filed:
    bucket: str
    repo: str
    url: str
    title: str
    filed_at: str
    candidates: tuple[Candidate, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "bucket": self.bucket,
            "repo": self.repo,
            "url": self.url,
            "title": self.title,
            "filed_at": self.filed_at,
            "candidates": [c.to_json() for c in self.candidates],
        }


def record_plan_skips(p: Plan) -> None:
    """Record in the ledger why the plan skips what it skips (a ``--yes`` run); a bucket the ledger has
    as filed is not recorded again."""
    for s in p.skipped:
        if not s.reason.startswith(ALREADY_FILED):
            record_skipped(p.out, s.to_json(p.repo))


def same_error_reason(repo: str, found: list[Candidate]) -> str | None:
    """Why a draft is not filed (without ``--force``) given its candidates, or None."""
    same = [c for c in found if c.same_error]
    if not same:
        return None
    refs = ", ".join(f"#{c.number} [{c.state}] {c.url}" for c in same)
    return f"{repo} already has an issue with the same error message: {refs} (add --force to file anyway)"


def file_plan(
    p: Plan,
    gh: Gh,
    *,
    labels: bool = False,
    force: bool = False,
    on_filed: Callable[[Filed], None] | None = None,
    on_skip: Callable[[Skip], None] | None = None,
    on_candidates: Callable[[Draft, list[Candidate]], None] | None = None,
) -> list[Filed]:
    """File every draft of ``p`` that ``p.repo`` does not have yet (NOTE [filing]): each is recorded in the
    ledger as soon as it exists, then ``on_filed`` is called; each skip (the plan's and this run's) is
    recorded too. ``labels``: pass the drafts' suggested labels (the repository must have them, or gh
    refuses). ``force``: file a draft although a candidate carries its error message (a draft whose token
    the repository has is never filed). Raises :class:`FilingError` on the first failure."""
    gh.check_auth()
    record_plan_skips(p)
    filed: list[Filed] = []
    for d in p.to_file:
        url = gh.existing(p.repo, d.token)
        skip = None
        found: list[Candidate] = []
        if url is not None:
            skip = Skip(d.bucket, f"already in {p.repo}: {url} (its title carries {d.token})")
        else:
            found = candidates(gh, p.repo, d)
            if on_candidates:
                on_candidates(d, found)
            reason = None if force else same_error_reason(p.repo, found)
            if reason is not None:
                skip = Skip(d.bucket, reason, tuple(found))
        if skip is not None:
            p.skipped.append(skip)
            record_skipped(p.out, skip.to_json(p.repo))
            if on_skip:
                on_skip(skip)
            continue
        body = p.out / ISSUES_DIR / BODIES / f"{d.bucket}.md"
        atomic_write_text(body, d.body())
        url = gh.create(p.repo, d.title, body, d.labels if labels else ())
        f = Filed(d.bucket, p.repo, url, d.title, now_utc(), tuple(found))
        record_filed(p.out, f.to_json())
        filed.append(f)
        if on_filed:
            on_filed(f)
    return filed


def search_plan(
    p: Plan, gh: Gh, *, on_candidates: Callable[[Draft, list[Candidate]], None] | None = None
) -> dict[str, tuple[str | None, list[Candidate]]]:
    """What the tracker says of each draft of ``p`` without filing anything (``--search`` of a dry run):
    bucket -> (the issue carrying its token, or None; its candidates)."""
    gh.check_auth()
    result: dict[str, tuple[str | None, list[Candidate]]] = {}
    for d in p.to_file:
        url = gh.existing(p.repo, d.token)
        found = [] if url is not None else candidates(gh, p.repo, d)
        if on_candidates and url is None:
            on_candidates(d, found)
        result[d.bucket] = (url, found)
    return result
