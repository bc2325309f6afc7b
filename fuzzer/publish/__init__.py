"""Turning a finding into files: the finding and its ``finding.json`` (one class reads and writes it,
:mod:`.findings`), staging and verification of its repro in a fresh process (:mod:`.verify`, with the fork
server of :mod:`.forkserver`), reports built from plain data (:mod:`.report`).

May import :mod:`fuzzer.triage` and everything below it."""
