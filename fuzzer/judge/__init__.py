"""Running a case and deciding its verdict: the rendered script executed in process (:mod:`.execute`),
the known-limitations registry applied per side (:mod:`.compare`, ``known_limitations.json``), and the
one :class:`~fuzzer.judge.judge.Judge` every caller uses (:mod:`.judge`).

May import :mod:`fuzzer.codegen`, :mod:`fuzzer.gen`, :mod:`strategies` and :mod:`fuzzer.ir`."""
