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
import json
from pathlib import Path

from .archs import PAPER_MODELS, ArchConfig, twin_config
from .errors import PowerlensError

#: The config schema (a file of the repository, beside the rules that validate against it).
SCHEMA = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "config.schema.yaml"


@functools.lru_cache(maxsize=1)
def _schema_defaults() -> dict:
    import yaml

    def walk(node: dict) -> dict:
        out = {}
        for key, sub in (node.get("properties") or {}).items():
            if "properties" in sub:
                out[key] = walk(sub)
            elif "default" in sub:
                out[key] = sub["default"]
        return out

    return walk(yaml.safe_load(SCHEMA.read_text()))


def schema_defaults() -> dict:
    """The schema's defaults as a nested dict (``schema_defaults()["dynamics"]["null_draws"]``): what a config
    that sets nothing gets. A fresh copy each call."""
    return copy.deepcopy(_schema_defaults())


def check_models(config: dict) -> None:
    for q in config.get("quantization", {}).get("models", []):
        m = config["models"].get(q)
        if m is None:
            raise PowerlensError(f"quantization.models names {q!r}, which is not a model of this run",
                                 f"use model keys of this config: {', '.join(config['models'])}")
        if m["source"] in ("random", "gguf"):
            raise PowerlensError(
                f"quantization.models: {q!r} has {'random' if m['source'] == 'random' else 'already quantized'} "
                "weights", "list full-precision trained models (source hf, local or package)")
    for name, m in config["models"].items():
        if m["source"] == "random":
            twin = twin_config(m["twin_of"])
            if twin.arch != m["arch"]:
                raise PowerlensError(
                    f"models.{name}.arch is {m['arch']!r} but twin_of {m['twin_of']!r} is a {twin.arch!r} model",
                    f"set models.{name}.arch: {twin.arch}",
                )
        if m["source"] == "gguf" and m.get("path") and not (Path(m["path"]).expanduser() / m["file"]).is_file():
            raise PowerlensError(
                f"models.{name}: GGUF file {Path(m['path']) / m['file']} does not exist",
                "set `path` to the folder holding the GGUF and `file` to its name")
        if m["source"] == "local" and not Path(m["path"]).expanduser().is_dir():
            raise PowerlensError(
                f"models.{name}.path: directory {m['path']} does not exist",
                "point `path` at a folder made by `model.save_pretrained(...)` (config.json + *.safetensors)",
            )


def _arch_from_config_json(path: Path, arch: str) -> ArchConfig | None:
    cfg = path / "config.json"
    if not cfg.is_file():
        return None
    try:
        kw = json.loads(cfg.read_text())
        return ArchConfig(arch, kw)
    except Exception:
        return None


def model_arch(name: str, m: dict) -> ArchConfig | None:
    """The architecture of a config entry without loading weights (paper table, twin table or config.json);
    None when unknown before the fetch step (e.g. a hub model outside the paper's table)."""
    arch = None
    if m["source"] == "random":
        arch = twin_config(m["twin_of"])
    elif m["source"] == "hf":
        arch = next((a for a in PAPER_MODELS.values() if a.hub_id == m.get("repo_id")), None)
    elif m["source"] == "local":
        arch = _arch_from_config_json(Path(m["path"]).expanduser(), m["arch"])
    elif m["source"] == "gguf":
        from .archs import GGUF_ARCHS

        arch = twin_config(GGUF_ARCHS[m["file"]]) if m.get("file") in GGUF_ARCHS else None
    elif m["source"] == "package":
        import importlib.util

        spec = importlib.util.find_spec(m["package"])
        if spec and spec.submodule_search_locations:
            base = Path(list(spec.submodule_search_locations)[0]) / m.get("subdir", "model")
            arch = _arch_from_config_json(base, m["arch"])
    return arch



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


def check_no_duplicate_keys(path: str | Path) -> None:
    """Refuse a YAML config with a key given twice in one mapping (PyYAML, and so Snakemake, silently keep the
    last one: a second `tiny-bert:` entry would replace the first)."""
    import yaml

    class Strict(yaml.SafeLoader):
        pass

    def mapping(loader, node, deep=False):
        seen = {}
        for k, _ in node.value:
            key = loader.construct_object(k, deep=deep)
            if key in seen:
                raise PowerlensError(
                    f"config file {path}: key {key!r} appears twice in one mapping (lines {seen[key] + 1} and "
                    f"{k.start_mark.line + 1}); YAML would silently keep the last one",
                    "keep one entry per key (rename one of them if both are wanted)")
            seen[key] = k.start_mark.line
        return loader.construct_mapping(node, deep=deep)

    Strict.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    try:
        yaml.load(Path(path).read_text(encoding="utf-8"), Loader=Strict)
    except yaml.YAMLError:
        return  # Snakemake reports malformed YAML itself


def validate_config(config: dict, configfiles: list[str] = ()) -> None:
    """Everything Snakemake checks about a config while it builds the DAG, before any job: no key twice in a
    config file, the schema (Snakemake's ``validate``, which also fills in the schema's defaults), then
    :func:`check_models`. Raises :class:`PowerlensError` (problem + fix) on the first problem."""
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate

    for f in configfiles:
        if Path(f).is_file():
            check_no_duplicate_keys(f)
    try:
        validate(config, schema=str(SCHEMA))
    except WorkflowError as e:
        v = e.__context__  # the jsonschema ValidationError validate() caught
        if not hasattr(v, "absolute_path"):
            raise
        import yaml

        raise schema_error(v, yaml.safe_load(SCHEMA.read_text())) from None
    check_models(config)


def steering_targets(config: dict, name: str) -> list[dict]:
    """A model's steering targets: its own ``steering_targets``, else the run's ``steering.targets``."""
    return config["models"][name].get("steering_targets", config["steering"]["targets"])


def check_targets_on_disk(config: dict, manifest_of) -> list[str]:
    """Check the steering targets of every model whose tokenizer is on disk already (twins, local folders,
    packages, models fetched earlier; ``manifest_of(name)`` is the path of its manifest). Returns the models
    whose targets can only be checked after their fetch (rule check_steering_targets)."""
    from .targets import check_targets, tokenizer_on_disk

    later = []
    for name, m in config["models"].items():
        found = tokenizer_on_disk(m, manifest_of(name))
        if found is None:
            later.append(name)
        else:
            check_targets(name, steering_targets(config, name), *found)
    return later
