"""Each step's options, declared once (``OPTIONS`` in its module under :mod:`powerlens.pipeline.steps`).

From one declaration come the step's command line (:func:`add_arguments`, ``powerlens <step>``), the keyword arguments
of its function (:func:`step_kwargs`), the Snakemake rule's
shell line (:func:`shell_line`) and its config-derived flags (:func:`config_flags`), and the benchmark's
command lines (:func:`command`). Defaults live in the config schema only: every option is required on the
command line, and the rule passes each from the config path the declaration names.

Where an option's value comes from in a rule (``source``):

``input:<key>`` / ``output:<key>``  the rule's named input or output (several files: ``many=True``)
``config:<dotted.path>``            the validated config (``params.flags``, one string of shell-quoted flags)
``wildcard:<name>``                 a wildcard of the rule
``param:<name>``                    a value the rule computes itself (``params.<name>``: stems, labels, JSON)
``threads``                         the job's threads
"""

from __future__ import annotations

import argparse
import json
import shlex
from dataclasses import dataclass
from typing import Any

from powerlens.core.errors import PowerlensError
from powerlens.core.io import params_json

#: What a flag means wherever a declaration does not say more (every flag of every step has a help text).
GLOSSARY = {
    "--manifest": "manifest.json of the model, written by the fetch step (source, path, sha256 of every file)",
    "--manifests": "manifest.json files of every model of the run (from the fetch step)",
    "--tensors": "weights.safetensors written by the extract step (W_Q, W_K, W_V, W_O, biases, norms, F)",
    "--meta": "weights.json written by the extract step (layer map, d_model, heads, norm placement)",
    "--spectra": "spectra.npz written by the spectra step (eigenvalues, eigenvectors of every unique F)",
    "--prompts": "prompt corpus: a UTF-8 text file, one prompt per line",
    "--out": "file (or file stem, without suffix) to write",
    "--out-npz": ".npz file to write (arrays, loaded without pickle)",
    "--out-csv": "CSV file to write (one row per layer unless the step says otherwise)",
    "--out-json": "JSON file to write (settings, counts and provenance)",
    "--threads": ("CPU threads for BLAS/LAPACK and torch; the round-off depends on it (measured: MiniLM's "
                  "model-mode dynamics at 1 and 2 threads differ in 22 of 38 arrays, in the last digits), so the "
                  "workflow fixes it per rule and records it; the machine's core count does not matter"),
    "--seed": "master seed (random targets, null draws, twins); recorded in the outputs",
    "--device": "where forward passes run: cpu, cuda or auto (eigen-solves always run on the CPU)",
    "--dpi": "resolution of the PNG figures (PDFs are vector)",
    "--labels": "JSON object {model key: display label} for figures and tables",
    "--table": "stem of the table to write (.csv, .md and .tex are written)",
    "--fig": "stem of the figure to write (.pdf and .png are written)",
    "--csv": "input CSV files written by the earlier step (one per model)",
    "--npz": "input .npz files written by the earlier step (matching --csv / --json)",
    "--json": "input JSON files written by the earlier step",
    "--top-k": "number of leading eigenvectors stored per layer (all eigenvalues are stored)",
    "--max-tokens": "truncation length of each prompt in tokens (special tokens included)",
    "--batch-size": "prompts per forward pass",
    "--max-prompts": "use the first N prompts of the corpus",
    "--alpha": "significance level of the verdicts (Monte Carlo p after Holm correction)",
    "--mode": "model: the real forward pass; attention-only: the paper's law, FFN removed",
    "--norm": "normalisation N of the attention-only law: l2 (the paper's analysis) or the layer's layernorm",
    "--dtype": "floating-point type of the attention-only dynamics (statistics are float64 either way)",
    "--null-draws": "R random subspaces of the Monte Carlo null (per model, shared by all layers)",
    "--null-draws-cap": "the most draws a Monte Carlo test is extended to where a verdict can still move",
    "--c4-rare-share": "C4's rare clause: the bound below which the share of random starts ending bipartite must stay",
    "--control": "attention-only: also run the bias-free control (attention biases removed)",
    "--theory": "theory result JSON files (real, complex, bipartite cases)",
    "--steering": "steering.csv files of every model (from the steering step)",
    "--dynamics": "dynamics CSV file(s) of the model(s), from the dynamics step",
    "--case": "synthetic case: real (real leading eigenvalue), complex (complex pair) or bipartite",
    "--epsilon": "size of the perturbation in the synthetic layer",
    "--continuations": "steering_continuations.csv files of every model (from the steering step)",
    "--continuations-table": "stem of table_continuations (.csv, .md, .tex)",
    "--continuation-tokens": "new tokens generated per greedy continuation",
}

_TYPES = {"str": str, "int": int, "float": float, "json": str, "yesno": str, "path": str}


#: The JSON a flag that no config key validates must hold (a rule renders it from the config; by hand it may be
#: anything): the display labels an object of strings, the steering targets a non-empty list of objects.
JSON_SHAPES: dict[str, tuple[str, Any]] = {
    "labels": ("an object of strings ({model key: label})",
               lambda v: isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, str) for k, x in v.items())),
    "targets": ("a non-empty list of objects ([{kind, token?, seed?}, ...])",
                lambda v: isinstance(v, list) and len(v) > 0 and all(isinstance(x, dict) for x in v)),
}


@dataclass(frozen=True)
class Option:
    """One option of a step: ``--<flag>`` on the command line, ``dest`` in the step function's keywords."""

    flag: str  # without the dashes: "batch-size"
    source: str  # where a rule takes the value from (module docstring)
    kind: str = "str"  # str, int, float, path, json (parsed), yesno (-> bool)
    dest: str | None = None  # the step function's keyword (default: the flag with "_")
    help: str | None = None
    choices: tuple[str, ...] | None = None
    many: bool = False  # one or more values (nargs="+"); ``many="*"``: zero or more
    empty_is_none: bool = False  # "" on the command line means None
    keys: tuple[str, ...] = ()  # a JSON option of a config section: only these keys of it (what the step reads)

    @property
    def name(self) -> str:
        return self.flag.replace("-", "_")

    @property
    def keyword(self) -> str:
        return self.dest or self.name

    @property
    def config_key(self) -> str | None:
        """The dotted config key a rule passes this option from (``source`` ``config:<key>``), else None."""
        where, _, key = self.source.partition(":")
        return key if where == "config" else None

    def convert(self, text: str) -> Any:
        """argparse's ``type``: a number flag's word as a number, refused in the project's words (problem and
        fix, the config key's own rule) instead of argparse's bare "invalid int value"."""
        if self.kind not in ("int", "float"):
            return text
        try:
            value = int(text) if self.kind == "int" else float(text)
        except ValueError:
            what = "a whole number" if self.kind == "int" else "a number"
            raise PowerlensError(f"--{self.flag} {text!r}: not {what}", _flag_fix(self)) from None
        if self.flag == "threads" and value < 1:  # never silently one thread: the round-off depends on it
            raise PowerlensError(f"--threads {text!r}: a thread count is at least 1",
                                 "give --threads 1 or more (a workflow rule passes its own `threads:`)")
        return value

    def add_to(self, ap: argparse.ArgumentParser) -> None:
        kw: dict[str, Any] = dict(required=True, help=self.help or GLOSSARY.get(f"--{self.flag}"))
        kw["type"] = self.convert if self.kind in ("int", "float") else _TYPES[self.kind]
        if self.choices:
            kw["choices"] = list(self.choices)
        if self.kind == "yesno":
            kw["choices"] = ["yes", "no"]
        if self.many:
            kw["nargs"] = "*" if self.many == "*" else "+"
        ap.add_argument(f"--{self.flag}", **kw)

    def parse(self, value: Any) -> Any:
        """The step function's value of the flag's word(s): JSON parsed, yes/no as a bool, "" as None where
        declared."""
        if self.kind == "json":
            try:
                parsed = json.loads(value)
            except json.JSONDecodeError as e:
                raise PowerlensError(f"--{self.flag} {str(value)[:80]!r}: not JSON ({e.msg})",
                                     _flag_fix(self)) from None
            shape, holds = JSON_SHAPES.get(self.flag, (None, None))
            if holds is not None and not holds(parsed):
                raise PowerlensError(f"--{self.flag} {str(value)[:80]!r}: not {shape}", _flag_fix(self))
            return parsed
        if self.kind == "yesno":
            return value == "yes"
        if self.empty_is_none and value == "":
            return None
        return value

    def render(self, value: Any) -> list[str]:
        """The command-line words of a value (config values, benchmark command lines)."""
        if self.kind == "json":
            return [f"--{self.flag}", params_json(value)]
        if self.kind == "yesno":
            return [f"--{self.flag}", "yes" if value else "no"]
        if self.many:
            return [f"--{self.flag}", *(repr(float(v)) if self.kind == "float" else str(v) for v in value)]
        return [f"--{self.flag}", "" if value is None else str(value)]


#: The per-model files several steps read, with the keyword each step function takes them as.
MODEL_FILES = {
    "manifest": Option("manifest", "input:manifest", dest="manifest_path"),
    "tensors": Option("tensors", "input:tensors", dest="weights_st"),
    "meta": Option("meta", "input:meta", dest="weights_json"),
    "spectra": Option("spectra", "input:spectra", dest="spectra_npz"),
    "prompts": Option("prompts", "input:prompts", dest="prompts_path"),
}


def _criteria() -> Option:
    from powerlens.analysis.verdict_tests import criteria_keys

    keys = criteria_keys()
    return Option("criteria", "config:claims", kind="json", keys=keys,
                  help=f"JSON of the claims criteria the per-layer readings read (config `claims:`, the keys "
                       f"{', '.join(keys)}): the counts of layers they need decide R0 and where more draws can "
                       "change a verdict")


#: The significance level and the draw cap: options of every step that decides or draws a verdict's tests.
ALPHA = Option("alpha", "config:dynamics.alpha", kind="float")
NULL_DRAWS_CAP = Option("null-draws-cap", "config:dynamics.null_draws_cap", kind="int")
C4_RARE_SHARE = Option("c4-rare-share", "config:claims.C4_rare_share", kind="float")

#: The claims criteria a dynamics run reads (the dynamics and quantization steps): only the keys its readings
#: read, so a rule's params change, and the job reruns, only when one of them does.
CRITERIA = _criteria()


def model_files(*names: str) -> tuple[Option, ...]:
    """The options of the per-model input files ``names`` (:data:`MODEL_FILES`)."""
    return tuple(MODEL_FILES[n] for n in names)


def add_arguments(ap: argparse.ArgumentParser, options: tuple[Option, ...]) -> None:
    for o in options:
        o.add_to(ap)


def step_kwargs(a: argparse.Namespace, options: tuple[Option, ...]) -> dict[str, Any]:
    """The step function's keyword arguments from parsed options."""
    return {o.keyword: o.parse(getattr(a, o.name)) for o in options}


def schema_node(key: str) -> dict:
    """The config schema's node of a dotted config key (``dynamics.null_draws``): the one declaration of its
    type, bounds and description, which both the config and the step's flag are checked against."""
    from powerlens.pipeline.config import schema

    node = schema()
    for k in key.split("."):
        node = node["properties"][k]
    return node


def _flag_fix(o: Option) -> str:
    """The fix of a refused flag: what its config key allows (the schema's description) and where it is set."""
    key = o.config_key
    if key is None:
        return f"give --{o.flag} {o.help or GLOSSARY.get(f'--{o.flag}', 'a valid value')}"
    node = schema_node(key)
    words = {"minimum": "at least", "exclusiveMinimum": "above", "maximum": "at most", "exclusiveMaximum": "below"}
    bounds = ", ".join(f"{w} {node[b]}" for b, w in words.items() if b in node)
    choices = f"one of {', '.join(map(str, node['enum']))}" if "enum" in node else ""
    allowed = "; ".join(x for x in (choices, bounds) if x)
    desc = " ".join(str(node.get("description", "")).split())
    return (f"give --{o.flag} a value the config key `{key}` allows{' (' + allowed + ')' if allowed else ''}: "
            f"{desc} (workflow/schemas/config.schema.yaml); a run passes it from the config")


def check_flag(o: Option, value: Any) -> None:
    """Refuse a config-derived flag's value (parsed, as the config would hold it) that its config key's schema
    rule refuses: finite numbers and printable text (:func:`check_config_values`), then the key's JSON schema
    node, so ``--seed -5`` fails as ``seed: -5`` does, with the flag named."""
    import jsonschema

    from powerlens.pipeline.config import schema
    from powerlens.pipeline.config_text import check_config_values

    key = o.config_key
    if o.keys:  # part of a section: exactly these keys, each checked against its own rule
        if not isinstance(value, dict) or set(value) != set(o.keys):
            got = sorted(value) if isinstance(value, dict) else type(value).__name__
            raise PowerlensError(f"--{o.flag}: holds {got}, not the keys {sorted(o.keys)} of config `{key}:`",
                                 _flag_fix(o))
        for k in o.keys:
            check_flag(Option(o.flag, f"config:{key}.{k}", kind=o.kind), value[k])
        return
    try:
        check_config_values(value, key)
    except PowerlensError as e:
        raise PowerlensError(e.problem.replace(f"config value {key}", f"--{o.flag} (config key {key})", 1),
                             _flag_fix(o)) from None
    sub = {"$defs": schema().get("$defs", {}), **schema_node(key)}
    errors = sorted(jsonschema.Draft202012Validator(sub).iter_errors(value), key=lambda e: list(e.absolute_path))
    if errors:
        err = errors[0]
        at = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path)
        msg = err.message if len(err.message) <= 300 else err.message[:300] + "..."  # a long list, not all of it
        raise PowerlensError(f"--{o.flag}{at}: {msg} (the rule of the config key {key}{at})", _flag_fix(o))


def check_flags(a: argparse.Namespace, options: tuple[Option, ...]) -> None:
    """Check every config-derived flag of a step against its config key's rule (:func:`check_flag`), then the
    config's rules across keys of the theory section (tokens x d, heads dividing d): a step run by hand is
    refused as the config would be, before any work, never with a traceback from deep inside the step."""
    given: dict[str, Any] = {}
    for o in options:
        if o.config_key is None:
            continue
        value = o.parse(getattr(a, o.name))
        if value is None:
            continue
        check_flag(o, value)
        section, _, k = o.config_key.rpartition(".")
        given.setdefault(section, {})[k] = value
    if "theory" in given:
        from powerlens.pipeline.config import check_theory

        check_theory({"theory": given["theory"]})


def config_value(config: dict, path: str, keys: tuple[str, ...] = ()) -> Any:
    """The config's value at the dotted ``path``; with ``keys``, only those keys of it (a step that reads part of
    a section receives that part, so its params, and with them its rerun, follow only what it reads)."""
    v: Any = config
    for k in path.split("."):
        v = v[k]
    return {k: v[k] for k in keys} if keys else v


def option_value(o: Option, config: dict) -> Any:
    """The value a rule passes for the config-derived option ``o``."""
    return config_value(config, o.config_key, o.keys)


def config_flags(options: tuple[Option, ...], config: dict) -> str:
    """The flags a rule passes from the config, shell-quoted, as one string (``params.flags``)."""
    words = []
    for o in options:
        if o.source.startswith("config:"):
            words += o.render(option_value(o, config))
    return " ".join(shlex.quote(w) for w in words)


def shell_line(step: str, options: tuple[Option, ...]) -> str:
    """A rule's shell line: ``python -m powerlens <step>`` (the interpreter is ``params.py``), every input,
    output, wildcard, param and thread count where the declaration says, then ``params.flags``, the log last."""
    words = [f"{{params.py:q}} -m powerlens {step}"]
    for o in options:
        where, _, key = o.source.partition(":")
        fmt = {"input": f"{{input.{key}:q}}", "output": f"{{output.{key}:q}}", "wildcard": f"{{wildcards.{key}:q}}",
               "param": f"{{params.{key}:q}}", "threads": "{threads}"}.get(where)
        if fmt is not None:
            words.append(f"--{o.flag} {fmt}")
    if any(o.source.startswith("config:") for o in options):
        words.append("{params.flags}")
    return " ".join(words) + " > {log:q} 2>&1"


def command(step: str, options: tuple[Option, ...], values: dict[str, Any], config: dict,
            python: str = "python") -> list[str]:
    """A step's command line outside Snakemake (the benchmark), the rule's own (``python -m powerlens <step>``):
    ``values`` by flag for inputs, outputs, wildcards, params and threads; the config-derived flags from
    ``config``."""
    words = [python, "-m", "powerlens", step]
    for o in options:
        if o.source.startswith("config:"):
            words += o.render(option_value(o, config))
        else:
            v = values[o.flag]
            words += [f"--{o.flag}", *map(str, v)] if o.many else [f"--{o.flag}", str(v)]
    return words


def show_table(result, kw: dict) -> None:
    """The summary of a step whose result is a table (a DataFrame): the table itself, printed whole."""
    print(result.to_string(index=False))
