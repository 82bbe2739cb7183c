"""Config text is data: it never becomes markup in the report, never leaves its block, and bad values stop
at load with the pipeline's problem + fix (issue: reliability and security, third pass)."""

import json
import math
import os
from pathlib import Path

import pytest
import yaml

from powerlens.core.errors import PowerlensError

from ..conftest import REPO

#: Every character docutils (str.splitlines) breaks a line on besides "\n", and others that hide text.
PROBE_CHARS = ["\u2028", "\u2029", "\x85", "\v", "\f", "\r", "\x1c", "\x1d", "\x1e", "\x00", "\u202e", "\ufeff"]


def patched(**patch):
    """config/test.yaml with values set at slash paths (list indices as numbers)."""
    cfg = yaml.safe_load((REPO / "config/test.yaml").read_text())
    for path, value in patch.items():
        node = cfg
        keys = path.split("/")
        for k in keys[:-1]:
            node = node.setdefault(k, {}) if not k.isdigit() else node[int(k)]
        node[int(keys[-1]) if keys[-1].isdigit() else keys[-1]] = value
    return cfg


def validate(cfg):
    from powerlens.pipeline.config import validate_config

    validate_config(cfg)


@pytest.mark.parametrize("ch", PROBE_CHARS, ids=[f"U+{ord(c):04X}" for c in PROBE_CHARS])
@pytest.mark.parametrize("field", ["description", "models/tiny-gpt2/label", "steering/continuations/prompts/0",
                                   "steering/targets/0/token", "lock_file", "prompts"])
def test_control_and_separator_characters_are_refused_at_load(field, ch):
    cfg = patched(**{field: f"x{ch}.. raw:: html"})
    with pytest.raises(PowerlensError) as e:
        validate(cfg)
    where = field.replace("/0", "[0]").replace("/", ".")
    assert where in e.value.problem and f"U+{ord(ch):04X}" in e.value.problem, e.value.problem
    assert "printable" in e.value.fix


def test_newlines_and_tabs_stay_allowed():
    validate(patched(description="line one\n\tline two\n"))


@pytest.mark.parametrize("field,value", [("steering/kappas", [0, 4, math.nan]), ("dynamics/alpha", math.nan),
                                         ("theory/epsilon", math.nan), ("extraction_check/tol_float32", math.nan),
                                         ("theory/epsilon", math.inf), ("claims/C9_alignment", -math.inf)])
def test_every_number_must_be_finite(field, value):
    """NaN passes every numeric bound of a JSON schema (NaN < min is false): checked before the schema."""
    with pytest.raises(PowerlensError, match="not a finite number") as e:
        validate(patched(**{field: value}))
    assert field.split("/")[-1] in e.value.problem


@pytest.mark.parametrize("field", ["prompts", "lock_file"])
def test_paths_with_angle_brackets_are_refused(field):
    with pytest.raises(PowerlensError, match="holds '<' or '>'"):
        validate(patched(**{field: "a</script><script>x</script>"}))


def test_params_json_escapes_markup_and_reads_back_the_same():
    from powerlens.core.io import params_json

    obj = {"label": "GPT2 </script><script>alert(1)</script> & <img src=x onerror=y>", "n": [1, 2.5]}
    text = params_json(obj)
    assert not set("<>&") & set(text)
    assert json.loads(text) == obj


def test_no_rule_passes_config_text_raw():
    """Every rule gets config text through params_json (or as a number / enum): a json.dumps or a bare config
    string in a rule's params would reach the report's inline script unescaped."""
    import re

    for smk in (REPO / "workflow/rules").glob("*.smk"):
        text = smk.read_text()
        assert "json.dumps(" not in text, smk.name
        for m in re.finditer(r"^\s+(\w+)=config\[([^\n]*)$", text, re.M):
            allowed = ('["lock_file"]',)  # a path: refused at load if it holds < or >
            assert m.group(2).startswith(allowed) or '"' in m.group(2), m.group(0)


def render_front_page(description: str) -> str:
    """The report's front page exactly as Snakemake renders it: Jinja (trim_blocks, lstrip_blocks), then
    docutils' publish_parts, with the DOCUTILSCONFIG the Snakefile sets."""
    import jinja2
    from docutils.core import publish_parts

    cfg = patched(description=description)
    cfg.update({"claims": {"C1_share_layers": 0.5, "C5_consensus_abs_cos": 0.99, "C6_weak_below": 0.5,
                           "C7_share_layers": 0.5, "C9_alignment": 0.9},
                "dynamics": {"null_draws": 2000, "alpha": 0.05, "max_tokens": 32, "norm": "l2", "steps": 40},
                "steering": {"shared_edit": "every_depth"}})

    class Snakemake:
        config = cfg

    text = (REPO / "workflow/report/workflow.rst").read_text()
    old = os.environ.get("DOCUTILSCONFIG")
    os.environ["DOCUTILSCONFIG"] = str(REPO / "workflow/report/docutils.conf")
    try:
        env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
        return publish_parts(env.from_string(text).render(snakemake=Snakemake), writer_name="html",
                             settings_overrides={"report_level": 5})["html_body"]
    finally:
        if old is None:
            os.environ.pop("DOCUTILSCONFIG")
        else:
            os.environ["DOCUTILSCONFIG"] = old


def hostile_descriptions(marker_file: Path) -> dict[str, str]:
    out = {}
    for ch in PROBE_CHARS:
        out[f"U+{ord(ch):04X}"] = (
            f"x{ch}.. raw:: html{ch}{ch}   <img src=x onerror=\"window.__pwned=1\"><script>window.__pwned=2"
            f"</script>{ch}{ch}.. include:: {marker_file}{ch}")
    out["newline"] = (f"x\n\n.. raw:: html\n\n   <script>window.__pwned=3</script>\n\n.. include:: {marker_file}\n")
    return out


def test_front_page_keeps_every_probe_as_text(tmp_path):
    """Even past the load check (the renderer gets the text directly), no probe leaves its literal block:
    no directive is parsed, nothing runs, no file is read."""
    marker = tmp_path / "secret.txt"
    marker.write_text("SECRET-MARKER-8211\n")
    for name, desc in hostile_descriptions(marker).items():
        html = render_front_page(desc)
        assert "<script" not in html and "<img" not in html, name
        assert "SECRET-MARKER-8211" not in html, name
        assert "raw:: html" in html and "include::" in html, name  # shown, as text
        assert "system-message" not in html, name


def test_front_page_without_description():
    html = render_front_page("")
    assert "its description" not in html and "system-message" not in html
