"""A fuzzing campaign: configuration and counters (:mod:`.config`), the worker protocol (:mod:`.protocol`)
and worker (:mod:`.worker`), transports (:mod:`.transport`), which command a worker gets next
(:mod:`.schedule`), the driver (:mod:`.driver`: scheduling and I/O only), its files under OUT
(:mod:`.outdir`), its numbers (:mod:`.numbers`) and its resumable state (:mod:`.state`).

May import :mod:`fuzzer.publish` and everything below it; never :mod:`fuzzer.history` (NOTE [layers] in
pyproject.toml)."""
