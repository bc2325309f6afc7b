# affuzz: `make fuzz` and `make test` are all a fresh machine needs.
PYTHON ?= python3
VENV ?= .venv
TORCH ?= 2.13.0
DURATION ?= 60
# seconds the short campaign waits at its end for queued shrinks (the rest are published unshrunk,
# still verified, and not drafted as issues until an `affuzz run --resume` shrinks them): compiled
# findings shrink slowly; make fuzz stays a two-minute command that ends with drafts for what it shrank
GRACE ?= 50
SEED ?=
OUT ?= reports/latest
BIN := $(VENV)/bin

BENCH_DURATION ?= 120
LONG_DURATION ?= 1800
OLD_TORCH_PY := .venvs/torch-2.0.1/bin/python

.PHONY: setup fuzz test test-unit test-torch test-campaign test-shrink test-versions lint bench bench-long torch-venv clean help
.DEFAULT_GOAL := help

help:
	@echo "make fuzz                 set up .venv if needed, run a $(DURATION) s campaign (+ up to $(GRACE) s of shrinking), print its summary ($(OUT)/)"
	@echo "make test                 set up .venv if needed, run the test suite"
	@echo "make test-unit            one tier of it: the torch-free tests (seconds); also test-torch, test-campaign, test-shrink"
	@echo "make test-versions        the per-version table of expected outcomes (tests/versions/) under .venv and each .venvs/torch-X.Y.Z"
	@echo "make lint                 ruff check + format check + import-linter layer contracts (pyproject.toml)"
	@echo "make bench                campaign throughput: steady cases/s with compiled cases on and off, the fuzz loop over bare"
	@echo "                          torch (compiled and torch.func cases apart), 2-worker speed-up, RSS, a phase profile; then"
	@echo "                          shrink time per bucket and repro size (also on torch 2.0.1 if .venvs/torch-2.0.1 exists)"
	@echo "make bench-long           a $(LONG_DURATION) s campaign (2 workers, no recycling), then its overhead ratio, worker RSS"
	@echo "                          one minute in and at the end, and shrink queue (scale_bench.py --from-run)"
	@echo "make setup [TORCH=X.Y.Z]  create .venv with torch $(TORCH) and affuzz (editable, dev extra)"
	@echo "make torch-venv TORCH=X.Y.Z   create .venvs/torch-X.Y.Z (e.g. 2.0.1, the seed's version)"

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check "torch==$(TORCH)"
	$(BIN)/python -m pip install -q --disable-pip-version-check -e ".[dev]"
	@touch $@

setup: $(BIN)/.installed

fuzz: setup
	rm -rf $(OUT)
	$(BIN)/affuzz run --duration $(DURATION) --shrink-grace $(GRACE) --out $(OUT) $(if $(SEED),--seed $(SEED))

test: setup
	$(BIN)/python -m pytest -q

# one tier of make test (TIERS in tests/conftest.py): test-unit (torch-free, seconds), test-torch,
# test-campaign, test-shrink
test-unit test-torch test-campaign test-shrink: setup
	$(BIN)/python -m pytest -q -m $(@:test-%=%)

# the per-version table of expected outcomes (tests/versions/) under the default torch and under every
# .venvs/torch-X.Y.Z that exists (pytest is added to one that lacks it); not part of make test's other tiers
test-versions: setup
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/versions
	@for py in .venvs/torch-*/bin/python; do \
		[ -x "$$py" ] || continue; \
		echo "== $$py"; \
		$$py -c "import pytest" 2>/dev/null || $$py -m pip install -q "pytest>=7" || exit 1; \
		$$py -m pytest -q -p no:cacheprovider tests/versions || exit 1; \
	done

lint: setup
	$(BIN)/ruff check fuzzer strategies tests bench
	$(BIN)/ruff format --check fuzzer strategies tests bench
	$(BIN)/lint-imports

bench: setup
	$(BIN)/python bench/scale_bench.py --duration $(BENCH_DURATION)
	$(BIN)/python bench/shrink_bench.py --duration $(BENCH_DURATION)
	@if [ -x $(OLD_TORCH_PY) ]; then $(BIN)/python bench/shrink_bench.py --python $(OLD_TORCH_PY) --duration $(BENCH_DURATION); \
	else echo "(no $(OLD_TORCH_PY): make torch-venv TORCH=2.0.1 to add the seed's torch to the benchmark)"; fi

bench-long: setup
	rm -rf reports/bench-long
	$(BIN)/affuzz run --workers 2 --duration $(LONG_DURATION) --seed 21 --recycle-after 1000000000 --out reports/bench-long > /dev/null
	$(BIN)/python bench/scale_bench.py --from-run reports/bench-long --sample 4

torch-venv:
	@test -n "$(TORCH)" || (echo "usage: make torch-venv TORCH=X.Y.Z" >&2; exit 2)
	$(PYTHON) -m fuzzer.history.torchenv $(TORCH)

clean:
	rm -rf reports/latest .pytest_cache .ruff_cache
