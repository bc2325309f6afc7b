"""The verdict vocabulary: what the judge may say about a case under an oracle."""

VERDICTS = (
    "consistent",
    "value_mismatch",
    "structure_mismatch",  # results differ in nesting, shape or dtype
    "error_functorch_only",
    "error_reference_only",
    "different_errors",
    "torch_bug_error",  # an error PyTorch itself calls a bug (INTERNAL ASSERT, "report a bug", assert in torch)
    "promise_broken",  # one side raises an error the docs promise for this Function, the other returns (NOTE [promises])
    "hang",  # a side did not finish within the per-case timeout
    "slow",  # values agree, one side far slower (NOTE [slow findings] in fuzzer/codegen/render.py)
    "crash",  # the worker process died running the case (NOTE [campaign driver] in fuzzer/campaign/driver.py)
)
#: Verdicts that are findings.
FINDING_VERDICTS = VERDICTS[1:]
#: Error verdicts: bucketed by the fingerprints of the unexplained errors (NOTE [error buckets]).
ERROR_VERDICTS = (
    "error_functorch_only",
    "error_reference_only",
    "different_errors",
    "torch_bug_error",
    "promise_broken",
)
#: Not findings: explained by the registry, not run (NOTE [valid comparisons]), forward not finite.
QUIET_VERDICTS = ("consistent", "expected", "not_applicable", "nonfinite")
ALL_VERDICTS = (*QUIET_VERDICTS, *FINDING_VERDICTS)
