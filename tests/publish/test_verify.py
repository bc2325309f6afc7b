import sys
import threading
from pathlib import Path

import pytest
import torch


def test_generic_script_shows_a_broken_promise_by_the_promised_error():
    # the generic comparison prints error_functorch_only/error_reference_only, never promise_broken; it shows
    # the promise broken where one side raised the promised error and the other returned a value
    from fuzzer.judge.execute import Outcome, Side
    from fuzzer.publish.verify import reproduced

    message = "You must implement the jvp function for custom autograd.Function to use it with forward mode AD."

    class F:
        signature = type("S", (), {"verdict": "promise_broken", "error": f"NotImplementedError: {message} @ -"})
        outcome = Outcome("promise_broken", Side(None, "NotImplementedError", message), Side("0", None, None), 0)

        @staticmethod
        def expect():
            return None

    shown = f"============= functorch\nNotImplementedError({message!r})\n============= compiled\n0\nverdict: error_functorch_only\n"
    assert reproduced(F, shown, compact=False)
    assert not reproduced(F, shown.replace("jvp function", "vmap rule"), compact=False)
    assert not reproduced(F, shown.replace("error_functorch_only", "consistent"), compact=False)


def test_the_verifier_widened_to_two_threads_verifies_each_finding_once(tmp_path, judged_finding):
    """NOTE [campaign driver]: once a campaign stops, verification widens to a thread and fork server per
    core; every submitted finding is verified (its repro run in a fresh process) on one of them."""
    from fuzzer.history.corpus import load_entry
    from fuzzer.publish.verify import Verifier
    from fuzzer.triage.buckets import Bucket

    if not torch.__version__.startswith("2.13"):
        pytest.skip("corpus verdicts recorded on torch 2.13")
    corpus = Path(__file__).resolve().parents[2] / "corpus"
    names = ["value_mismatch-63c0cdb50a", "value_mismatch-ffc0c71408", "torch_bug_error-f21bcfaafd"]
    buckets = []
    for name in names:
        entry = load_entry(corpus / name)
        finding, _ = judged_finding(entry.case, entry.meta.get("oracle", "functorch_vs_create_graph"))
        buckets.append(Bucket(finding.signature, finding))
    logged: list[str] = []
    v = Verifier(tmp_path, python=sys.executable, case_timeout=120.0, log=logged.append)
    v.start()
    v.widen(2)
    names_seen = {t.name for t in threading.enumerate() if t.name.startswith("affuzz-verify-")}
    assert names_seen == {"affuzz-verify-0", "affuzz-verify-1"}
    for b in buckets:
        v.submit(b, b.first)
    v.close()
    assert not logged, logged  # nothing logged: no verification raised
    assert [b.status for b in buckets] == ["verified"] * 3
    assert all((b.path / "repro.py").exists() for b in buckets)
    assert v.pending == 0 and len(v.collect()) == 3
    assert not any(t.name.startswith("affuzz-verify-") for t in threading.enumerate())
