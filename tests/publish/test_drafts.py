"""Issue drafts (NOTE [issue drafts] in fuzzer/publish/drafts.py): one per verified bucket of a real run, in
PyTorch's bug-report form, with collect_env under Versions; known-upstream buckets get an index line."""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

import pytest

from fuzzer.publish.drafts import (
    LABEL_FORWARD_AD,
    LABEL_SILENT,
    TITLE_LIMIT,
    draft,
    labels,
    sides,
    title,
    write_drafts,
)
from fuzzer.publish.env_probe import ENV_PROBE_NICENESS, EnvProbe, collect_env
from fuzzer.publish.rundata import BucketData, RunData
from fuzzer.publish.upstream import KnownIssue, known_issue


@pytest.fixture(scope="module")
def run_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real short campaign: verified buckets on torch 2.13 in about 10 s. Unshrunk: a draft's form does
    not depend on the shrinker (tested in tests/triage), which took most of the fixture's time."""
    from fuzzer.campaign.config import CampaignConfig
    from fuzzer.campaign.driver import Campaign
    from fuzzer.publish.report import write_report

    out = tmp_path_factory.mktemp("drafts") / "out"
    c = Campaign(CampaignConfig(out=out, seed=5, workers=0, max_cases=300, shrink_budget=0))
    c.run()
    write_report(out, c.summary())
    return out


@pytest.fixture(scope="module")
def drafted(run_out: Path) -> tuple[Path, list[Path]]:
    return run_out, write_drafts(run_out)


def summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def test_every_verified_bucket_gets_a_draft_in_the_bug_report_form(drafted: tuple[Path, list[Path]]) -> None:
    out, paths = drafted
    # a bucket the repository's table of known upstream issues lists gets an index line, not a draft
    buckets = [b for b in summary(out)["buckets"] if b["status"] == "verified" and known_issue(b) is None]
    assert buckets
    assert paths == [out / "issues" / f"{b['id']}.md" for b in buckets]
    index = (out / "issues" / "README.md").read_text()
    for b in buckets:
        text = (out / "issues" / f"{b['id']}.md").read_text()
        record = json.loads((out / b["path"] / "finding.json").read_text())
        first = text.splitlines()[0]
        assert first.startswith("# ") and first.endswith(f" [affuzz:{b['id']}]")
        assert len(first.removeprefix("# ").rsplit(" [affuzz:", 1)[0]) <= TITLE_LIMIT
        assert "\n" not in first
        sections = ["### 🐛 Describe the bug", "```python\n", "**Observed**", "**Expected**", "### Versions"]
        positions = [text.index(s) for s in sections]
        assert positions == sorted(positions), positions
        assert (out / b["path"] / "repro.py").read_text().rstrip() in text  # the repro, whole
        assert record["functorch"] in text and record["reference"] in text  # both sides, errors with messages
        assert "PyTorch version: " in text  # python -m torch.utils.collect_env
        if b["stacks"]:
            assert "**Also seen under**" in text
            assert all(f"`{stack}` → {hits}" in text for stack, hits in b["stacks"].items())
        label_line = next(line for line in text.splitlines() if line.startswith("Suggested labels: "))
        assert "`module: functorch`" in label_line and "`module: autograd`" in label_line
        if b.get("triage") is None and {"jvp", "jacfwd", "linearize"} & set(b["transforms"]):
            assert "`module: forward ad`" in label_line
        if not {"jvp", "jacfwd", "linearize"} & set(b["transforms"]) and b["oracle"] == "vmap_vs_loop":
            assert "`module: forward ad`" not in label_line
        # the index is a table: a title's "|" is escaped there
        assert f"[{b['id']}.md]({b['id']}.md)" in index and first.removeprefix("# ").replace("|", "\\|") in index


def test_error_drafts_name_the_side_that_raised(drafted: tuple[Path, list[Path]]) -> None:
    out, _ = drafted
    for b in summary(out)["buckets"]:
        if b["verdict"] == "error_functorch_only" and b["status"] == "verified" and known_issue(b) is None:
            first = (out / "issues" / f"{b['id']}.md").read_text().splitlines()[0]
            assert first.startswith(("# torch.func.", "# autograd.grad of torch.func.")) and " raises " in first


def test_known_upstream_buckets_get_an_index_line_instead(drafted: tuple[Path, list[Path]], tmp_path: Path) -> None:
    src, _ = drafted
    out = tmp_path / "out"
    shutil.copytree(src, out)
    ids = [b["id"] for b in summary(out)["buckets"] if b["status"] == "verified"]
    table = (KnownIssue("https://github.com/pytorch/pytorch/issues/4242", 4242, "a test entry", {"ids": [ids[0]]}),)
    paths = write_drafts(out, known=table)
    assert out / "issues" / f"{ids[0]}.md" not in paths
    assert not (out / "issues" / f"{ids[0]}.md").exists()  # the earlier draft is gone
    index = (out / "issues" / "README.md").read_text()
    assert f"`{ids[0]}`: known: #4242 https://github.com/pytorch/pytorch/issues/4242 (open; a test entry)" in index


def test_an_unshrunk_bucket_is_not_drafted_until_it_is_shrunk(drafted: tuple[Path, list[Path]], tmp_path: Path) -> None:
    """NOTE [issue drafts]: a finding the campaign published before shrinking it (its shrink record says why
    it was skipped) gets no draft, a line in the index, and "unshrunk" in the report's shrink column."""
    src, _ = drafted
    out = tmp_path / "out"
    shutil.copytree(src, out)
    ids = [b["id"] for b in summary(out)["buckets"] if b["status"] == "verified"]
    for i in ids:  # every one: nothing to draft, so no collect_env either
        record = out / "findings" / i / "finding.json"
        data = json.loads(record.read_text())
        data["shrink"]["skipped"] = "the campaign ended before it was shrunk"
        record.write_text(json.dumps(data))
    assert write_drafts(out) == [] and sorted(p.name for p in (out / "issues").iterdir()) == ["README.md"]
    index = (out / "issues" / "README.md").read_text()
    assert "Not drafted yet" in index and all(f"`{i}` (the campaign ended before it was shrunk)" in index for i in ids)
    from fuzzer.publish.report import _shrink_text

    assert _shrink_text({"unshrunk": "why", "shrink_seconds": [0.0], "repro_lines": 29}) == "unshrunk, 29 lines"


def test_related_issues_are_named_and_the_draft_stays(drafted: tuple[Path, list[Path]], tmp_path: Path) -> None:
    src, _ = drafted
    out = tmp_path / "out"
    shutil.copytree(src, out)
    ids = [b["id"] for b in summary(out)["buckets"] if b["status"] == "verified"]
    near = KnownIssue(
        "https://github.com/pytorch/functorch/issues/77",
        77,
        "a neighbouring bug",
        {"ids": [ids[1]]},
        state="closed",
        fixed_by="https://github.com/pytorch/pytorch/pull/78",
        related=True,
    )
    paths = write_drafts(out, known=(near,))
    assert out / "issues" / f"{ids[1]}.md" in paths  # drafted all the same
    text = (out / "issues" / f"{ids[1]}.md").read_text()
    assert (
        "**Related upstream issues**" in text
        and "https://github.com/pytorch/functorch/issues/77 (closed by #78)" in text
    )
    assert text.index("**Related upstream issues**") < text.index("### Versions")
    assert "Related upstream issues" not in (out / "issues" / f"{ids[0]}.md").read_text()
    index = (out / "issues" / "README.md").read_text()
    assert f"`{ids[1]}`: related: pytorch/functorch#77 https://github.com/pytorch/functorch/issues/77" in index
    assert "0 known upstream" in index


def test_the_report_and_the_index_say_what_the_table_knows(drafted: tuple[Path, list[Path]]) -> None:
    from fuzzer.publish.upstream import known_issue, related_issues

    out, _ = drafted
    report = (out / "report.md").read_text()
    index = (out / "issues" / "README.md").read_text()
    for b in summary(out)["buckets"]:
        k = known_issue(b)
        if k is not None:
            assert f"- {b['id']}: known: {k.ref} {k.issue}" in report
            if b["status"] == "verified":
                assert f"`{b['id']}`: known: {k.ref} {k.issue}" in index
        for r in related_issues(b):
            assert f"- {b['id']}: related: {r.ref} {r.issue}" in report
            if b["status"] == "verified":
                assert f"`{b['id']}`: related: {r.ref} {r.issue}" in index


def bucket(verdict: str, transforms: list[str], features: list[str], oracle: str = "functorch_vs_create_graph", **rec):
    summary = {
        "id": f"{verdict}-0123456789",
        "signature": f"{verdict}|{oracle}|{'>'.join(transforms)}|{'+'.join(features) or '-'}",
        "verdict": verdict,
        "oracle": oracle,
        "transforms": transforms,
        "signature_features": features,
        "status": "verified",
        "stacks": {},
    }
    record = {"torch_version": "2.13.0", "functorch": "tensor(0.)", "reference": "tensor(6.)", **rec}
    return BucketData(summary=summary, record=record, repro="print('repro')\n")


def run_data() -> RunData:
    return RunData(out=Path("OUT"), numbers={"torch_version": "2.13.0"}, finished=True)


def test_title_says_what_disagrees() -> None:
    b = bucket("value_mismatch", ["grad"], ["output_is_input", "saved_input"])
    assert title(b) == (
        "torch.func.grad and autograd.grad(create_graph=True) disagree for a custom "
        "autograd.Function that returns its input and saves it [affuzz:value_mismatch-0123456789]"
    )
    seed = bucket("value_mismatch", ["autograd_grad", "grad"], ["output_is_input", "saved_output", "grad_unused"])
    assert title(seed).startswith("autograd.grad of torch.func.grad and autograd.grad(create_graph=True)")
    short = bucket("value_mismatch", ["jacrev"], ["saved_output"])
    assert title(short).startswith("torch.func.jacrev and autograd.grad(create_graph=True) return different values")
    many = bucket("structure_mismatch", ["vmap", "jacfwd", "hessian"], ["saved_input", "custom_jvp", "mark_dirty"])
    assert len(title(many).rsplit(" [affuzz:", 1)[0]) <= TITLE_LIMIT
    loop = bucket("value_mismatch", ["grad", "vmap"], ["custom_vmap"], oracle="vmap_vs_loop")
    assert title(loop).startswith(
        "torch.func.grad(vmap) and the same with a loop for vmap disagree for a custom autograd.Function that has its "
        "own vmap rule"
    )
    err = bucket(
        "error_reference_only",
        ["jvp"],
        [],
        error='RuntimeError: boom at "/x/y.cpp":N @ torch/autograd/function.py:apply',
        reference='RuntimeError: boom at "/x/y.cpp":12',
    )
    assert title(err).startswith('autograd.forward_ad raises RuntimeError "boom" where torch.func.jvp works')


def test_a_bucket_whose_repro_needs_no_function_says_so() -> None:
    """NOTE [plain forward]: a repro written with the plain forward names no Function features."""
    b = bucket("value_mismatch", ["linearize", "jacrev"], ["custom_jvp"], verification={"plain_forward": True})
    assert title(b).endswith(" for a plain function [affuzz:value_mismatch-0123456789]"), title(b)
    assert "autograd.Function" not in title(b)
    text = draft(b, run_data(), "env")
    assert "With a plain function (found with a custom autograd.Function" in text


def test_a_custom_op_draft_says_what_its_sides_run() -> None:
    """NOTE [custom op mode]: the op against its autograd.Function twin, in the words of what each side runs,
    labelled for custom ops (and for pt2 where compiled)."""
    b = bucket("value_mismatch", ["jvp"], ["custom_op"], oracle="custom_op_vs_function", triage="functorch_wrong")
    b.summary["features"] = ["saved_input", "custom_op"]
    assert title(b) == (
        "torch.func.jvp of a custom op and the same op as an autograd.Function return different values "
        "[affuzz:value_mismatch-0123456789]"
    )
    text = draft(b, run_data(), "env")
    assert "Side A runs them over a torch.library custom op, side B over the same op written as a" in text
    assert labels(b)[0] == "module: custom-operators" and LABEL_FORWARD_AD in labels(b)
    plain = bucket("value_mismatch", ["autograd_grad", "grad"], ["custom_op"], oracle="custom_op_vs_function_plain")
    plain.summary["features"] = ["custom_op"]
    assert title(plain).startswith("autograd.grad(create_graph=True) of a custom op and the same op as an")
    compiled = bucket("value_mismatch", ["grad"], [], oracle="compiled_vs_eager")
    compiled.summary.update(features=["custom_op"], compile={"backend": "aot_eager", "placement": "plain"})
    assert labels(compiled)[:3] == ["module: custom-operators", "oncall: pt2", "module: aotdispatch"]


def test_a_compiled_draft_says_what_each_side_of_its_repro_runs() -> None:
    """Issue 39: a compiled finding's title and intro name the eager stack and the compiled one by where
    torch.compile goes, never "the same under torch.compile", nor torch.func where none runs."""
    around = bucket("promise_broken", ["autograd_grad", "hessian"], [], oracle="compiled_vs_eager")
    around.summary["compile"] = {"backend": "eager", "fullgraph": True, "placement": "around"}
    s = sides(around)
    assert (s.a, s.b) == ("autograd.grad of torch.func.hessian", "autograd.grad of torch.compile(torch.func.hessian)")
    plain = bucket("value_mismatch", ["autograd_grad"], [], oracle="compiled_vs_eager")
    plain.summary["compile"] = {"backend": "aot_eager", "fullgraph": False, "placement": "plain", "autograd": True}
    assert title(plain).startswith(
        "autograd.grad(create_graph=True) and autograd.grad(create_graph=True) of torch.compile(f)"
    )
    text = draft(plain, run_data(), "env")
    assert "Side A runs `autograd.grad(create_graph=True)` eagerly, side B the same under torch.compile" in text
    assert "backend='aot_eager', fullgraph=False, its backward under compiled autograd" in text
    assert "through torch.func" not in text


def test_a_broken_promise_is_labelled_silent() -> None:
    """A side that returned a value where torch promises an error is wrong without a word."""
    op = bucket("promise_broken", ["jvp"], ["custom_op"], oracle="custom_op_vs_function")
    op.summary["features"] = ["custom_op"]
    assert labels(op) == [
        "module: custom-operators",
        "module: functorch",
        "module: autograd",
        LABEL_FORWARD_AD,
        LABEL_SILENT,
    ]


def test_labels() -> None:
    assert labels(bucket("value_mismatch", ["grad"], [])) == ["module: functorch", "module: autograd", LABEL_SILENT]
    assert LABEL_FORWARD_AD in labels(bucket("error_functorch_only", ["linearize"], []))
    assert LABEL_FORWARD_AD not in labels(bucket("error_functorch_only", ["grad"], ["custom_jvp"]))  # a jvp rule only
    # jacrev_vs_jacfwd of a jacfwd stack: side B is jacrev; forward AD only if the jacfwd side is the wrong one
    wrong_a = bucket("value_mismatch", ["jacfwd"], [], oracle="jacrev_vs_jacfwd", triage="functorch_wrong")
    wrong_b = bucket("value_mismatch", ["jacfwd"], [], oracle="jacrev_vs_jacfwd", triage="reference_wrong")
    assert LABEL_FORWARD_AD in labels(wrong_a) and LABEL_FORWARD_AD not in labels(wrong_b)
    assert LABEL_SILENT in labels(bucket("structure_mismatch", ["vmap"], []))
    assert LABEL_SILENT not in labels(bucket("torch_bug_error", ["vmap"], []))


@pytest.mark.parametrize(
    "triage, needle",
    [
        ("functorch_wrong", "`torch.func.grad` (torch.func) is the wrong side"),
        ("reference_wrong", "`autograd.grad(create_graph=True)` is the wrong side"),
        ("both_wrong", "agree with neither side"),
        ("compiled_wrong", "`autograd.grad(create_graph=True)` (compiled) is the wrong side"),
        ("undetermined", "Which side is wrong was not determined"),
        (None, "Which side is wrong was not determined"),
    ],
)
def test_expected_says_which_side_matches_finite_differences(triage: str | None, needle: str) -> None:
    b = bucket("value_mismatch", ["grad"], [], **({"triage": triage} if triage else {}))
    text = draft(b, run_data(), "PyTorch version: 2.13.0")
    expected = next(line for line in text.splitlines() if line.startswith("**Expected**"))
    assert needle in expected and "same values" in expected


def test_versions_say_when_collect_env_saw_another_torch() -> None:
    text = draft(bucket("value_mismatch", ["grad"], []), run_data(), "PyTorch version: 2.0.1")
    assert "The campaign ran on torch 2.13.0; the environment above has torch 2.0.1." in text


def fake_python(tmp_path: Path, body: str) -> str:
    tmp_path.mkdir(exist_ok=True)
    py = tmp_path / "python"
    py.write_text(f"#!{sys.executable}\nimport sys, time\n{body}\n")
    py.chmod(0o755)
    return str(py)


def test_collect_env_failures_keep_what_it_printed(tmp_path: Path) -> None:
    assert "could not be started" in collect_env(str(tmp_path / "no-such-python"))
    failing = fake_python(tmp_path, "print('PyTorch version: 9.9')\nsys.exit(3)")
    text = collect_env(failing)
    assert text.startswith("PyTorch version: 9.9") and "failed with exit status 3" in text
    slow = fake_python(tmp_path, "print('PyTorch version: 9.9', flush=True)\ntime.sleep(60)")
    text = collect_env(slow, timeout=1.0)
    assert text.startswith("PyTorch version: 9.9") and "did not finish within 1 s" in text


def test_an_env_probe_started_early_is_what_the_drafts_say(run_out: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    shutil.copytree(run_out, out)
    probe = EnvProbe(fake_python(tmp_path / "a", "print('PyTorch version: 9.9 (probed early)')"))
    paths = write_drafts(out, env=probe)
    assert paths and all("PyTorch version: 9.9 (probed early)" in p.read_text() for p in paths)
    # nothing to draft: a probe still running is stopped, not waited for
    slow = EnvProbe(fake_python(tmp_path / "b", "time.sleep(60)"))
    t0 = time.monotonic()
    (out / "summary.json").write_text(json.dumps({**summary(out), "buckets": []}))
    assert write_drafts(out, env=slow) == []
    assert time.monotonic() - t0 < 30 and slow._proc is not None and slow._proc.poll() is not None


def test_the_env_probe_runs_at_the_lowest_priority(tmp_path: Path) -> None:
    """NOTE [background priority]: collect_env takes the cores' idle time, never the workers'."""
    body = "import os\ntime.sleep(0.5)\nprint('niceness', os.getpriority(os.PRIO_PROCESS, 0))"
    probe = EnvProbe(fake_python(tmp_path, body))
    assert probe.result().strip() == f"niceness {ENV_PROBE_NICENESS}"


def test_side_b_of_a_torch_func_only_oracle_comes_from_the_case(tmp_path: Path) -> None:
    from conftest import DATA

    case = json.loads((DATA / "seed_case.json").read_text())
    case["transforms"] = [{"name": "jacrev", "argnums": 0}]
    (tmp_path / "case.json").write_text(json.dumps(case))
    b = bucket("value_mismatch", ["jacrev"], [], oracle="jacrev_vs_jacfwd")
    b.path = tmp_path
    assert title(b).startswith("torch.func.jacrev and torch.func.jacfwd return different values")
    assert LABEL_FORWARD_AD in labels(b)  # side B runs jacfwd


def test_a_torch_bug_error_is_blamed_on_the_side_that_raised_it() -> None:
    fp = 'RuntimeError: is_inplace_op INTERNAL ASSERT FAILED at "/x/meta.cpp":N @ torch/autograd/function.py:apply'
    raised = 'RuntimeError: is_inplace_op INTERNAL ASSERT FAILED at "/x/meta.cpp":178, please report a bug to PyTorch.'
    b = bucket("torch_bug_error", ["jvp"], [], error=fp, functorch="tensor(2.)", reference=raised)
    assert title(b).startswith(
        'autograd.forward_ad raises RuntimeError "is_inplace_op INTERNAL ASSERT FAILED" where torch.func.jvp works'
    )
    other = bucket("torch_bug_error", ["jvp"], [], error=fp, functorch="NotImplementedError: no jvp", reference=raised)
    assert title(other).startswith('autograd.forward_ad raises RuntimeError "is_inplace_op INTERNAL ASSERT FAILED" [')
