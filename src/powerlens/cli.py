"""The powerlens command: a quick look at one model, and every pipeline step as a sub-command.

    powerlens inspect PATH_OR_HUB_ID        # leading eigenpair of F = W_O W_V per layer, as a table
    powerlens spectra --help                 # the step the workflow's rule spectra runs (python -m powerlens spectra)

Each step's options are declared once, in powerlens.pipeline.steps.<step> (OPTIONS); the sub-command, the rule
and the module share the step's name. A step's options have no defaults of their own: the workflow passes every
one from the config, whose defaults live in the config schema (src/powerlens/pipeline/config.schema.yaml). A
step's command imports that step's module only. A user error prints "ERROR: <problem>" and "  fix: <what to
do>" and exits with status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import os
import sys
import time
import traceback
from pathlib import Path

from powerlens import __version__
from powerlens.core.errors import PowerlensError
from powerlens.core.io import atomic_path, check_writable, pause_before_rename
from powerlens.core.progress import quiet_third_party_bars
from powerlens.pipeline.options import add_arguments, check_flags, step_kwargs


def print_error(e: PowerlensError) -> None:
    """A user error as the project prints it: ``ERROR: <problem>`` then ``  fix: <what to do>``."""
    print(f"ERROR: {e.problem}", file=sys.stderr)
    if e.fix:
        print(f"  fix: {e.fix}", file=sys.stderr)


def run_guarded(fn, *args) -> None:
    """Run a step: a PowerlensError becomes the problem + fix lines and exit status 2; any other error a
    traceback and status 1 (a bug to report)."""
    try:
        pause_before_rename()  # a bad test hook stops here, before any work, not at the first write
        fn(*args)
    except PowerlensError as e:
        print_error(e)
        sys.exit(2)
    except KeyboardInterrupt:
        from powerlens.core.io import REPLACED

        if REPLACED:  # a step that writes its outputs one by one (not staged together) had begun to
            print(f"interrupted after {len(REPLACED)} output(s) of this step were replaced ({', '.join(REPLACED[:3])}"
                  f"{', ...' if len(REPLACED) > 3 else ''}); the others are the previous run's: run the same snakemake "
                  "command again (it redoes the whole job)", file=sys.stderr)
        else:
            print("interrupted: no output was replaced (outputs are written atomically)", file=sys.stderr)
        sys.exit(130)
    except Exception:
        traceback.print_exc()
        sys.exit(1)


#: inspect's label for weights outside a run (no manifest says trained or random weights).
UNLABELLED = "weights as found: not a run's model folder, so neither labelled trained nor random"


def inspect_model(a) -> None:
    """powerlens inspect: the leading eigenpair of every layer's F, printed as a table.

    PATH_OR_ID is a local folder (one saved by save_pretrained, or a run's model folder results/<run>/<model>)
    or a Hugging Face hub id (org/name). An argument that cannot be a hub id (it starts with ., / or ~, has more
    than one /, or its first part is an existing folder) is always a path."""
    t0 = time.perf_counter()
    if a.csv:  # checked before any work; never into a run folder (a run's outputs are the pipeline's)
        from powerlens.pipeline.run_folder import check_not_run_output

        check_not_run_output(a.csv, "--csv")
        check_writable(a.csv, "--csv")
    if a.threads is not None and a.threads < 1:
        raise PowerlensError(f"--threads {a.threads}: must be at least 1", "omit it to use every core")
    import numpy as np
    import pandas as pd

    from powerlens.analysis.leading import inspect_spectra
    from powerlens.api import layer_matrices_of, weights_label_of
    from powerlens.core.fmt import is_random_label, weights_text

    text, mats, layer_map, heads = layer_matrices_of(a.model, arch=a.arch, revision=a.revision)
    label = weights_text(weights_label_of(a.model)) or UNLABELLED
    threads = a.threads or os.cpu_count() or 1
    print(f"{a.model}: {text}  [{label}]  (loaded in {time.perf_counter() - t0:.1f} s; "
          f"eigen-solves of {len(mats)} unique layers on {threads} threads)", flush=True)
    # only what the table shows (the leading eigenpair and |lambda_next|: the reduced grouped-query eig or ARPACK,
    # with a verified fallback to the full eig): the spectra step's Spectrum.summary fields, by the same rules
    lead = inspect_spectra(mats, threads=threads, n_heads=heads)
    rows = []
    for t, u in enumerate(layer_map):
        r = lead[u]
        v = r["v1"]
        top = np.argsort(-np.abs(v))[:3]
        pair = r["leading_type"] == "complex pair"  # complex v_1: moduli of its components
        rows.append({"layer": t, "unique": u, "Re lambda_1": r["lambda1_re"],
                     "Im lambda_1": r["lambda1_im"], "|lambda_1|": r["abs_lambda1"], "type": r["leading_type"],
                     "|l_next|/|l_1|": r["ratio_next"],
                     "v_1 largest components": ", ".join(f"{i}:{abs(v[i]):.2f}" if pair else f"{i}:{v[i].real:+.2f}"
                                                         for i in top)})
    df = pd.DataFrame(rows)
    print("F = W_O W_V per layer; eigenvalues sorted by modulus; v_1 = right eigenvector, unit norm; 'complex pair' "
          "= lambda_1 and its conjugate lead together" + (f"; {label.upper()}: says nothing about trained models"
                                                          if is_random_label(label) else ""))
    with pd.option_context("display.width", 200, "display.max_colwidth", 60):
        print(df.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    if a.csv:
        with atomic_path(Path(a.csv).expanduser()) as tmp:
            df.to_csv(tmp, index=False)
    print(f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr)


class _Formatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Descriptions as written, and an optional flag's default shown after its help. A step's options are all
    required: their defaults live in the config schema (src/powerlens/pipeline/config.schema.yaml) only."""

    def _get_help_string(self, action):
        if action.required or action.default is None or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    """argparse's parser, its refusals (a missing flag, a value outside the choices) in the project's voice:
    ``ERROR: <problem>`` and ``  fix: <what to do>``, exit status 2 as before."""

    def error(self, message: str):
        print_error(PowerlensError(f"{self.prog}: {message}", f"see `{self.prog} --help` for every flag and "
                                   "its values (a run passes each from the config)"))
        sys.exit(2)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command's parser: ``inspect`` and every step, or, with ``only`` (a step's name), that step alone, so
    running a step imports its module and no other."""
    ap = _Parser(
        prog="powerlens", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--version", action="version", version=f"powerlens {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", required=True)
    p = sub.add_parser("inspect", help="leading eigenpair of F = W_O W_V per layer of one model, as a table",
                       description=inspect.cleandoc(inspect_model.__doc__), formatter_class=_Formatter)
    p.add_argument("model", metavar="PATH_OR_ID",
                   help="a folder saved by save_pretrained (config.json + *.safetensors), a run's model folder "
                   "results/<run>/<model>, or a Hugging Face hub id org/name")
    p.add_argument("--arch", default=None, help="architecture (default: read from config.json's model_type)")
    p.add_argument("--revision", default=None, help="hub revision (commit, branch or tag) for a hub id (default: main)")
    p.add_argument("--threads", type=int, default=None,
                   help="CPU threads for the eigen-solves (default: every core of this machine)")
    p.add_argument("--csv", default=None, help="also write the table to this CSV file (its folder is checked "
                   "before any work); lambda_1 in two real columns")
    p.set_defaults(func=inspect_model)
    from powerlens.pipeline.steps import STEPS, step_module

    for name in STEPS if only is None else (only,):
        mod = step_module(name)
        doc = (mod.__doc__ or "").strip()
        p = sub.add_parser(name, help=doc.split("\n\n")[0].replace("\n", " "), description=doc,
                           formatter_class=_Formatter)
        add_arguments(p, mod.OPTIONS)
        p.set_defaults(func=functools.partial(run_step, mod))
    return ap


def check_inputs_exist(a: argparse.Namespace, options) -> None:
    """Every input file a step is given exists (a step run by hand from another folder, or before the step
    that writes its input, is told which file is missing, not a FileNotFoundError from inside the step)."""
    for o in options:
        if not o.source.startswith("input:"):
            continue
        value = getattr(a, o.name)
        for p in value if isinstance(value, list) else [value]:
            if p and not os.path.exists(p):
                raise PowerlensError(
                    f"--{o.flag} {p}: no such file (an input of this step, written by an earlier step of the run)",
                    "run the step from the folder the workflow runs in (the one holding results/), after the "
                    "steps before it: `snakemake --cores N <this output> --configfile <config>` makes every input")


def run_step(mod, a: argparse.Namespace) -> None:
    """Run one step from its parsed options, each config-derived flag first checked against its config key's
    rule (a step run by hand is refused as the config would be): the step's function, then its summary."""
    check_flags(a, mod.OPTIONS)
    check_inputs_exist(a, mod.OPTIONS)
    kw = step_kwargs(a, mod.OPTIONS)
    mod.show(mod.STEP(**kw), kw)


def main(argv: list[str] | None = None) -> None:
    from powerlens.pipeline.steps import STEPS

    argv = sys.argv[1:] if argv is None else list(argv)
    try:  # a flag's value refused while parsing (not a number) is a user error too
        a = build_parser(argv[0] if argv and argv[0] in STEPS else None).parse_args(argv)
    except PowerlensError as e:
        print_error(e)
        sys.exit(2)
    quiet_third_party_bars()
    run_guarded(a.func, a)


if __name__ == "__main__":
    main()
