"""Running a case and deciding its verdict: executing the rendered script in process, the
known-limitations registry applied per side, the one :class:`~fuzzer.judge.judge.Judge`.
May import :mod:`fuzzer.codegen`, :mod:`fuzzer.gen` and :mod:`fuzzer.ir`."""
