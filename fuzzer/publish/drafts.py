"""Issue drafts: ``OUT/issues/<bucket id>.md``, one per verified bucket, in the shape of PyTorch's bug report
form, and ``OUT/issues/README.md``, their index.

NOTE [issue drafts]
A draft is what a person (or ``affuzz file``) files upstream: its first line is the title, ``# `` and one
line saying what disagrees (side A, side B, how they disagree, the essential features), ending with the
signature token ``[affuzz:<bucket id>]`` by which a filed issue is found again; then the form's sections,
``### 🐛 Describe the bug`` (two sentences, the repro, what each side printed, what was expected, the other
stacks the bucket was hit under) and ``### Versions`` (``python -m torch.utils.collect_env``, run once per
call by the interpreter that ran the cases); last a ``Suggested labels:`` line. Only verified buckets get a
draft; one that matches a known upstream issue (:mod:`.upstream`) gets a "known: #N" line in the index
instead, so it is never filed again; one the campaign published unshrunk (it ended, or the shrink job
failed, before its shrink) is listed in the index as not drafted yet, and in the report as ``unshrunk``: a
maintainer gets the smallest program, so it is drafted once ``affuzz run --resume`` has shrunk it. An issue the table lists as only related (NOTE [known issues]) is named
in the draft ("Related upstream issues") and in the index, and the draft stays.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import NamedTuple

from ..ir.case import FORWARD_MODE_TRANSFORMS
from ..ir.features import feature
from ..ir.files import atomic_write_text
from ..ir.oracles import CHECKPOINT, COMPILED, MAIN, oracle_kind
from ..ir.validity import RULES
from .env_probe import EnvProbe, versions_section
from .fingerprints import bucket_fingerprint, bug_sides, raising_sides, short_error
from .rundata import BucketData, RunData, load_run
from .sides import Sides, plain_forward, sides
from .upstream import KnownIssue, known_issue, related_issues

ISSUES_DIR = "issues"
INDEX = "README.md"
TITLE_LIMIT = 130  # characters of the title before its signature token
#: How a title quotes an error, most detailed first: (characters of the message, with its type).
ERROR_FORMS = ((80, True), (80, False), (50, True), (50, False), (35, False))
TOKEN = re.compile(r"\[affuzz:([A-Za-z0-9_.-]+)\]")
LABELS_PREFIX = "Suggested labels: "

#: PyTorch's labels (the names its tracker uses).
LABEL_FUNCTORCH = "module: functorch"
LABEL_AUTOGRAD = "module: autograd"
LABEL_FORWARD_AD = "module: forward ad"
LABEL_SILENT = "module: correctness (silent)"
#: NOTE [compiled mode]: a compiled finding's labels follow the smallest backend that shows it.
LABEL_PT2 = "oncall: pt2"
LABEL_COMPILED_AUTOGRAD = "module: compiled autograd"
LABEL_CHECKPOINT = "module: checkpoint"
LABEL_CUSTOM_OPS = "module: custom-operators"
#: Verdicts where a side returned a wrong result without a word: a value, or a value where an error is owed.
SILENT_VERDICTS = ("value_mismatch", "structure_mismatch", "promise_broken")
LABELS_BACKEND = {"eager": "module: dynamo", "aot_eager": "module: aotdispatch", "inductor": "module: inductor"}

#: What side B computes, per oracle (NOTE [oracles] in fuzzer/ir/oracles.py).
ORACLE_TEXT = {
    MAIN: "the same derivatives in plain autograd (each torch.func level replaced by its twin: "
    "autograd.grad(create_graph=True) for reverse mode, torch.autograd.forward_ad for forward mode, "
    "a Python loop for vmap)",
    "jacrev_vs_jacfwd": "the same stack with its first-order jacrev and jacfwd swapped, which compute the same Jacobian",
    "vmap_vs_loop": "the same stack with every vmap replaced by a Python loop over the batch",
    "forward_over_reverse": "the same second-order derivative computed in the other order (jacfwd over reverse "
    "mode for jacrev over reverse mode, jacrev(jacrev) for hessian)",
}
#: NOTE [custom op mode]: what the two sides of a custom-op oracle run, per recipe.
CUSTOM_OP_INTRO = {
    "function_twin": "Side A runs them over a torch.library custom op, side B over the same op written as a "
    'torch.autograd.Function (register_autograd\'s ctx "is the same ctx object used by torch.autograd.Function", '
    "its docs say): the two must return the same values or raise the same documented error.",
    "opcheck": "Side B runs the same once torch.library.opcheck passed the op on the arguments f gives it; the op's "
    "registrations are right (a fake of the forward's shapes, its backward as autograd formula): opcheck must pass.",
}

TRIAGE_TEXT = {
    "functorch_wrong": "Central finite differences of the forward (float64) agree with side B: {a} is the wrong side.",
    "reference_wrong": "Central finite differences of the forward (float64) agree with side A: {b} is the wrong side.",
    "both_wrong": "Central finite differences of the forward (float64) agree with neither side.",
    "compiled_wrong": "The eager side is the reference: torch.compile should not change what a program computes, "
    "so {b} (compiled) is the wrong side.",
}


def _feature_clause(features: list[str]) -> str:
    if "custom_op" in features:  # NOTE [custom op mode]: the op is what the repro defines
        rest = _feature_clause([f for f in features if f != "custom_op"]).removeprefix("for a custom autograd.Function")
        return "for a torch.library custom op" + rest
    if not features:
        return "for a custom autograd.Function"
    phrases = [feature(f).phrase for f in features]  # NOTE [feature tags]
    if "output_is_input" in features and "saved_input" in features:
        phrases[features.index("saved_input")] = "saves it"  # "returns its input and saves it"
    joined = phrases[0] if len(phrases) == 1 else ", ".join(phrases[:-1]) + " and " + phrases[-1]
    return f"for a custom autograd.Function that {joined}"


def _title_core(
    bucket: BucketData, sides_: Sides, quote: bool = False, err: tuple[int, bool] = (80, True), compact: bool = False
) -> tuple[str, str]:
    """(what disagrees, an optional "where the other side works"); ``quote``: side names in backticks;
    ``err``: characters of the error message, and whether to name its type; ``compact``: fewer words."""
    s = Sides(f"`{sides_.a}`", f"`{sides_.b}`", sides_.b_skeleton) if quote else sides_
    verdict = bucket.verdict
    fp = bucket_fingerprint(bucket)
    err = short_error(fp, err[0], with_type=err[1]) if fp else "an error"
    if verdict == "value_mismatch":
        return f"{s.a} and {s.b} " + ("disagree" if compact else "return different values"), ""
    if verdict == "structure_mismatch":
        how = "disagree in shape or structure" if compact else "return results of different shape or structure"
        return f"{s.a} and {s.b} {how}", ""
    if verdict == "error_functorch_only":
        return f"{s.a} raises {err}", f" where {s.b} works"
    if verdict == "error_reference_only":
        return f"{s.b} raises {err}", f" where {s.a} works"
    if verdict == "different_errors":
        return f"{s.a} and {s.b} raise different errors ({err})", ""
    if verdict == "torch_bug_error":
        a, b = bug_sides(bucket)
        raised_a, raised_b = raising_sides(bucket)
        if a and not b:
            return f"{s.a} raises {err}", "" if raised_b else f" where {s.b} works"
        if b and not a:
            return f"{s.b} raises {err}", "" if raised_a else f" where {s.a} works"
        return f"{s.a} and {s.b} raise {err}", ""
    if verdict == "promise_broken":  # NOTE [promises]: the side that returned broke it
        raised_a, raised_b = raising_sides(bucket)
        kept, broke = (s.a, s.b) if raised_a and not raised_b else (s.b, s.a)
        return f"{broke} returns a value where {kept} raises the error torch promises ({err})", ""
    if verdict == "hang":
        return f"{s.a} or {s.b} hangs", ""
    if verdict == "slow":
        return f"{s.a} and {s.b} agree but one is over 50x slower", ""
    if verdict == "crash":
        return f"{s.a} or {s.b} crashes the process", ""
    return f"{s.a} and {s.b} disagree ({verdict})", ""


def title(bucket: BucketData, s: Sides | None = None) -> str:
    """One line (at most :data:`TITLE_LIMIT` characters before the token) ending with ``[affuzz:<id>]``:
    the most detailed wording that fits. Essential features are kept longest, then the error message
    (and wordier phrasings), then "where the other side works"."""
    s = s or sides(bucket)
    features = list(bucket.signature_features)
    plain = plain_forward(bucket)
    if plain:  # NOTE [plain forward]: no Function in the repro, its features say nothing
        features = []
    if oracle_kind(bucket.oracle).side_b in ("function_twin", "opcheck"):  # its sides say "custom op" already
        features = [f for f in features if f != "custom_op"]
    text = None
    for n in range(len(features), -1, -1):
        for err, compact in [(e, False) for e in ERROR_FORMS] + [(ERROR_FORMS[-1], True)]:
            core, works = _title_core(bucket, s, err=err, compact=compact)
            for candidate in (core + works, core):
                candidate += (" " + _feature_clause(features[:n])) if n else (" for a plain function" if plain else "")
                if len(candidate) <= TITLE_LIMIT:
                    text = candidate
                    break
            if text:
                break
        if text:
            break
    if text is None:
        core, _ = _title_core(bucket, s, err=ERROR_FORMS[-1], compact=True)
        text = core if len(core) <= TITLE_LIMIT else core[: TITLE_LIMIT - 1].rstrip() + "…"
    return f"{text} [affuzz:{bucket.id}]"


def labels(bucket: BucketData, s: Sides | None = None) -> list[str]:
    """Suggested labels. ``module: forward ad`` only when forward mode runs on the side that is wrong (by
    the finite-difference triage; on either side when it is not known): a Function that merely has a jvp
    rule, or a jacfwd on the side that is right, does not make the bug forward AD's."""
    s = s or sides(bucket)
    op = [LABEL_CUSTOM_OPS] if "custom_op" in bucket.features else []  # NOTE [custom op mode]
    return op + [label for label in _labels(bucket, s) if label not in op]


def _labels(bucket: BucketData, s: Sides) -> list[str]:
    compiled = bucket.compile
    if bucket.oracle == COMPILED and compiled:  # NOTE [compiled mode]: triaged by backend
        result = [LABEL_PT2, LABELS_BACKEND[compiled["backend"]]]
        if compiled.get("autograd"):
            result.append(LABEL_COMPILED_AUTOGRAD)
        if set(bucket.transforms) - {"autograd_grad"} and compiled["placement"] != "plain":
            result.append(LABEL_FUNCTORCH)
        if bucket.verdict in SILENT_VERDICTS:
            result.append(LABEL_SILENT)
        return result
    if bucket.oracle == CHECKPOINT:  # NOTE [checkpoint mode]: checkpointing's, and autograd's
        result = [LABEL_CHECKPOINT, LABEL_AUTOGRAD]
        if bucket.verdict in SILENT_VERDICTS:
            result.append(LABEL_SILENT)
        return result
    a, b = set(bucket.transforms), set(s.b_skeleton)
    triage = bucket.triage
    transforms = a if triage == "functorch_wrong" else b if triage == "reference_wrong" else a | b
    result = [LABEL_FUNCTORCH, LABEL_AUTOGRAD]  # side A is always torch.func, the Function is autograd's
    if transforms & set(FORWARD_MODE_TRANSFORMS):
        result.append(LABEL_FORWARD_AD)
    if bucket.verdict in SILENT_VERDICTS:
        result.append(LABEL_SILENT)
    return result


# ---------------------------------------------------------------------------------------------- Versions


def _block(text: str, lang: str = "") -> list[str]:
    fence = "````" if "```" in text else "```"
    return [f"{fence}{lang}", text.rstrip("\n"), fence]


def _expected(bucket: BucketData, s: Sides) -> str:
    verdict = bucket.verdict
    record = bucket.record or {}
    if verdict == "value_mismatch":
        text = (
            "Both sides compute the same mathematics, so they should return the same values (within "
            "`torch.testing.assert_close` tolerances)."
        )
        triage = record.get("triage") or bucket.triage
        if triage in TRIAGE_TEXT:
            text += " " + TRIAGE_TEXT[triage].format(a=f"`{s.a}` (torch.func)", b=f"`{s.b}`")
        else:
            text += " Which side is wrong was not determined" + (
                " (the finite-difference check could not decide)." if triage == "undetermined" else "."
            )
        if record.get("triage_detail") and triage != "compiled_wrong":  # that one's detail is the sentence above
            text += f" ({record['triage_detail']})"
        return text
    if verdict == "structure_mismatch":
        return "Both sides should return results of the same structure, shapes and dtypes (and the same values)."
    if verdict == "hang":
        return "Both sides finish (the repro runs past its time limit)."
    if verdict == "slow":
        return "Both sides take comparable time."
    if verdict == "crash":
        return "Neither side crashes the interpreter."
    text = "Both sides return the same result, or raise the same error."
    if verdict == "promise_broken":  # NOTE [promises]
        text += (
            " For this Function torch promises the error the other side raises (its documented check), so a"
            " side that runs the same Function in the same mode should raise it too instead of returning."
        )
    if verdict == "torch_bug_error":
        text += " PyTorch itself calls this error a bug (an internal assert or an assertion inside torch)."
        rule = record.get("broken_rule")
        if rule:  # NOTE [broken rules]
            text += (
                f" Note: {RULES.get(rule, rule)} ({rule}), so the two sides' values are not compared here; "
                "that is the Function's fault, but it does not make an internal error of torch acceptable."
            )
    return text


def _observed(bucket: BucketData, s: Sides) -> list[str]:
    record = bucket.record or {}
    lines = [
        f"**Observed** (torch {record.get('torch_version', '?')}):",
        "",
        f"side A, `{s.a}`:",
        *_block(str(record.get("functorch", "?"))),
        "",
        f"side B, `{s.b}`:",
        *_block(str(record.get("reference", "?"))),
    ]
    fp = bucket_fingerprint(bucket)
    if fp:
        lines += ["", f"The error, with the torch frame that raised it: `{fp}`"]
    return lines


def _also_seen(bucket: BucketData) -> list[str]:
    stacks = bucket.stacks
    if not stacks:
        return []
    lines = ["", "**Also seen under** (oracle: transform stack, outermost first → hits):", ""]
    lines += [f"- `{k}` → {v}" for k, v in sorted(stacks.items(), key=lambda kv: (-kv[1], kv[0]))]
    return lines


def _related(bucket: BucketData, table: tuple[KnownIssue, ...] | None) -> list[str]:
    related = related_issues(bucket.summary, table)
    if not related:
        return []
    lines = ["", "**Related upstream issues** (a neighbouring mechanism, not this one):", ""]
    return lines + [f"- {k.issue} ({k.state_text}): {k.summary}" for k in related]


def draft(bucket: BucketData, run: RunData, env: str, known: tuple[KnownIssue, ...] | None = None) -> str:
    """The text of ``issues/<bucket id>.md`` (NOTE [issue drafts]); ``known``: the known-issues table
    (default: :mod:`.upstream`'s), for the related issues it names."""
    s = sides(bucket)
    record = bucket.record or {}
    oracle = bucket.oracle
    features = list(bucket.signature_features)
    core, works = _title_core(bucket, s, quote=True)
    what = _feature_clause(features).removeprefix("for ")
    if plain_forward(bucket):  # NOTE [plain forward]
        what = "a plain function (found with a custom autograd.Function; its forward alone shows it)"
    intro = (
        f"With {what}, {core}{works}. "
        f"Side A runs the transforms through torch.func; side B computes {ORACLE_TEXT.get(oracle, oracle)}, "
        "so the two must agree."
    )
    if oracle_kind(oracle).side_b in CUSTOM_OP_INTRO:  # NOTE [custom op mode]
        intro = f"With {what}, {core}{works}. {CUSTOM_OP_INTRO[oracle_kind(oracle).side_b]}"
    elif oracle == COMPILED and bucket.compile:  # NOTE [compiled mode]: what each side of the repro runs
        c = bucket.compile
        how = f"backend={c.get('backend')!r}, fullgraph={c.get('fullgraph')}" + (
            ", its backward under compiled autograd" if c.get("autograd") else ""
        )
        intro = (
            f"With {what}, {core}{works}. Side A runs `{s.a}` eagerly, side B the same under torch.compile "
            f"(`{s.b}`, {how}): torch.compile must not change what it computes."
        )
    elif oracle not in ORACLE_TEXT:  # a side B that has no words of its own here: the table's
        intro = f"With {what}, {core}{works}. Side A runs `{s.a}`, side B runs {oracle_kind(oracle).words}: the two must agree."
    found = (
        "Repro (needs only torch; it exits with status 1 while the bug is there; found and shrunk by affuzz, a "
        "differential fuzzer of torch.func against plain autograd"
        + (f", `{record['found_by']}`" if record.get("found_by") else "")
        + "):"
    )
    lines = [
        f"# {title(bucket, s)}",
        "",
        "### 🐛 Describe the bug",
        "",
        intro,
        "",
        found,
        "",
        *_block(bucket.repro or "# (repro.py missing)", "python"),
        "",
        *_observed(bucket, s),
        "",
        f"**Expected**: {_expected(bucket, s)}",
        *_also_seen(bucket),
        *_related(bucket, known),
        "",
        versions_section(env, run),
        "",
        LABELS_PREFIX + ", ".join(f"`{label}`" for label in labels(bucket, s)),
        "",
        f"<sub>affuzz bucket `{bucket.id}`, signature `{bucket.signature_text}`</sub>",
        "",
    ]
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _index(
    run: RunData,
    written: list[tuple[BucketData, str]],
    known: list[tuple[BucketData, KnownIssue]],
    table: tuple[KnownIssue, ...] | None = None,
    unshrunk: list[BucketData] | None = None,
) -> str:
    others = [b for b in run.buckets if not b.verified]
    related = [(b, k) for b, _ in written for k in related_issues(b.summary, table)]
    lines = [
        f"# Issue drafts: {run.out}",
        "",
        f"torch {run.numbers.get('torch_version', '?')}: {len(written)} "
        f"{'draft' if len(written) == 1 else 'drafts'}, {len(known)} known upstream "
        f"(NOTE [issue drafts] in fuzzer/publish/drafts.py). File them with `affuzz file {run.out} --repo OWNER/NAME` "
        "(a dry run; add `--yes` to file).",
        "",
    ]
    if written:
        lines += ["| draft | verdict | title |", "|---|---|---|"]
        lines += [f"| [{b.id}.md]({b.id}.md) | {b.verdict} | {_cell(t)} |" for b, t in written]
        lines.append("")
    if known:
        lines += ["Known upstream (no draft):", ""]
        lines += [f"- `{b.id}`: known: {k.ref} {k.issue} ({k.state_text}; {k.summary})" for b, k in known]
        lines.append("")
    if related:
        lines += ["Related upstream issues (drafted all the same: not the same mechanism):", ""]
        lines += [f"- `{b.id}`: related: {k.ref} {k.issue} ({k.state_text}; {k.summary})" for b, k in related]
        lines.append("")
    if unshrunk:
        lines += [
            "Not drafted yet (published unshrunk: `affuzz run --resume "
            f"{run.out} --duration <total>` shrinks them, then they are drafted): "
            + ", ".join(f"`{b.id}` ({b.unshrunk})" for b in unshrunk)
        ]
        lines.append("")
    if others:
        lines += ["Not drafted (not verified): " + ", ".join(f"`{b.id}` ({b.status})" for b in others)]
        lines.append("")
    return "\n".join(lines)


class DraftPlan(NamedTuple):
    """What :func:`write_drafts` makes of a run's verified buckets (NOTE [issue drafts])."""

    to_draft: list[BucketData]  # a draft each
    matched: list[tuple[BucketData, KnownIssue]]  # known upstream: no draft
    unshrunk: list[BucketData]  # published before they were shrunk: no draft until they are


def draft_plan(run: RunData, known: tuple[KnownIssue, ...] | None = None) -> DraftPlan:
    """The verified buckets that get a draft, those known upstream, and those not drafted because the
    campaign published them unshrunk (a repro longer than the bug is not what a maintainer should get:
    ``affuzz run --resume`` shrinks them, then they are drafted)."""
    plan = DraftPlan([], [], [])
    for b in run.buckets:
        if not b.verified:
            continue
        k = known_issue(b.summary, known)
        if k is not None:
            plan.matched.append((b, k))
        elif b.unshrunk:
            plan.unshrunk.append(b)
        else:
            plan.to_draft.append(b)
    return plan


def write_drafts(
    out: Path,
    *,
    python: str | None = None,
    known: tuple[KnownIssue, ...] | None = None,
    env: EnvProbe | None = None,
) -> list[Path]:
    """Write ``OUT/issues/<id>.md`` for every verified bucket not known upstream, and ``OUT/issues/README.md``
    (NOTE [issue drafts]); drafts of earlier calls that no longer apply are removed. ``python``: the
    interpreter whose ``collect_env`` goes under Versions (default: this one). ``known``: the known-issues
    table (default: :mod:`.upstream`'s). ``env``: a :class:`EnvProbe` started earlier (else one starts
    here, where there is something to draft). Returns the drafts written (the index, always written, is not
    among them)."""
    run = load_run(out)
    to_draft, matched, unshrunk = draft_plan(run, known)
    issues = out / ISSUES_DIR
    if to_draft:
        versions = (env or EnvProbe(python or sys.executable)).result()
    else:
        versions = ""
        if env is not None:
            env.close()
    written: list[Path] = []
    titles: list[tuple[BucketData, str]] = []
    for b in to_draft:
        text = draft(b, run, versions, known)
        path = issues / f"{b.id}.md"
        atomic_write_text(path, text)
        written.append(path)
        titles.append((b, text.splitlines()[0].removeprefix("# ")))
    if issues.exists():
        keep = {p.name for p in written} | {INDEX}
        for p in issues.glob("*.md"):
            if p.name not in keep:
                p.unlink()
    index = issues / INDEX
    atomic_write_text(index, _index(run, titles, matched, known, unshrunk))
    return written
