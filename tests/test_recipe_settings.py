"""One list of recipe settings: every variable a recipe reads is in it, so it is checked and recipe.env records it."""

import os
import re
import subprocess

import pytest

from biofairseq.recipe import settings
from biofairseq.samples import BIN, REPO

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


# a wrong value of every setting: each recipe is run with it (below) and must stop in one line before any work
WRONG = {
    "RUN_DIR": "a-file", "STOP_AFTER": "pretrain", "FORCE": "yes", "NUM_GPUS": "all", "NUM_NODES": "0", "WORKERS": "0",
    "NER_GPU": "first", "DISTRIBUTED_PORT": "80", "BATCH_PER_DEVICE": "0", "PHASE2_BATCH_PER_DEVICE": "-1",
    "LOG_INTERVAL": "0", "PRESET": "huge", "SOURCES": "cases=missing.jsonl", "NER_DATA": "pharmaconer=missing",
    "VALID_DOCS": "0", "VOCAB_SIZE": "100", "SHARD_MB": "1e2", "INIT_FROM": "missing-model", "ARCH": "bio_roberta_tyni",
    "TOKENS_PER_SAMPLE": "1024", "SEQUENCES_PER_UPDATE": "0", "PEAK_LR": "0", "WARMUP_UPDATES": "1e3", "MAX_UPDATE": "0",
    "SAVE_INTERVAL_UPDATES": "0", "PHASE2_SHARE": "1", "PHASE2_TOKENS_PER_SAMPLE": "1024", "PHASE2_SEQUENCES_PER_UPDATE": "0",
    "FAST_PATH": "yes", "PRECISION": "fp8", "COMPILE": "max", "WEIGHT_DECAY_EXCLUDE": "bias", "NER_LRS": "5e-5;1e-4",
    "NER_SEEDS": "1.5", "NER_EPOCHS": "0", "NER_MAX_LENGTH": "1024", "NER_BATCH": "0", "NER_ACCUMULATION": "0",
    "NER_WARMUP_RATIO": "1", "NER_LAYERWISE_DECAY": "0", "NER_LABELLINGS": "subtoken", "NER_EXTRA": "--learning-rate 1e-3",
    "BASELINE": "random", "WEAK_PRETRAINING": "ignore", "CLIP_NORM": "-1", "CORPUS_LANG": "spanish", "VOCAB_TYPE": "wordpiece",
    "EMBEDDING_SHARING": "shared", "MASK_PROB": "15", "SAMPLING_TEMPERATURE": "0", "SAMPLING_TEMPERATURE_FINAL": "-1",
    "GENERATOR_FRACTION": "1.5", "VOCAB_SIZES": "30k",
    "CHECKPOINT_ACTIVATIONS": "true", "BASE_ARCH": "roberta_base", "LARGE_ARCH": "bio_roberta_huge", "BASE_LR": "6e-4x",
    "LARGE_LR": "4", "LARGE_MAX_UPDATE": "0", "DISTIL_UPDATES": "0", "DISTIL_LR": "0", "DISTIL_WARMUP_UPDATES": "x",
    "ALPHA_MLM": "-1", "ALPHA_KL": "a", "TEMPERATURE": "0", "ALPHA_COS": "-0.5", "WEIGHT_DECAY": "-1e-5",
}
WRONG_FOR = {
    ("bioelectra", "ARCH"): "bio_roberta_tiny",  # a shape, but not an ELECTRA one
    ("modernbert", "ARCH"): "bio_roberta_tiny",  # nor a ModernBERT one
    # ModernBERT's context is 8,192 tokens, not the other presets' 512 positions
    ("modernbert", "TOKENS_PER_SAMPLE"): "9000", ("modernbert", "PHASE2_TOKENS_PER_SAMPLE"): "9000",
    ("modernbert", "NER_MAX_LENGTH"): "9000",
}
FIXES = ("give", "use", "must", "choose", "fix", "set", "see", "remove", "write")


def test_every_setting_has_a_wrong_value_in_the_table():
    assert {s.name for s in settings.SETTINGS} == set(WRONG)


@pytest.mark.parametrize("recipe, name", [(r, s.name) for r in settings.RECIPES for s in settings.of(r)])
def test_a_wrong_value_of_any_setting_stops_the_recipe_in_one_line_before_any_work(recipe, name, tmp_path):
    value = WRONG_FOR.get((recipe, name), WRONG[name])
    (tmp_path / "a-file").write_text("not a folder\n")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PYTHON": str(BIN / "python"), "NUM_GPUS": "0",
           name: value}
    proc = subprocess.run(["bash", str(REPO / "recipes" / f"{recipe}.sh")], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"{recipe}.sh: error: {name}={value}") and any(fix in lines[0] for fix in FIXES), lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]  # no run folder


@pytest.mark.parametrize("name, value, message", [
    ("PHASE2_SHARE", "1.5", "PHASE2_SHARE=1.5: the share of updates at the second length must be below 1 (0: one phase)"),
    ("PHASE2_SHARE", "a", "PHASE2_SHARE=a: not a number; give one, as 0.1 or 1e-3"),
    ("PHASE2_TOKENS_PER_SAMPLE", "1024", "PHASE2_TOKENS_PER_SAMPLE=1024: the presets' position table has 512 rows"),
    ("NUM_NODES", "0", "NUM_NODES=0: must be at least 1"),
    ("NUM_GPUS", "two", "NUM_GPUS=two: not a whole number; give one, as 10"),
    ("MAX_UPDATE", "1e5", "MAX_UPDATE=1e5: write it in digits, as 100000"),
    ("NER_EXTRA", "--epoch 5", "NER_EXTRA=--epoch 5: sets --epochs, which the recipe gives from NER_EPOCHS; set NER_EPOCHS instead"),
    ("NER_EXTRA", "--output-dir elsewhere", "NER_EXTRA=--output-dir elsewhere: sets --output-dir, which the recipe gives from RUN_DIR; set RUN_DIR instead"),
    ("WARMUP_UPDATES", "700", "WARMUP_UPDATES=700: must be at most MAX_UPDATE (MAX_UPDATE=600)"),
    ("SHARD_MB", "0.001", "SHARD_MB=0.001: shards must hold at least 0.01 MB (0: one data-bin)"),
    ("NER_LABELLINGS", "whole-word subtoken", "NER_LABELLINGS=whole-word subtoken: subtoken: unknown; use one of: whole-word sub-token"),
    ("COMPILE", "max", "COMPILE=max: unknown; use one of: none inductor aot_eager"),
])
def test_a_wrong_value_is_named_in_one_line(name, value, message, tmp_path):
    values = good_values("bsc_bio_es", tmp_path)
    settings.check("bsc_bio_es", values)  # the good ones pass
    with pytest.raises(settings.SettingsError) as error:
        settings.check("bsc_bio_es", {**values, name: value})
    assert str(error.value) == message


def test_a_generator_fraction_that_leaves_the_generator_a_broken_head_is_named_before_any_work(tmp_path):
    """768 x 0.3 is 230 wide: 3 heads of 64 do not divide it (the model would refuse it after the corpus stages)."""
    values = {**good_values("bioelectra", tmp_path), "ARCH": "electra_base"}
    settings.check("bioelectra", {**values, "GENERATOR_FRACTION": "0.25"})
    settings.check("bioelectra", {**values, "GENERATOR_FRACTION": ""})  # ARCH's own
    with pytest.raises(settings.SettingsError) as error:
        settings.check("bioelectra", {**values, "GENERATOR_FRACTION": "0.3"})
    assert str(error.value) == ("GENERATOR_FRACTION=0.3: must be a share of ARCH's width that gives its generator whole "
                                "heads of 64 (or under 128 wide), as 0.25 (ARCH=electra_base)")


def test_recipe_env_is_written_once_then_a_change_is_taken_only_before_its_stage_ran(tmp_path, capsys):
    values = good_values("beto", tmp_path)
    settings.keep("beto", values, tmp_path)
    env = (tmp_path / "recipe.env").read_text()
    assert env.startswith("RECIPE=beto\nPRESET=tiny\n") and "CORPUS_LANG=es\n" in env and "RUN_DIR" not in env
    assert "SAVE_INTERVAL_UPDATES=1\n" in env  # which checkpoints KEEP=best chooses from
    settings.keep("beto", {**values, "NER_EPOCHS": "3"}, tmp_path)  # no NER run yet
    assert "NER_EPOCHS=3 (was 10)" in capsys.readouterr().err and settings.read(tmp_path)["NER_EPOCHS"] == "3"
    (tmp_path / "ner" / "pharmaconer" / "model=beto").mkdir(parents=True)
    with pytest.raises(settings.SettingsError, match=r"NER_EPOCHS=4, but stage 7 \(fine-tune on NER\) already made"):
        settings.keep("beto", {**values, "NER_EPOCHS": "4"}, tmp_path)
    assert settings.read(tmp_path)["NER_EPOCHS"] == "3" and len(settings.changes_of(tmp_path)) == 1


def good_values(recipe, run_dir):
    values = {s.name: getattr(s.kind, "choices", ["1"])[0] for s in settings.of(recipe)}
    return {**values, "RUN_DIR": str(run_dir), "PRESET": "tiny", "NER_EPOCHS": "10", "CORPUS_LANG": "es", "SOURCES": "",
            "NER_DATA": "", "STOP_AFTER": "none", "FORCE": "0", "NUM_GPUS": "", "NER_GPU": "", "DISTRIBUTED_PORT": "",
            "INIT_FROM": "", "ARCH": "bio_roberta_tiny", "VOCAB_SIZE": "8000", "TOKENS_PER_SAMPLE": "128",
            "PHASE2_TOKENS_PER_SAMPLE": "512", "NER_MAX_LENGTH": "128", "NER_EXTRA": "", "NER_LRS": "1e-3", "PEAK_LR": "1e-3",
            "PHASE2_SHARE": "0", "SHARD_MB": "0", "NER_LABELLINGS": "", "NER_WARMUP_RATIO": "0.1", "MASK_PROB": "0.15",
            "VOCAB_SIZES": "8000", "BASE_ARCH": "bio_roberta_tiny", "LARGE_ARCH": "bio_roberta_small", "MAX_UPDATE": "600"}


def test_a_run_dir_inside_a_file_is_named_in_one_line(tmp_path):
    (tmp_path / "afile").write_text("")
    with pytest.raises(settings.SettingsError, match=r"RUN_DIR=.*/afile/sub: .*/afile is a file, not a folder; choose another RUN_DIR"):
        settings.check("bsc_bio_es", {**good_values("bsc_bio_es", tmp_path), "RUN_DIR": str(tmp_path / "afile" / "sub")})


def test_a_rerun_compares_values_not_spellings_names_every_conflict_and_so_does_stop_after_settings(tmp_path, capsys):
    values = {**good_values("beto", tmp_path), "PEAK_LR": "1e-3", "SHARD_MB": "0", "VALID_DOCS": "20"}
    settings.keep("beto", values, tmp_path)
    env = (tmp_path / "recipe.env").read_text()
    (tmp_path / "clean").mkdir()
    (tmp_path / "data-bin").mkdir()
    settings.keep("beto", {**values, "PEAK_LR": "0.001", "SHARD_MB": "0.0"}, tmp_path)  # the same numbers
    assert "note:" not in capsys.readouterr().err and (tmp_path / "recipe.env").read_text() == env
    for stop_after in ("none", "settings"):
        with pytest.raises(settings.SettingsError) as error:
            settings.keep("beto", {**values, "STOP_AFTER": stop_after, "VALID_DOCS": "30", "SHARD_MB": "0.5"}, tmp_path)
        assert str(error.value).startswith("VALID_DOCS=30, but stage 1 (clean the sources) already made ")
        assert "; SHARD_MB=0.5 too, was 0; give VALID_DOCS=20 SHARD_MB=0 to go on" in str(error.value)
    settings.keep("beto", {**values, "STOP_AFTER": "settings", "MAX_UPDATE": "800"}, tmp_path)
    assert "MAX_UPDATE=800 (was 600): no stage made with it has run yet; would be recorded" in capsys.readouterr().err
    assert (tmp_path / "recipe.env").read_text() == env and not (tmp_path / "recipe.changes").exists()


def test_force_removes_every_stage_output_before_the_first_stage_runs(tmp_path):
    """FORCE=1 STOP_AFTER=binarize used to redo stages 1-3 alone and leave the earlier run's pretraining, model and
    report, which the next run (without STOP_AFTER) then skipped to as if they were this run's."""
    made = ["clean", "vocab", "data-bin", "pretrain/finished", "hf/bsc_bio_es", "ner/x", "report.md", "recipe.env"]
    for name in made:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).touch()
    script = f'source {REPO / "recipes" / "lib" / "stages.sh"}; RUN_DIR={tmp_path}; recipe_force'
    subprocess.run(["bash", "-c", script], check=True, capture_output=True, env={**os.environ, "RECIPE": "x"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["recipe.env"]
