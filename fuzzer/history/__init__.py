"""Findings across time and torch versions: the corpus (:mod:`.corpus`), replay across interpreters
(:mod:`.replay`, :mod:`.replay_worker`), bisection over torch releases (:mod:`.torch_bisect`) and the
``.venvs/torch-X.Y.Z`` it needs (:mod:`.torchenv`).

May import :mod:`fuzzer.publish` and everything below it; never :mod:`fuzzer.campaign`."""
