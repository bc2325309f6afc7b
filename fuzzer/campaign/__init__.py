"""A fuzzing campaign: configuration, the worker protocol and worker, transports, the driver
(scheduling and I/O), and its resumable state. May import :mod:`fuzzer.publish` and below."""
