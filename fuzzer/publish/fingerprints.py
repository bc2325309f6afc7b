"""A bucket's error in words: its fingerprint (NOTE [error buckets]), its type and message as a draft and a
tracker search quote them, and which sides raised it.
"""

from __future__ import annotations

import re

from .rundata import BucketData


def _error_type_and_message(fingerprint: str) -> tuple[str, str]:
    """``RuntimeError: msg at "file":N @ frame`` -> (``RuntimeError``, ``msg``)."""
    key = fingerprint.rsplit(" @ ", 1)[0] if " @ " in fingerprint else fingerprint
    kind, _, message = key.partition(": ")
    if not message:
        return "", kind.strip()
    message = re.sub(r'\s+at\s+"[^"]*"(:N)?', "", message).strip()
    return kind.strip(), message


def short_error(fingerprint: str, limit: int = 50, *, with_type: bool = True) -> str:
    kind, message = _error_type_and_message(fingerprint)
    if len(message) > limit:
        message = message[:limit].rsplit(" ", 1)[0].rstrip(",.;:") + "…"
    return f'{kind} "{message}"' if kind and with_type else f'"{message}"'


def error_message(fingerprint: str) -> str:
    """An error fingerprint's message as the fingerprint writes it (numbers as N, bracketed parts as
    ``[...]``, at most its first clauses), without its type, file paths and frame: what the tracker is
    searched for (:mod:`.filing`)."""
    key = fingerprint.rsplit(" @ ", 1)[0] if " @ " in fingerprint else fingerprint
    _, sep, message = key.partition(": ")
    message = message if sep else key  # "AssertionError: " has none; a key without a type is all message
    message = re.sub(r'\s+at\s+"[^"]*"(:N)?', "", message)
    return re.sub(r'\s+at\s+"[^"]*$', "", message).strip()  # and a path the fingerprint cut short


def bucket_fingerprint(bucket: BucketData) -> str:
    """The bucket's error fingerprint (NOTE [error buckets]), or "" for a value finding."""
    record = bucket.record or {}
    if record.get("error"):
        return str(record["error"])
    sig = bucket.signature_text
    return sig.split("|", 1)[1] if sig.startswith(("error|", "torch_bug_error|")) else ""


def _is_error(summary: str, fingerprint: str) -> bool:
    kind, _ = _error_type_and_message(fingerprint)
    if kind and summary.startswith(f"{kind}:"):
        return True
    return bool(re.match(r"[A-Za-z_][\w.]*(Error|Exception)\b: ", summary))


def _shows(summary: str, fingerprint: str) -> bool:
    """Whether a side's printed error is the bucket's error (numbers and file names aside)."""
    kind, message = _error_type_and_message(fingerprint)
    head = re.sub(r"\d+", "N", message)[:30]
    text = re.sub(r'\s+at\s+"[^"]*"(:N)?', "", re.sub(r"\d+", "N", summary))
    return bool(kind) and text.startswith(f"{kind}: {head}")


def raising_sides(bucket: BucketData) -> tuple[bool, bool]:
    """Which sides raised (A, B), from the verdict or, for a torch-bug error, from what they printed."""
    verdict = bucket.verdict
    if verdict == "error_functorch_only":
        return True, False
    if verdict == "error_reference_only":
        return False, True
    if verdict == "different_errors":
        return True, True
    record = bucket.record or {}
    fp = bucket_fingerprint(bucket)
    return _is_error(str(record.get("functorch", "")), fp), _is_error(str(record.get("reference", "")), fp)


def bug_sides(bucket: BucketData) -> tuple[bool, bool]:
    """Which sides raised the bucket's own error (A, B); both when that cannot be told."""
    record = bucket.record or {}
    fp = bucket_fingerprint(bucket)
    a, b = _shows(str(record.get("functorch", "")), fp), _shows(str(record.get("reference", "")), fp)
    return (a, b) if a or b else raising_sides(bucket)
