"""Turning a finding into files: finding records (one class reads and writes them), the repro
verified in a fresh process (the fork server), reports built from plain data.
May import :mod:`fuzzer.triage` and everything below it."""
