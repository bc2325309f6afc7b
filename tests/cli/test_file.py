"""``affuzz file``: a dry run files nothing and calls no gh (``--search`` runs the tracker searches);
``--yes`` files each verified bucket's draft once per repository (ledger, token search), skips known-upstream
buckets and drafts whose error the tracker already has (unless ``--force``), and refuses without a usable gh
or with a near miss of pytorch/pytorch. gh is a real executable on PATH that records its arguments and
answers searches from a file (no network)."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from fuzzer.cli import main
from fuzzer.publish import upstream
from fuzzer.publish.upstream import KnownIssue

REPO = "affuzz-test/sandbox"

FAKE_GH = """#!{python}
# A stand-in for the GitHub CLI: records its argv (one JSON line per call) and answers like gh.
import json, os, sys

args = sys.argv[1:]
log = os.environ["FAKE_GH_LOG"]
with open(log, "a", encoding="utf-8") as fh:
    fh.write(json.dumps(args) + "\\n")
if args[:2] == ["auth", "status"]:
    code = int(os.environ.get("FAKE_GH_AUTH", "0"))
    if code:
        print("You are not logged into any GitHub hosts. To log in, run: gh auth login", file=sys.stderr)
    sys.exit(code)
if args[:2] == ["issue", "list"]:
    path = os.environ.get("FAKE_GH_EXISTING")
    print(open(path, encoding="utf-8").read() if path else "[]")
    sys.exit(0)
if args[:2] == ["search", "issues"]:
    # FAKE_GH_SEARCH: a JSON object, text -> issues; a search gets the issues of every text its query contains
    path = os.environ.get("FAKE_GH_SEARCH")
    answers = json.load(open(path, encoding="utf-8")) if path else {{}}
    query = args[args.index("--") + 1]
    print(json.dumps([i for text, issues in answers.items() if text in query for i in issues]))
    sys.exit(0)
if args[:2] == ["issue", "create"]:
    with open(log, encoding="utf-8") as fh:
        n = sum(1 for line in fh if json.loads(line)[:2] == ["issue", "create"])
    if n > int(os.environ.get("FAKE_GH_FAIL_AFTER", "1000000")):
        print("HTTP 502: Bad Gateway (https://api.github.com/graphql)", file=sys.stderr)
        sys.exit(1)
    repo = args[args.index("--repo") + 1]
    print("Creating issue in " + repo, file=sys.stderr)
    print(f"https://github.com/{{repo}}/issues/{{n}}")
    sys.exit(0)
print("unknown command: " + " ".join(args), file=sys.stderr)
sys.exit(1)
"""


@pytest.fixture(scope="module")
def run_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real short campaign (5 verified buckets on torch 2.13 in about 15 s) with its drafts. Unshrunk:
    filing does not depend on the shrinker, which took 55 of the fixture's 60 s (tested in tests/triage)."""
    from fuzzer.campaign.config import CampaignConfig
    from fuzzer.campaign.driver import Campaign
    from fuzzer.publish.drafts import write_drafts
    from fuzzer.publish.report import write_report

    out = tmp_path_factory.mktemp("file") / "out"
    # without swarm (NOTE [swarm]): the buckets these tests were written around (error findings only)
    c = Campaign(CampaignConfig(out=out, seed=5, workers=0, max_cases=300, swarm=False, shrink_budget=0))
    c.run()
    write_report(out, c.summary())
    write_drafts(out)
    return out


@pytest.fixture
def out(run_out: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "out"
    shutil.copytree(run_out, dest)  # mtimes kept: the drafts stay newer than the findings
    return dest


def verified(out: Path, *, fileable: bool = True) -> list[str]:
    """The run's verified buckets; ``fileable``: those no known upstream issue covers (the table in the
    repository: a bucket it lists is skipped, never filed)."""
    buckets = [b for b in json.loads((out / "summary.json").read_text())["buckets"] if b["status"] == "verified"]
    ids = [b["id"] for b in buckets if not fileable or upstream.known_issue(b) is None]
    assert len(ids) >= 2, ids
    return ids


class FakeGh:
    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        gh = self.bin / "gh"
        gh.write_text(FAKE_GH.format(python=sys.executable))
        gh.chmod(0o755)
        self.log = tmp_path / "gh.log"
        self.monkeypatch = monkeypatch
        monkeypatch.setenv("PATH", f"{self.bin}{os.pathsep}{os.environ['PATH']}")
        monkeypatch.setenv("FAKE_GH_LOG", str(self.log))
        monkeypatch.delenv("FAKE_GH_AUTH", raising=False)
        monkeypatch.delenv("FAKE_GH_EXISTING", raising=False)
        monkeypatch.delenv("FAKE_GH_FAIL_AFTER", raising=False)
        monkeypatch.delenv("FAKE_GH_SEARCH", raising=False)

    def calls(self) -> list[list[str]]:
        return [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []

    def creates(self) -> list[list[str]]:
        return [c for c in self.calls() if c[:2] == ["issue", "create"]]

    def existing(self, issues: list[dict[str, str]]) -> None:
        path = self.log.with_name("existing.json")
        path.write_text(json.dumps(issues))
        self.monkeypatch.setenv("FAKE_GH_EXISTING", str(path))

    def searches(self) -> list[list[str]]:
        return [c for c in self.calls() if c[:2] == ["search", "issues"]]

    def answer(self, answers: dict[str, list[dict[str, Any]]]) -> None:
        """What `gh search issues` finds: the issues of every text the query contains."""
        path = self.log.with_name("search.json")
        path.write_text(json.dumps(answers))
        self.monkeypatch.setenv("FAKE_GH_SEARCH", str(path))


@pytest.fixture
def gh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeGh:
    return FakeGh(tmp_path, monkeypatch)


def arg(call: list[str], flag: str) -> str:
    return call[call.index(flag) + 1]


def ledger(out: Path) -> list[dict]:
    data = json.loads((out / "filed.json").read_text())
    assert data["schema_version"] == 1
    return data["filed"]


def test_dry_run_lists_what_it_would_file_and_files_nothing(out: Path, gh: FakeGh, capsys) -> None:
    assert main(["file", str(out), "--repo", REPO]) == 0
    text = capsys.readouterr().out
    for bucket in verified(out):
        assert f"would file {bucket}" in text
        assert f"[affuzz:{bucket}]" in text
        assert str(out / "issues" / f"{bucket}.md") in text
    assert f"repo:   {REPO}" in text and "module: functorch" in text and "nothing was filed" in text
    assert "drafts written" not in text  # they were up to date
    for bucket in verified(out):  # the searches --yes would run, printed
        assert f"search: gh issue list --repo {REPO} --search '\"[affuzz:{bucket}]\" in:title'" in text
    assert text.count(f"search: gh search issues --repo {REPO} --json number,title,state,url,body") == len(
        verified(out)
    )
    assert "--search runs those searches now" in text
    assert gh.calls() == []  # a dry run does not even call gh
    assert not (out / "filed.json").exists()


def test_yes_twice_files_each_draft_once_and_links_the_corpus(out: Path, gh: FakeGh, tmp_path: Path, capsys) -> None:
    ids = verified(out)
    corpus = tmp_path / "corpus"
    assert main(["corpus", "add", str(out / "findings" / ids[0]), "--corpus", str(corpus)]) == 0
    capsys.readouterr()

    assert main(["file", str(out), "--repo", REPO, "--yes", "--corpus", str(corpus)]) == 0
    first = capsys.readouterr().out
    creates = gh.creates()
    assert len(creates) == len(ids)
    assert gh.calls()[0] == ["auth", "status"]
    searches = [c for c in gh.calls() if c[:2] == ["issue", "list"]]
    assert [arg(c, "--search") for c in searches] == [f'"[affuzz:{b}]" in:title' for b in ids]
    assert all(arg(c, "--state") == "all" and arg(c, "--json") == "url,title" for c in searches)
    for bucket, call in zip(ids, creates, strict=True):
        assert arg(call, "--repo") == REPO and "--label" not in call
        draft = (out / "issues" / f"{bucket}.md").read_text()
        assert arg(call, "--title") == draft.splitlines()[0].removeprefix("# ")
        assert arg(call, "--title").endswith(f"[affuzz:{bucket}]")
        body = Path(arg(call, "--body-file")).read_text()
        assert body.startswith("### 🐛 Describe the bug") and "### Versions" in body
    records = ledger(out)
    assert [r["bucket"] for r in records] == ids
    assert [r["url"] for r in records] == [f"https://github.com/{REPO}/issues/{n}" for n in range(1, len(ids) + 1)]
    assert all(r["repo"] == REPO and r["title"].endswith(f"[affuzz:{r['bucket']}]") and r["filed_at"] for r in records)
    assert f"filed {ids[0]}: https://github.com/{REPO}/issues/1" in first
    meta = json.loads((corpus / ids[0] / "meta.json").read_text())
    assert meta["upstream"] == f"https://github.com/{REPO}/issues/1"

    assert main(["file", str(out), "--repo", REPO, "--yes", "--corpus", str(corpus)]) == 0
    second = capsys.readouterr().out
    assert len(gh.creates()) == len(ids)  # nothing new
    assert gh.calls()[-1][:2] == ["issue", "create"]  # nor was gh asked anything
    assert "nothing to file" in second
    assert ledger(out) == records
    for bucket in ids:
        assert f"skip {bucket}: already filed in {REPO}" in second
    # another repository is another ledger key; its dry run would file them all
    assert main(["file", str(out), "--repo", "affuzz-test/other"]) == 0
    assert capsys.readouterr().out.count("would file ") == len(ids)


def test_labels_are_passed_only_when_asked(out: Path, gh: FakeGh, tmp_path: Path) -> None:
    assert main(["file", str(out), "--repo", REPO, "--yes", "--labels", "--corpus", str(tmp_path / "none")]) == 0
    for call in gh.creates():
        labels = [call[i + 1] for i, a in enumerate(call) if a == "--label"]
        assert labels[:2] == ["module: functorch", "module: autograd"]


def test_a_draft_whose_token_the_repository_has_is_not_filed(out: Path, gh: FakeGh, tmp_path: Path, capsys) -> None:
    ids = verified(out)
    old = f"https://github.com/{REPO}/issues/77"
    gh.existing(
        [
            {
                "url": f"https://github.com/{REPO}/issues/5",
                "title": "something else [affuzz:value_mismatch-0000000000]",
            },
            {"url": old, "title": f"an old report [affuzz:{ids[1]}]"},
        ]
    )
    assert main(["file", str(out), "--repo", REPO, "--yes", "--corpus", str(tmp_path / "none")]) == 0
    text = capsys.readouterr().out
    titles = [arg(c, "--title") for c in gh.creates()]
    assert len(titles) == len(ids) - 1 and not any(f"[affuzz:{ids[1]}]" in t for t in titles)
    assert f"skip {ids[1]}: already in {REPO}: {old}" in text
    assert ids[1] not in [r["bucket"] for r in ledger(out)]


def test_known_upstream_buckets_are_skipped(
    out: Path, gh: FakeGh, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    ids = verified(out, fileable=False)  # the test's table replaces the repository's
    table = (KnownIssue("https://github.com/pytorch/pytorch/issues/4242", 4242, "test entry", {"ids": [ids[0]]}),)
    monkeypatch.setattr(upstream, "load_known_issues", lambda path=None: table)
    assert main(["file", str(out), "--repo", REPO]) == 0
    text = capsys.readouterr().out
    assert f"skip {ids[0]}: known upstream: #4242 https://github.com/pytorch/pytorch/issues/4242" in text
    assert f"would file {ids[0]}" not in text
    assert main(["file", str(out), "--repo", REPO, "--yes", "--corpus", str(tmp_path / "none")]) == 0
    titles = [arg(c, "--title") for c in gh.creates()]
    assert len(titles) == len(ids) - 1 and not any(f"[affuzz:{ids[0]}]" in t for t in titles)
    assert not any(ids[0] in " ".join(c) for c in gh.searches())  # nor searched for
    (skipped,) = [r for r in skipped_records(out) if r["bucket"] == ids[0]]
    assert skipped["repo"] == REPO and skipped["reason"].startswith("known upstream: #4242")


def skipped_records(out: Path) -> list[dict]:
    return json.loads((out / "filed.json").read_text()).get("skipped", [])


def the_error(out: Path, bucket: str) -> str:
    """What the side that raised the bucket's error printed, as an issue on another build would quote it
    (other line numbers, another checkout)."""
    record = json.loads((out / "findings" / bucket / "finding.json").read_text())
    printed = next(s for s in (record["functorch"], record["reference"]) if s.split(":")[0].endswith("Error"))
    return re.sub(r"\d+", "9", printed).replace("/__w/pytorch/pytorch", "/home/someone/src/pytorch")


def tracker(out: Path, gh: FakeGh) -> tuple[str, str, dict[str, Any], dict[str, Any]]:
    """The fake tracker: an issue quoting the first draft's error, another draft's search finds an issue
    about something else. (first bucket, second bucket, their issues)"""
    from fuzzer.publish.filing import plan

    queries = {d.bucket: d.queries for d in plan(out, REPO).to_file}
    first, second = verified(out)[:2]
    same = {
        "number": 7,
        "title": "forward AD fails on my Function",
        "state": "OPEN",
        "url": f"https://github.com/{REPO}/issues/7",
        "body": f"Repro:\n```\n...\n```\nraises\n```\n{the_error(out, first)}\n```\n",
    }
    other = {
        "number": 8,
        "title": "vmap is slow",
        "state": "closed",
        "url": f"https://github.com/{REPO}/issues/8",
        "body": "RuntimeError: something else entirely",
    }
    gh.answer({queries[first][0]: [same], queries[second][0]: [other]})
    return first, second, same, other


def test_yes_skips_a_draft_whose_error_the_tracker_has_until_forced(
    out: Path, gh: FakeGh, tmp_path: Path, capsys
) -> None:
    ids = verified(out)
    first, second, same, other = tracker(out, gh)
    corpus = ["--corpus", str(tmp_path / "none")]

    assert main(["file", str(out), "--repo", REPO, "--yes", *corpus]) == 0
    text = capsys.readouterr().out
    titles = [arg(c, "--title") for c in gh.creates()]
    assert len(titles) == len(ids) - 1 and not any(f"[affuzz:{first}]" in t for t in titles)
    assert len(gh.searches()) == len(ids)  # one search per draft, after its token search
    for call in gh.searches():
        assert arg(call, "--repo") == REPO and arg(call, "--json") == "number,title,state,url,body"
        assert call[-1].startswith('"') and call[-1].endswith('"')  # error findings: their message, quoted
    assert f"candidates {first}: 1 found\n    #7 [open] {same['title']} {same['url']} (the same error message)" in text
    assert f"candidates {second}: 1 found\n    #8 [closed] {other['title']} {other['url']}\n" in text
    assert f"skip {first}: {REPO} already has an issue with the same error message: #7 [open] {same['url']}" in text
    assert "--force" in text
    records = ledger(out)
    assert [r["bucket"] for r in records] == [b for b in ids if b != first]
    (with_candidate,) = [r for r in records if r["bucket"] == second]
    assert with_candidate["candidates"] == [
        {"number": 8, "title": other["title"], "state": "closed", "url": other["url"], "same_error": False}
    ]
    # (the run's known-upstream buckets are skipped records too, for another reason)
    (skipped,) = [r for r in skipped_records(out) if not r["reason"].startswith("known upstream")]
    assert skipped["bucket"] == first and skipped["repo"] == REPO and "#7" in skipped["reason"]
    assert [c["number"] for c in skipped["candidates"]] == [7] and skipped["candidates"][0]["same_error"]
    assert skipped["skipped_at"]

    # a second run files nothing: the ledger has the others, the tracker still has the first's error
    assert main(["file", str(out), "--repo", REPO, "--yes", *corpus]) == 0
    text = capsys.readouterr().out
    assert len(gh.creates()) == len(ids) - 1
    assert f"skip {first}: {REPO} already has an issue with the same error message" in text
    assert ledger(out) == records  # replaced, not added:
    assert [r["bucket"] for r in skipped_records(out) if not r["reason"].startswith("known upstream")] == [first]

    # --force files it (the others stay filed once), and says what it found
    assert main(["file", str(out), "--repo", REPO, "--yes", "--force", *corpus]) == 0
    text = capsys.readouterr().out
    titles = [arg(c, "--title") for c in gh.creates()]
    assert len(titles) == len(ids) and sum(f"[affuzz:{first}]" in t for t in titles) == 1
    assert f"filed {first}: https://github.com/{REPO}/issues/{len(ids)}" in text
    forced = ledger(out)[-1]
    assert forced["bucket"] == first and [c["number"] for c in forced["candidates"]] == [7]
    assert all(r["reason"].startswith("known upstream") for r in skipped_records(out))  # filed now
    assert main(["file", str(out), "--repo", REPO, "--yes", "--force", *corpus]) == 0
    assert len(gh.creates()) == len(ids) and "nothing to file" in capsys.readouterr().out


def test_force_never_files_a_draft_whose_token_the_repository_has(out: Path, gh: FakeGh, tmp_path: Path) -> None:
    ids = verified(out)
    gh.existing([{"url": f"https://github.com/{REPO}/issues/3", "title": f"old [affuzz:{ids[0]}]"}])
    assert main(["file", str(out), "--repo", REPO, "--yes", "--force", "--corpus", str(tmp_path / "none")]) == 0
    assert not any(f"[affuzz:{ids[0]}]" in arg(c, "--title") for c in gh.creates())
    assert any(r["bucket"] == ids[0] and "/issues/3" in r["reason"] for r in skipped_records(out))


def test_dry_run_with_search_lists_the_candidates_and_files_nothing(out: Path, gh: FakeGh, capsys) -> None:
    first, second, same, _ = tracker(out, gh)
    assert main(["file", str(out), "--repo", REPO, "--search"]) == 0
    text = capsys.readouterr().out
    assert f"would file {first}" in text  # still listed: a dry run decides nothing
    assert f"    #7 [open] {same['title']} {same['url']} (the same error message)" in text
    assert f"{first}: would skip: {REPO} already has an issue with the same error message: #7" in text
    assert f"{second}: would skip" not in text
    assert gh.calls()[0] == ["auth", "status"] and len(gh.searches()) == len(verified(out))
    assert gh.creates() == [] and not (out / "filed.json").exists()


def test_dry_run_search_needs_a_usable_gh(out: Path, gh: FakeGh, monkeypatch, capsys) -> None:
    monkeypatch.setenv("FAKE_GH_AUTH", "1")
    assert main(["file", str(out), "--repo", REPO, "--search"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "gh is not logged in" in err


def test_what_the_tracker_is_searched_for() -> None:
    from fuzzer.publish.filing import Draft, candidates, error_of, search_queries
    from fuzzer.publish.rundata import BucketData

    def bucket(signature: str, transforms: list[str], features: list[str]) -> BucketData:
        verdict = signature.split("|")[0]
        summary = {"id": "b", "signature": signature, "verdict": verdict, "oracle": "functorch_vs_create_graph"}
        return BucketData(summary={**summary, "transforms": transforms, "signature_features": features})

    value = bucket("value_mismatch|jacrev_vs_jacfwd|hessian>jacrev|custom_jvp", ["hessian", "jacrev"], ["custom_jvp"])
    assert search_queries(value) == ("autograd.Function hessian jacrev jvp",) and error_of(value) == ""
    seed = bucket("x", ["autograd_grad", "grad"], ["output_is_input", "saved_output", "grad_unused"])
    assert search_queries(seed) == ("autograd.Function autograd.grad grad save_for_backward",)
    fp = "RuntimeError: The size of tensor a (N) must match the size of tensor b (N) at non-singleton dimension N @ -"
    error = bucket(f"error|{fp}", ["jacfwd", "vmap"], ["generate_vmap_rule"])
    assert search_queries(error) == ('"must match the size of tensor b"',)
    assert (
        error_of(error) == "the size of tensor a (n) must match the size of tensor b (n) at non-singleton dimension n"
    )
    bare = bucket("torch_bug_error|AssertionError:  @ torch/_functorch/vmap.py:wrap_batched", ["hessian", "vmap"], [])
    assert search_queries(bare) == ("autograd.Function hessian vmap",) and error_of(bare) == ""  # nothing to quote

    class Tracker:
        def search(self, repo: str, query: str) -> list[dict[str, Any]]:
            return [
                {
                    "number": 1,
                    "title": "t",
                    "state": "OPEN",
                    "url": "u1",
                    "body": "The size of tensor a (3) must match",
                },
                {
                    "number": 2,
                    "title": "RuntimeError: The size of tensor a (3) must match the size of tensor b (4) at "
                    "non-singleton dimension 1",
                    "state": "CLOSED",
                    "url": "u2",
                },
                {"number": 1, "title": "a duplicate", "state": "OPEN", "url": "u1"},
            ]

    draft = Draft("b", Path("b.md"), "t", (), search_queries(error), error_of(error))
    found = candidates(Tracker(), REPO, draft)  # type: ignore[arg-type]
    assert [(c.number, c.state, c.same_error) for c in found] == [(2, "closed", True), (1, "open", False)]
    value_draft = Draft("b", Path("b.md"), "t", (), search_queries(value), error_of(value))
    assert not any(c.same_error for c in candidates(Tracker(), REPO, value_draft))  # type: ignore[arg-type]


def test_an_interrupted_filing_keeps_what_it_filed(out: Path, gh: FakeGh, tmp_path: Path, monkeypatch, capsys) -> None:
    ids = verified(out)
    monkeypatch.setenv("FAKE_GH_FAIL_AFTER", "1")  # the second issue create fails
    assert main(["file", str(out), "--repo", REPO, "--yes", "--corpus", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("affuzz file: error: `gh issue create` failed") and "502" in err
    assert [r["bucket"] for r in ledger(out)] == ids[:1]
    monkeypatch.delenv("FAKE_GH_FAIL_AFTER")
    assert main(["file", str(out), "--repo", REPO, "--yes", "--corpus", str(tmp_path / "none")]) == 0
    assert [r["bucket"] for r in ledger(out)] == ids
    created = [arg(c, "--title") for c in gh.creates()]
    assert len(created) == len(ids) + 1  # the failed attempt, then each remaining one once
    assert sum(f"[affuzz:{ids[0]}]" in t for t in created) == 1


def test_no_gh_on_path_is_one_line_and_files_nothing(out: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert main(["file", str(out), "--repo", REPO, "--yes"]) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and "gh (the GitHub CLI) is not on PATH" in captured.err
    assert "nothing was filed" in captured.err
    assert not (out / "filed.json").exists()


def test_gh_not_logged_in_is_one_line_and_files_nothing(out: Path, gh: FakeGh, monkeypatch, capsys) -> None:
    monkeypatch.setenv("FAKE_GH_AUTH", "1")
    assert main(["file", str(out), "--repo", REPO, "--yes"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "gh is not logged in" in err and "gh auth login" in err
    assert gh.calls() == [["auth", "status"]]
    assert not (out / "filed.json").exists()


@pytest.mark.parametrize(
    "repo, needle",
    [
        ("pytorch/PyTorch", "name it exactly: --repo pytorch/pytorch"),
        ("pytorch/pytorch.git", "name it exactly: --repo pytorch/pytorch"),
        ("https://github.com/pytorch/pytorch", "name it exactly: --repo pytorch/pytorch"),
        ("PyTorch/pytorch/", "name it exactly: --repo pytorch/pytorch"),
        ("sandbox", "not a GitHub repository as OWNER/NAME"),
        ("a/b/c", "not a GitHub repository as OWNER/NAME"),
    ],
)
def test_bad_repositories_are_refused(repo: str, needle: str, out: Path, gh: FakeGh, capsys) -> None:
    assert main(["file", str(out), "--repo", repo, "--yes"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("affuzz file: error: --repo") and needle in err, err
    assert gh.calls() == []


def test_pytorch_named_exactly_is_accepted(out: Path, gh: FakeGh, capsys) -> None:
    assert main(["file", str(out), "--repo", "pytorch/pytorch"]) == 0  # a dry run
    assert "repo:   pytorch/pytorch" in capsys.readouterr().out
    assert gh.calls() == []


def test_missing_or_stale_drafts_are_written_first(out: Path, gh: FakeGh, capsys) -> None:
    shutil.rmtree(out / "issues")
    assert main(["file", str(out), "--repo", REPO]) == 0
    assert "drafts written" in capsys.readouterr().out
    for bucket in verified(out):
        assert "PyTorch version:" in (out / "issues" / f"{bucket}.md").read_text()
    stamp = (out / "issues" / "README.md").stat().st_mtime
    finding = out / "findings" / verified(out)[0] / "finding.json"
    os.utime(finding, (stamp + 10, stamp + 10))  # a finding newer than the drafts
    assert main(["file", str(out), "--repo", REPO]) == 0
    assert "drafts written" in capsys.readouterr().out


def test_not_an_out_directory_is_one_line(tmp_path: Path, capsys) -> None:
    assert main(["file", str(tmp_path / "nope"), "--repo", REPO]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such directory" in err


def test_help_explains_dry_run_ledger_labels_and_pytorch(capsys) -> None:
    with pytest.raises(SystemExit) as e:
        main(["file", "--help"])
    assert e.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for needle in (
        "dry run",
        "--yes",
        "filed.json",
        "gh auth status",
        "[affuzz:<bucket id>]",
        "--labels",
        "upstream",
        "--search",
        "--force",
        "gh search issues",
        "same error",
        "does not call gh",
    ):
        assert needle in text, needle
    assert "--repo pytorch/pytorch" in text and "pytorch/PyTorch" in text
