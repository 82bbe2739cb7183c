"""One module per pipeline step: `add_arguments(ap)` defines its options (once), `run(a)` reads the parsed
options and calls the step in :mod:`powerlens.pipeline.steps`. :mod:`powerlens.cli` turns them into sub-commands."""
