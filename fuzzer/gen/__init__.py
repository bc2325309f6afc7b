"""Generating cases: worker streams decoded through Hypothesis from :mod:`strategies`, coverage and
steering, the Hypothesis settings. May import :mod:`fuzzer.ir` and :mod:`strategies`; torch-free."""
