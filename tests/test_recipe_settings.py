"""One list of recipe settings: every variable a recipe reads is in it, so it is checked and recipe.env records it."""

import re

import pytest

from biofairseq.recipe import settings
from biofairseq.samples import REPO

pytestmark = pytest.mark.fast  # make test-fast

NOT_SETTINGS = {"PYTHON", "SLURM_JOB_ID"}  # the interpreter the recipe runs (like the tools it checks for); Slurm's own


def variables_read(script):
    """The upper-case variables a recipe (with the shared stages) reads with a default: ${NAME:-...} or ${NAME-...}."""
    text = (REPO / "recipes" / f"{script}.sh").read_text() + (REPO / "recipes" / "lib" / "stages.sh").read_text()
    return set(re.findall(r"\$\{([A-Z][A-Z0-9_]*):?-", text)) - NOT_SETTINGS


@pytest.mark.parametrize("recipe", settings.RECIPES)
def test_every_variable_a_recipe_reads_is_a_setting_of_it(recipe):
    assert variables_read(recipe) - {s.name for s in settings.of(recipe)} == set()


def test_the_settings_once_missing_from_recipe_env_are_recorded_by_every_recipe():
    for recipe in settings.RECIPES:
        recorded = {s.name for s in settings.of(recipe) if s.recorded}
        assert {"PRECISION", "COMPILE", "PHASE2_TOKENS_PER_SAMPLE"} <= recorded


@pytest.mark.parametrize("name, value, message", [
    ("PHASE2_SHARE", "1.5", "PHASE2_SHARE=1.5: the share of updates at the second length must be below 1 (0: one phase)"),
    ("PHASE2_SHARE", "a", "PHASE2_SHARE=a: not a number"),
    ("PHASE2_TOKENS_PER_SAMPLE", "1024", "PHASE2_TOKENS_PER_SAMPLE=1024: the presets' position table has 512 rows"),
    ("NUM_NODES", "0", "NUM_NODES=0: must be at least 1"),
    ("NUM_GPUS", "two", "NUM_GPUS=two: not a whole number"),
    ("NER_LABELLINGS", "whole-word subtoken", "NER_LABELLINGS=whole-word subtoken: subtoken: unknown; use one of: whole-word sub-token"),
    ("COMPILE", "max", "COMPILE=max: unknown; use one of: none inductor aot_eager"),
])
def test_a_wrong_value_is_named_in_one_line(name, value, message, tmp_path):
    values = good_values("bsc_bio_es", tmp_path)
    settings.check("bsc_bio_es", values)  # the good ones pass
    with pytest.raises(settings.SettingsError) as error:
        settings.check("bsc_bio_es", {**values, name: value})
    assert str(error.value) == message


def test_recipe_env_is_written_once_then_compared(tmp_path, capsys):
    values = good_values("beto", tmp_path)
    settings.keep("beto", values, tmp_path)
    env = (tmp_path / "recipe.env").read_text()
    assert env.startswith("RECIPE=beto\nPRESET=tiny\n") and "CORPUS_LANG=es\n" in env and "RUN_DIR" not in env
    settings.keep("beto", {**values, "NER_EPOCHS": "3"}, tmp_path)
    assert (tmp_path / "recipe.env").read_text() == env  # kept: the finished stages were made with it
    assert "NER_EPOCHS=3, was NER_EPOCHS=10" in capsys.readouterr().err
    assert settings.read(tmp_path)["NER_EPOCHS"] == "10"


def good_values(recipe, run_dir):
    kinds = {settings.whole: "1", settings.positive: "1", settings.number: "0.1", settings.numbers: "1e-3,2e-3",
             settings.share: "0", settings.phase2_length: "512", settings.text: ""}
    values = {s.name: getattr(s.kind, "choices", [kinds.get(s.kind, "")])[0] for s in settings.of(recipe)}
    return {**values, "RUN_DIR": str(run_dir), "PRESET": "tiny", "NER_EPOCHS": "10", "CORPUS_LANG": "es",
            "STOP_AFTER": "none", "FORCE": "0"}
