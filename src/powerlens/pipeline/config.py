"""Config checks beyond the JSON schema, schema errors in words, and each entry's architecture known before
its fetch (:func:`model_arch`, which the resource requests size from), all used when Snakemake builds the DAG.

The schema (``workflow/schemas/config.schema.yaml``) catches unknown keys, wrong types and bad enum values;
:func:`check_models` adds the cross-field rules a schema cannot express well (a twin's ``arch`` must match
the architecture it copies; a local path must exist). Both run at DAG construction, before any job.

Every parameter's default lives in the schema and nowhere else: the pipeline's steps take all their options
as required arguments, and the Python API and the benchmark read theirs with :func:`schema_defaults`.
"""

from __future__ import annotations

import copy
import functools
import importlib.resources
import shlex
import sys
from pathlib import Path

from powerlens.core.errors import PowerlensError
from powerlens.models.adapters import ADAPTERS
from powerlens.models.archs import ArchConfig
from powerlens.models.sources import SOURCES, is_control, random_weights, steered
from powerlens.pipeline.config_text import check_config_values, check_no_duplicate_keys
from powerlens.pipeline.targets import check_targets, tokenizer_on_disk

#: The config schema, package data read through importlib.resources (the workflow's
#: workflow/schemas/config.schema.yaml links to it), so an installed powerlens finds it without a checkout.
SCHEMA = importlib.resources.files("powerlens.pipeline") / "config.schema.yaml"


@functools.lru_cache(maxsize=1)
def schema() -> dict:
    """The config schema, parsed once per process (libyaml's loader where installed): read, never changed."""
    import yaml

    return yaml.load(SCHEMA.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _schema_defaults() -> dict:

    def walk(node: dict) -> dict:
        out = {}
        for key, sub in (node.get("properties") or {}).items():
            if "properties" in sub:
                out[key] = walk(sub)
            elif "default" in sub:
                out[key] = sub["default"]
        return out

    return walk(schema())


def schema_defaults() -> dict:
    """The schema's defaults as a nested dict (``schema_defaults()["dynamics"]["null_draws"]``): what a config
    that sets nothing gets. A fresh copy each call."""
    return copy.deepcopy(_schema_defaults())


def check_registered(config: dict) -> None:
    """Each model's ``arch`` names an adapter, then its source's own checks (a twin's ``twin_of`` a known
    configuration of that architecture, a local folder or a GGUF file that exists): the registries
    (``ADAPTERS``, ``ALL_TWINS``, ``SOURCES``) are the one list of each, so adding one edits no schema."""
    for name, m in config["models"].items():
        if m["arch"] not in ADAPTERS:
            raise PowerlensError(f"config value models.{name}.arch: {m['arch']!r} is not a supported architecture",
                                 f"set `arch` to one of: {', '.join(sorted(ADAPTERS))}")
        SOURCES[m["source"]].check(name, m)


def check_labels(config: dict) -> None:
    """No two models show the same name (a label defaults to the model's key): their rows and panels would be
    indistinguishable in every table and figure."""
    seen: dict[str, str] = {}
    for name, m in config["models"].items():
        label = str(m.get("label", name)).strip()
        if label.casefold() in seen:
            raise PowerlensError(
                f"models.{name}: its label {label!r} is also the label of models.{seen[label.casefold()]} (a label "
                "defaults to the model's key)", f"give models.{name} a `label` of its own")
        seen[label.casefold()] = name


#: Largest tokens x d of a theory state: one law step's Jacobian has (tokens d)^2 entries. Measured at 2048
#: (d 64, 32 tokens, 8 heads, one thread): 460 MB peak and about 33 s per cell of the C4 sweep.
THEORY_STATE_MAX = 2048


def check_theory(config: dict) -> None:
    """Sizes of the theory checks that the schema's bounds cannot see alone (products, divisibility)."""
    th = config.get("theory", {})
    n, d = th.get("tokens", 16), th.get("d", 32)
    widest = max([d, *th.get("c4_sizes", [])])
    if n * widest > THEORY_STATE_MAX:
        raise PowerlensError(
            f"theory: tokens {n} x d {widest} = {n * widest} is more than {THEORY_STATE_MAX} (one law step's "
            f"Jacobian has (tokens d)^2 entries: at {THEORY_STATE_MAX}, 460 MB and about 33 s per C4 cell)",
            "lower theory.tokens, theory.d or the largest of theory.c4_sizes")
    if d % th.get("heads", 4):
        raise PowerlensError(f"theory: d {d} is not a multiple of heads {th.get('heads', 4)}",
                             "choose heads that divide d (each head has d / heads dimensions)")


def check_draws(config: dict) -> None:
    """The draw cap is at least the first draws (a test is never cut below R0)."""
    dyn = config.get("dynamics", {})
    r0, cap = dyn.get("null_draws"), dyn.get("null_draws_cap")
    if r0 is not None and cap is not None and cap < r0:
        raise PowerlensError(f"dynamics: null_draws_cap {cap} is below null_draws {r0}",
                             "set dynamics.null_draws_cap to at least dynamics.null_draws (the cap bounds the "
                             "extension of a test that starts at null_draws draws)")


CONTROL_SUFFIX = "-control"  # a derived matched control's key: <trained model's key>-control, -control-2, ...


def control_key(name: str, i: int) -> str:
    """The key of trained model ``name``'s i-th matched control (0-based): ``<name>-control``, then
    ``<name>-control-2``, ``-3``, ..."""
    return f"{name}{CONTROL_SUFFIX}" + (f"-{i + 1}" if i else "")


def add_matched_controls(config: dict) -> None:
    """With ``matched_controls`` (the schema's default: on), give every trained model of the run its
    ``control_seeds`` matched controls (paper.md section 4e: ``source: control``), keyed by :func:`control_key`,
    seeds ``seed``, ``seed + 1``, ..., labelled "<label> matched control (seed s)", unless the config lists one
    for it already. Done once, while the DAG is built, so every rule, table and figure sees the controls as
    models of the run."""
    if not config.get("matched_controls", True):
        return
    models = config["models"]
    have = {m.get("control_of") for m in models.values() if is_control(m)}
    base = int(config.get("seed", 0))
    for name, m in list(models.items()):
        if random_weights(m) or name in have:  # a twin's folder given as `source: local` too (its marker)
            continue
        for i in range(int(config["control_seeds"])):
            key, seed = control_key(name, i), (base + i) % 2 ** 32
            if key in models:
                raise PowerlensError(f"models.{key}: this key is taken, but it is the name of {name!r}'s matched "
                                     "control", f"rename models.{key}, or set matched_controls: false")
            models[key] = {"arch": m["arch"], "source": "control", "control_of": name, "seed": seed,
                           "label": f"{m.get('label', name)} matched control (seed {seed})"}


def check_controls(config: dict) -> None:
    """A matched control names a trained model of the same run and architecture."""
    models = config["models"]
    for name, m in models.items():
        if not is_control(m):
            continue
        of = models.get(m.get("control_of"))
        if of is None:
            raise PowerlensError(f"models.{name}.control_of: {m.get('control_of')!r} is not a model of this run",
                                 f"set control_of to one of: {', '.join(k for k in models if k != name)}")
        if random_weights(of):
            raise PowerlensError(f"models.{name}.control_of: {m['control_of']!r} has random weights; a matched "
                                 "control stands beside a trained model", "name a model with trained weights")
        if of["arch"] != m["arch"]:
            raise PowerlensError(f"models.{name}.arch is {m['arch']!r} but {m['control_of']!r} is {of['arch']!r}",
                                 f"set models.{name}.arch: {of['arch']}")


def check_models(config: dict) -> None:
    check_registered(config)
    check_controls(config)
    check_labels(config)
    check_theory(config)
    for q in config.get("quantization", {}).get("models", []):
        m = config["models"].get(q)
        if m is None:
            raise PowerlensError(f"quantization.models names {q!r}, which is not a model of this run",
                                 f"use model keys of this config: {', '.join(config['models'])}")
        src = SOURCES[m["source"]]
        if not src.full_precision or random_weights(m):
            raise PowerlensError(
                f"quantization.models: {q!r} has {'random' if random_weights(m) else 'already quantized'} "
                "weights", "list full-precision trained models (source " +
                ", ".join(k for k, v in SOURCES.items() if v.full_precision) + ")")


def model_arch(name: str, m: dict, models: dict | None = None) -> ArchConfig | None:
    """The architecture of a config entry without loading weights (paper table, twin table or config.json: its
    source's ``arch``; ``models``: the run's entries, where a matched control finds its trained model's); None
    when unknown before the fetch step (e.g. a hub model outside the paper's table)."""
    return SOURCES[m["source"]].arch(m, models or {})


def _description(root: dict | None, schema_path) -> str:
    """The description nearest to the failing keyword along the schema path (following $refs)."""
    if root is None:
        return ""
    node, found = root, ""
    for seg in list(schema_path)[:-1]:
        while isinstance(node, dict) and "$ref" in node and seg not in node:
            ref = node["$ref"].lstrip("#/").split("/")
            node = root
            for r in ref:
                node = node[r]
        try:
            node = node[seg]
        except (KeyError, IndexError, TypeError):
            break
        if isinstance(node, dict) and node.get("description"):
            found = node["description"]
    return " ".join(str(found).split())


def schema_error(err, root: dict | None = None) -> PowerlensError:
    """A jsonschema ValidationError as the project's problem + fix: where in the config, what is wrong, and
    what the schema says the value means (the nearest description; ``root`` is the whole schema), instead
    of a dump of the schema."""
    where = ".".join(str(p) for p in err.absolute_path) or "(top level)"
    problem = f"config value {where}: {err.message}"
    if err.validator == "maxLength" and isinstance(err.instance, str):  # the problem names the size, not the text
        problem = f"config value {where}: {len(err.instance)} characters, more than the {err.validator_value} allowed"
    if err.validator == "not" and isinstance(err.validator_value, dict) and "enum" in err.validator_value:
        return PowerlensError(
            f"config value {where}: the name {err.instance!r} is reserved for an output of the run "
            f"({', '.join(map(str, err.validator_value['enum']))})", "choose another name")
    if err.validator == "additionalProperties":
        allowed = sorted((err.schema.get("properties") or {}).keys())
        fix = (f"remove or correct the key; allowed here: {', '.join(allowed)}" if allowed else
               "remove the key")
    elif err.validator == "required":
        missing = [k for k in err.validator_value if isinstance(err.instance, dict) and k not in err.instance]
        fix = (f"add `{missing[0]}:` under {where} (workflow/schemas/config.schema.yaml)"
               if missing else "see workflow/schemas/config.schema.yaml")
    elif err.validator in ("oneOf", "anyOf") and err.context:
        best = min(err.context, key=lambda e: len(list(e.absolute_path)))
        fix = f"{best.message}; see workflow/schemas/config.schema.yaml"
    else:
        desc = " ".join(str(err.schema.get("description", "")).split()) or _description(
            root, err.absolute_schema_path)
        fix = ((desc + " " if desc else "") + "(workflow/schemas/config.schema.yaml)").strip()
    return PowerlensError(problem, fix)


def check_options(section: str, **values) -> None:
    """Check options given outside a config file (the Python API) against the config schema's own rules for
    ``section`` (``"dynamics"``, ``"steering"``, ``"spectra"``, or ``""`` for top-level keys such as
    ``seed``), with the pipeline's wording: one validation for the API and the pipeline. ``None`` values are
    skipped (they take the schema's default)."""
    import jsonschema

    root = schema()
    node = root["properties"][section] if section else root
    given = {k: v for k, v in values.items() if v is not None}
    for k in given:
        if k not in node["properties"]:
            raise PowerlensError(f"unknown option {k!r}", f"options of {section or 'the config'}: "
                                 f"{', '.join(sorted(node['properties']))}")
    check_config_values(given, section)
    sub = {"$defs": root.get("$defs", {}), "type": "object",
           "properties": {k: node["properties"][k] for k in given}}
    err = next(iter(sorted(jsonschema.Draft202012Validator(sub).iter_errors(given), key=lambda e: e.path)), None)
    if err is not None:
        e = schema_error(err, sub)
        where = f"{section}.{'.'.join(map(str, err.absolute_path))}" if section else ".".join(
            map(str, err.absolute_path))
        raise PowerlensError(e.problem.replace(f"config value {'.'.join(map(str, err.absolute_path))}",
                                               f"option {where}", 1), e.fix)


def check_model_entry(name: str, entry) -> None:
    """One model entry given outside a config file (``powerlens fetch_model --entry``) checked as the config's
    ``models.<name>`` would be: finite numbers and printable text, then the schema's model entry (required keys
    per source, types, bounds): a step run by hand is refused as the config would be, never a KeyError."""
    import jsonschema

    if not isinstance(entry, dict):
        raise PowerlensError(f"model entry {name!r} is a {type(entry).__name__}, not a mapping of keys",
                             "give the model's config entry as a JSON object, e.g. "
                             '{"arch": "gpt2", "source": "random", "twin_of": "tiny-gpt2"}')
    check_config_values({"models": {name: entry}})
    root = schema()
    sub = {"$defs": root.get("$defs", {}), "type": "object", "properties": {"models": root["properties"]["models"]}}
    err = next(iter(sorted(jsonschema.Draft202012Validator(sub).iter_errors({"models": {name: entry}}),
                           key=lambda e: list(e.path))), None)
    if err is not None:
        raise schema_error(err, sub)


def check_paths(config: dict) -> None:
    """File and folder paths of the config hold no ``<`` or ``>``: a path reaches Snakemake's report as it is
    (a rule's input, the fetch step's ``--lock``), inside an inline script, where ``</script>`` would end it.
    Every other config text reaches the steps as :func:`powerlens.core.io.params_json`, which escapes them."""
    paths = [("prompts", config.get("prompts")), ("lock_file", config.get("lock_file"))]
    for name, m in (config.get("models") or {}).items():
        if isinstance(m, dict):
            paths += [(f"models.{name}.{k}", m.get(k)) for k in ("path", "subdir")]
    for where, p in paths:
        if isinstance(p, str) and ("<" in p or ">" in p):
            raise PowerlensError(f"config value {where}: the path {p!r} holds '<' or '>'",
                                 "rename the file or folder (or link it under a plain name) and give that path")


OUTPUT_FOLDERS = ("results", "paper_tables", "figures", "logs", "benchmarks")


def looks_like_output(path: str) -> str | None:
    """Why a file given to --configfile looks like one of the workflow's outputs rather than a config (None if
    it does not): it lies in an output folder, has an output's suffix, or holds no config key at its top."""
    import yaml

    p = Path(path)
    if p.suffix.lower() not in (".yaml", ".yml", ".json"):
        return f"its suffix {p.suffix or '(none)'} is not a config's (.yaml, .yml, .json)"
    try:
        top = p.resolve().relative_to(Path.cwd().resolve()).parts[0]
    except (ValueError, IndexError):
        top = None
    if top in OUTPUT_FOLDERS:
        return f"it lies in the output folder {top}/"
    try:
        doc = yaml.safe_load(p.read_text(encoding="utf-8"))
    except Exception:
        return None  # not readable as YAML: Snakemake has said so already
    keys = set(schema()["properties"])
    if isinstance(doc, dict) and doc and not (set(doc) & keys):
        return f"none of its keys ({', '.join(sorted(map(str, doc))[:6])}) is a config key"
    return None


def check_configfiles_are_configs(configfiles, argv: list[str] | None = None) -> None:
    """Snakemake reads every argument after --configfile as a config file, so a target written after it (a
    common slip) arrives here as a config. Stop with the corrected command line."""
    bad = [(f, why) for f in configfiles if Path(f).is_file() and (why := looks_like_output(f))]
    if not bad:
        return
    argv = list(sys.argv if argv is None else argv)
    args = argv[argv.index("snakemake") + 1:] if "snakemake" in argv else argv[1:]
    files = {Path(f).resolve() for f, _ in bad}
    given = [a for a in args if not a.startswith("-") and Path(a).resolve() in files]
    rest = [a for a in args if a not in given]
    fixed = shlex.join(["snakemake", *given, *rest])
    f, why = bad[0]
    f = next((a for a in given if Path(a).resolve() == Path(f).resolve()), f)
    raise PowerlensError(f"--configfile {f}: this looks like an output file, not a config ({why}); put targets "
                         "before --configfile (every argument after it is read as a config file)",
                         f"run: {fixed}")


def validate_config(config: dict, configfiles: list[str] = ()) -> None:
    """Everything Snakemake checks about a config while it builds the DAG, before any job: no key twice in a
    config file, finite numbers and printable text (:func:`check_config_values`), the schema (Snakemake's
    ``validate``, which also fills in the schema's defaults), then :func:`check_models`. Raises
    :class:`PowerlensError` (problem + fix) on the first problem."""
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate

    check_configfiles_are_configs(configfiles)
    for f in configfiles:
        if Path(f).is_file():
            check_no_duplicate_keys(f)
    check_config_values(config)
    try:
        with importlib.resources.as_file(SCHEMA) as path:  # the file itself in a normal install
            validate(config, schema=str(path))
    except WorkflowError as e:
        v = e.__context__  # the jsonschema ValidationError validate() caught
        if not hasattr(v, "absolute_path"):
            raise

        raise schema_error(v, schema()) from None
    check_paths(config)
    check_draws(config)
    add_matched_controls(config)
    check_models(config)


def steering_targets(config: dict, name: str) -> list[dict]:
    """A model's steering targets: its own ``steering_targets``, else the run's ``steering.targets``."""
    return config["models"][name].get("steering_targets", config["steering"]["targets"])


def check_targets_on_disk(config: dict, manifest_of) -> list[str]:
    """Check the steering targets of every model whose tokenizer is on disk already (twins, local folders,
    packages, models fetched earlier; ``manifest_of(name)`` is the path of its manifest). Returns the models
    whose targets can only be known from their fetch (rule steering_targets), decided from the config
    entry alone: the same list before and after the fetch."""
    later = []
    for name, m in config["models"].items():
        if not steered(m):  # no steering in its chain: no target to check
            continue
        found = tokenizer_on_disk(m, None)
        if found is None:
            # known only after the fetch: these go through steering_targets on every run, fetched or not,
            # so that extraction's inputs never change between a first run and a rerun (which would redo it)
            later.append(name)
            found = tokenizer_on_disk(None, manifest_of(name))
        if found is not None:
            check_targets(name, steering_targets(config, name), *found)
    return later
