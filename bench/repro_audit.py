"""Audit a run's published repros as a maintainer would first: run each ``OUT/findings/<bucket>/repro.py``
in a fresh interpreter and set what it shows beside the bucket's fingerprint.

    python bench/repro_audit.py OUT [--python PY] [--json FILE] [--rerender DIR]

For an error bucket, the traceback's exception line (its key, NOTE [error buckets]) must be the bucket's
fingerprint; for a value bucket, ``torch.testing.assert_close`` must fail. It also counts the repros
whose last error matches a documented limitation's message in the known-limitations registry (a repro
that shows user error instead of its bug), and prints repro sizes (non-blank lines, header included):
median and max. Exit 1 if any repro does not show its bucket.

``--rerender DIR``: first publish each finding of OUT again into DIR with today's renderer (staged and
verified as a campaign does), then audit DIR: a renderer change measured on the same findings.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fuzzer.codegen.short_forms import PROMISE_MESSAGE  # noqa: E402
from fuzzer.judge.compare import load_registry  # noqa: E402
from fuzzer.judge.judge import Judge  # noqa: E402
from fuzzer.publish.findings import Finding  # noqa: E402
from fuzzer.publish.verify import line_key, run_repro, stage, verify_and_publish  # noqa: E402


def rerender(out: Path, dest: Path, python: str) -> None:
    """Publish every finding of ``out`` again under ``dest/findings`` (or ``dest/unverified``). finding.json
    keeps each side's outcome as a summary only, so the case is judged again here (this torch) for the
    outcome the repro's form is chosen from; a finding judged otherwise now is left out, with a line."""
    judge = Judge(timeout=120)
    for d in sorted((out / "findings").iterdir()):
        finding = Finding.from_dir(d)
        j = judge(finding.case, finding.signature.oracle)
        if j.outcome is None or j.verdict != finding.signature.verdict or j.fingerprint != finding.signature.error:
            print(f"{d.name}: now {j.verdict} {j.fingerprint or ''}".rstrip())
            continue
        finding = dataclasses.replace(finding, outcome=j.outcome)
        verify_and_publish(dest, stage(dest, finding), finding, python=python)


def audit(out: Path, python: str) -> list[dict[str, object]]:
    registry = load_registry()
    rows = []
    for d in sorted((out / "findings").iterdir()):
        record = json.loads((d / "finding.json").read_text(encoding="utf-8"))
        text = (d / "repro.py").read_text(encoding="utf-8")
        ran = run_repro(d / "repro.py", python=python, timeout=300)
        line = ran["exception_line"] or ""
        fingerprint = record.get("error") or ""
        if record["verdict"] == "promise_broken":  # NOTE [promises]: the assertion, and the promised error shown
            tail = ran["output_tail"]
            message = fingerprint.split(": ", 1)[-1].rsplit(" @ ", 1)[0][:40]
            shows = f"AssertionError: {PROMISE_MESSAGE}" in tail and message in tail
            shown = line
        elif fingerprint:
            shows = line_key(line) == fingerprint.rsplit(" @ ", 1)[0]
            shown = line
        else:
            tail = ran["output_tail"]
            shows = "AssertionError" in line and "not close" in tail
            shown = next((ln for ln in tail.splitlines() if "not close" in ln), line)
        documented = [lim.name for lim in registry if line and lim.pattern.search(line)]
        rows.append(
            {
                "bucket": d.name,
                "verdict": record["verdict"],
                "oracle": record["oracle"],
                "transforms": " > ".join(record["transforms"]),
                "fingerprint": fingerprint.rsplit(" @ ", 1)[0] if fingerprint else "(values)",
                "exit_code": ran["exit_code"],
                "shown": shown,
                "shows_bucket": bool(shows and ran["exit_code"] == 1),
                "documented_limitation": documented,
                "lines": sum(1 for t in text.splitlines() if t.strip()),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--json", type=Path)
    p.add_argument("--rerender", type=Path, metavar="DIR", help="publish OUT's findings again into DIR, audit DIR")
    args = p.parse_args(argv)
    if args.rerender is not None:
        rerender(args.out, args.rerender, args.python)
        lost = sorted(p.name for p in (args.rerender / "unverified").glob("*"))
        if lost:
            print(f"not verified when published again: {', '.join(lost)}")
        args.out = args.rerender
    rows = audit(args.out, args.python)
    print("| bucket | verdict | stack | fingerprint | exit | repro shows | match | lines |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        cut = lambda s: s if len(s) <= 90 else s[:87] + "..."  # noqa: E731
        print(
            f"| {r['bucket']} | {r['verdict']} | {r['transforms']} | {cut(str(r['fingerprint']))} | {r['exit_code']} "
            f"| {cut(str(r['shown']))} | {'yes' if r['shows_bucket'] else '**no**'} | {r['lines']} |"
        )
    sizes = [int(r["lines"]) for r in rows]  # type: ignore[call-overload]
    bad = [r for r in rows if not r["shows_bucket"]]
    documented = [r for r in rows if r["documented_limitation"]]
    print(
        f"\n{len(rows)} repros: {len(rows) - len(bad)} show their bucket, {len(bad)} do not; "
        f"{len(documented)} end on a documented limitation's message; "
        f"size median {statistics.median(sizes) if sizes else 0}, max {max(sizes, default=0)} non-blank lines"
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
