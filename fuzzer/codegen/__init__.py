"""From a case to Python source: the one script template (:mod:`.render`, :mod:`.function`) and
the runtime library copied into every script (:mod:`.repro_lib`, :mod:`.repro_fd`: real, linted code
that imports torch). The renderer itself is torch-free. May import :mod:`fuzzer.ir`."""
