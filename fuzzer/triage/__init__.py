"""What a finding is: ablation (:mod:`.ablate`), IR reductions (:mod:`.reduce`), the shrinker
(:mod:`.shrink`), signatures (:mod:`.signature`) and the bucket book (:mod:`.buckets`), the one place that
decides whether two findings are the same bug.

May import :mod:`fuzzer.judge` and everything below it."""
