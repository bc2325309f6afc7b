"""Generating cases: worker streams decoded through Hypothesis from :mod:`strategies` (:mod:`.streams`),
coverage and steering (:mod:`.coverage`), the Hypothesis settings (:mod:`.profile`).

May import :mod:`strategies` and :mod:`fuzzer.ir`; torch-free."""
