"""Turning a finding into files: the finding and its ``finding.json`` (one class reads and writes it,
:mod:`.findings`), staging and verification of its repro in a fresh process (:mod:`.verify`, with the fork
server of :mod:`.forkserver`), OUT read back as plain data (:mod:`.rundata`), reports built from it
(:mod:`.report`: terminal and Markdown; :mod:`.html` with :mod:`.plots`: the morning report), issue drafts
(:mod:`.drafts`), filing them (:mod:`.filing`) and the known upstream issues (:mod:`.upstream`).

May import :mod:`fuzzer.triage` and everything below it."""
