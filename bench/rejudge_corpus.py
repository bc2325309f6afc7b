"""Re-judge the corpus after a change of the judge (issue 11): replay records in, corpus out.

    affuzz replay corpus --python .venvs/torch-2.0.1/bin/python --python .venv/bin/python --json R.json
    python bench/rejudge_corpus.py R.json [--corpus corpus] [--dry-run]

For every entry, the new verdicts on each replayed torch decide:

* an entry that is a finding on no replayed torch leaves the corpus (the reason is its new verdict:
  ``not_applicable`` and the reason, ``expected`` and the limitation, ``consistent``, ``nonfinite``);
* entries that show one root cause (error findings: the same error fingerprint on the same torch;
  value findings: the same verdict, oracle, skeleton and essential features) are merged into the one
  with the smallest repro; the others are listed in its ``variants``;
* every kept entry gets its history replaced by the new verdicts, its status recomputed (``open`` while
  the newest replayed torch still shows it, else its earlier ``fixed-in`` or ``fixed-in <newest>``),
  its ``error`` fingerprint, and its repro re-rendered.

Prints one line per entry and the counts removed / merged / kept by class.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fuzzer.codegen.render import render  # noqa: E402
from fuzzer.history.corpus import load_corpus, update_meta, version_tuple  # noqa: E402
from fuzzer.ir.verdicts import FINDING_VERDICTS  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("records", type=Path)
    p.add_argument("--corpus", type=Path, default=ROOT / "corpus")
    p.add_argument("--dry-run", action="store_true")
    args = p.parse_args(argv)
    records = json.loads(args.records.read_text())
    if isinstance(records, dict):
        records = records.get("records", [])
    by_entry: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        by_entry[r["id"]].append(r)
    entries, errors = load_corpus([args.corpus])
    for e in errors:
        print(e, file=sys.stderr)
    versions = sorted({r["torch_version"] for r in records}, key=version_tuple)
    newest = versions[-1]
    removed: Counter[str] = Counter()
    groups: dict[str, list] = defaultdict(list)
    verdicts: dict[str, dict[str, dict]] = {}
    for entry in entries:
        rs = {r["torch_version"]: r for r in by_entry.get(entry.id, [])}
        verdicts[entry.id] = rs
        found = [v for v in versions if v in rs and rs[v]["verdict"] in FINDING_VERDICTS]
        if not found:
            why = " / ".join(
                f"{v}: {rs[v]['verdict']}" + (f" ({rs[v]['detail']})" if rs[v].get("detail") else "")
                for v in versions
                if v in rs
            )
            cls = sorted(
                {
                    rs[v]["verdict"] + (":" + (rs[v].get("detail") or "")) * (rs[v]["verdict"] != "consistent")
                    for v in rs
                }
            )
            removed[" + ".join(cls)] += 1
            print(f"remove {entry.id}: {why}")
            if not args.dry_run:
                shutil.rmtree(entry.path)
            continue
        first = rs[found[0]]
        if first["verdict"] in ("error_functorch_only", "error_reference_only", "different_errors", "torch_bug_error"):
            key = f"error|{found[0]}|{first.get('detail')}"
        else:
            key = f"{first['verdict']}|{found[0]}|{entry.oracle}|{entry.meta.get('signature', entry.id).split('|', 2)[-1]}"
        groups[key].append(entry)
    kept = merged = 0
    for key, members in groups.items():
        members.sort(key=lambda e: len((e.path / "repro.py").read_text().splitlines()))
        keep, rest = members[0], members[1:]
        rs = verdicts[keep.id]
        found = [v for v in versions if v in rs and rs[v]["verdict"] in FINDING_VERDICTS]
        status = keep.status
        if rs.get(newest, {}).get("verdict") in FINDING_VERDICTS:
            status = "open"
        elif not status.startswith("fixed-in"):
            status = f"fixed-in {newest.split('+')[0]}"
        first = rs[found[0]]
        changes = {
            "verdict": first["verdict"],
            "status": status,
            "history": [
                {"torch_version": v, "verdict": rs[v]["verdict"], "date": "2026-12-03"} for v in versions if v in rs
            ],
            "variants": sorted({*keep.meta.get("variants", []), *(m.id for m in rest)}),
            "rejudged": "issue 11: re-judged with the one judge (NOTE [valid comparisons], NOTE [error buckets])",
        }
        if key.startswith("error|"):
            changes["error"] = first.get("detail")
        print(
            f"keep   {keep.id}: {first['verdict']} on {found[0]}, status {status}"
            + (f", merges {len(rest)}" if rest else "")
        )
        kept += 1
        merged += len(rest)
        if args.dry_run:
            continue
        update_meta(keep, **changes)
        header = (keep.path / "repro.py").read_text().splitlines()[:2]
        header = [h[2:] for h in header if h.startswith("# ")]
        (keep.path / "repro.py").write_text(render(keep.case, header=header, oracle=keep.oracle, style="repro"))
        for m in rest:
            shutil.rmtree(m.path)
    print(f"\n{len(entries)} entries: {kept} kept, {merged} merged into them, {sum(removed.values())} removed")
    for cls, n in removed.most_common():
        print(f"  removed {n:3d}  {cls}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
