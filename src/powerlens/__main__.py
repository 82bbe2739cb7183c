"""``python -m powerlens <command>``: the same command as ``powerlens`` (what the Snakemake rules run)."""

from powerlens.cli import main

main()
