"""The layout stays what README's table says (NOTE [layers] in pyproject.toml): imports point down, no
private name crosses a module, every NOTE reference names a NOTE that exists where it says."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [p for d in ("fuzzer", "strategies") for p in sorted((ROOT / d).rglob("*.py"))]
NOTE_FILES = SOURCES + [p for d in ("tests", "bench") for p in sorted((ROOT / d).rglob("*.py"))]
NOTE_FILES += [ROOT / "README.md", ROOT / "pyproject.toml", *sorted((ROOT / "docs").glob("*.md"))]


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def test_import_contracts_hold() -> None:
    """import-linter (contracts in pyproject.toml): layers, strategies use only the IR, torch-free IR."""
    lint = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout and "3 kept" in proc.stdout


def test_no_private_name_crosses_a_module() -> None:
    bad = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("fuzzer")):
                bad += [f"{module_name(path)}: {a.name}" for a in node.names if a.name.startswith("_")]
    assert [b for b in bad if not b.endswith("__version__")] == []


def test_every_note_reference_names_a_note_defined_once_where_it_says() -> None:
    definitions: dict[str, list[Path]] = {}
    references: list[tuple[str, str, str | None]] = []
    for path in NOTE_FILES:
        text = path.read_text(encoding="utf-8")
        for line in text.splitlines():
            heading = re.fullmatch(r"\s*(?:#\s*)?NOTE \[([^\]{}]+)\]\s*", line)
            if heading:
                definitions.setdefault(heading.group(1), []).append(path)
        # a reference may break its line inside the name or before the module it names
        pattern = r"NOTE \[([^\]{}]+)\]`?(?:\s+in\s+#?\s*\[?(?::mod:|:func:)?`?([\w./]+)`?)?"
        for m in re.finditer(pattern, text):
            line_no = text.count("\n", 0, m.start()) + 1
            references.append((f"{path.relative_to(ROOT)}:{line_no}", " ".join(m.group(1).split()), m.group(2)))
    assert {name: paths for name, paths in definitions.items() if len(paths) > 1} == {}
    assert len(definitions) >= 30
    problems = []
    for where, name, module in references:
        if name not in definitions:
            problems.append(f"{where}: NOTE [{name}] is defined nowhere")
        elif module:
            defined_in = definitions[name][0]
            target = module.rstrip(".").removesuffix(".py").replace("/", ".")
            if target not in (module_name(defined_in), defined_in.name):
                problems.append(f"{where}: NOTE [{name}] in {module}, but it is in {defined_in.relative_to(ROOT)}")
    assert problems == []


def test_the_bucket_book_and_the_scheduler_run_without_torch() -> None:
    """Their unit tests (tests/triage/test_buckets.py, tests/campaign/test_schedule.py) need no torch."""
    code = (
        "import sys; import fuzzer.triage.buckets, fuzzer.campaign.schedule, fuzzer.publish.findings; "
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


#: Lines a source module of fuzzer/ or strategies/ may have (issue 36: short enough to read in one go).
MODULE_LINES = 500


def test_no_source_module_is_too_long_to_read() -> None:
    lengths = {str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines()) for p in SOURCES}
    too_long = {p: n for p, n in lengths.items() if n > MODULE_LINES}
    assert too_long == {}, f"split these (or shorten them) to at most {MODULE_LINES} lines: {too_long}"
