"""Findings across time and torch versions: the corpus, replay, torch bisection and torch
venvs. May import :mod:`fuzzer.publish` and below; never the campaign."""
