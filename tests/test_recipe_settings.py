"""The recipes' settings: one table per recipe (biofairseq/recipe/presets.py), resolved and checked in one Python step
(biofairseq/recipe/settings.py), which hands the scripts every stage's finished commands, in this process; what bash
itself does with them (its one line, its exit, FORCE) is checked by a few bash runs in test_recipe.py."""

import os
import re
import shlex
import shutil

import pytest

from biofairseq.recipe import presets, recipes, record, settings, settings_docs, table
from biofairseq.recipe.plan import Plan
from biofairseq.dev.samples import BIN, NCBI, NCBI_TEXT, REPO
from recipe_preview import recorded_env, script_of

pytestmark = pytest.mark.fast  # make test-fast

GOLDEN = REPO / "tests" / "data" / "recipe_env"  # each recipe x preset's recipe.env, recorded before the tables
EXAMPLES = REPO / "examples" / "data"
INPUTS = {"SOURCES": f"cases={EXAMPLES / 'clinical_cases.jsonl.gz'}", "NER_DATA": f"pharmaconer={EXAMPLES / 'pharmaconer'}"}
ENGLISH = {"SOURCES": f"abstracts={NCBI_TEXT}", "TEXT_DOCS": "line", "NER_DATA": f"ncbi={NCBI}"}


def inputs_of(recipe, preset):
    """Inputs in the preset's corpus language (the settings step refuses a corpus in another), the 1,000-document
    sample given as several sources when the preset holds out half of it or more (VALID_DOCS: the paper's 2,000)."""
    r = presets.RECIPES[recipe]
    table = {**presets.SHARED, **r.defaults, **r.presets[preset]}
    inputs = ENGLISH if presets.value_of(table.get("CORPUS_LANG")) == "en" else INPUTS
    copies = 2 * int(presets.value_of(table["VALID_DOCS"])) // 1000 + 1
    name, path = inputs["SOURCES"].split("=", 1)
    return {**inputs, "SOURCES": " ".join(f"{name}{n or ''}={path}" for n in range(copies))}


def resolved(recipe, run_dir, say=None, **environ):
    """What the recipe's settings step gives (recipe.env printed, not written: STOP_AFTER=settings), as {name: value}."""
    environ = {"NUM_GPUS": "0", "STOP_AFTER": "settings", "RUN_DIR": str(run_dir), "PATH": os.environ["PATH"], **environ}
    text = recorded_env(settings.plan(recipe, environ, REPO, f"recipes/{recipe}.sh", say=say or (lambda line: None)))
    return dict(line.split("=", 1) for line in text.splitlines())


@pytest.mark.parametrize("recipe, preset", [(r, p) for r in presets.RECIPES for p in presets.RECIPES[r].presets])
def test_every_recipe_and_preset_resolves_to_the_recipe_env_it_had_before_the_tables(recipe, preset, tmp_path):
    inputs = {} if preset == "tiny" else inputs_of(recipe, preset)
    got = resolved(recipe, tmp_path / "run", PRESET=preset, **inputs)
    text = "".join(f"{name}={value}\n" for name, value in got.items()).replace(str(REPO), "$REPO")
    golden = GOLDEN / f"{recipe}.{preset}.env"
    if not golden.is_file():  # a new recipe or preset: its recipe.env, read and checked by its author, becomes the record
        pytest.fail(f"{golden}: missing; check this recipe.env of {recipe}.sh PRESET={preset} and save it there:\n{text}")
    assert text == golden.read_text()
    assert not (tmp_path / "run").exists()


def test_bash_reads_no_setting_and_evals_nothing():
    """A setting crosses one language boundary: from the table (Python) to a command line, which bash receives
    finished (biofairseq.recipe.plan). The scripts read no setting but FORCE, for the interrupt's advice, and eval
    nothing."""
    own = {"RECIPE", "REPO", "PYTHON", "STAGE_NOW", "RAN", "SECONDS", "BASH_SOURCE", "BASH_VERSION", "FORCE", "STAGE_OUTPUT",
           "STAGE_DONE"}
    for path in [REPO / "recipes" / "lib" / "stages.sh", REPO / "recipes" / "lib" / "recipe.sh", *(REPO / "recipes" / f"{r}.sh" for r in presets.RECIPES)]:
        code = "\n".join(line.split(" #")[0] for line in path.read_text().splitlines() if not line.lstrip().startswith("#"))
        assert set(re.findall(r"\$\{?!?([A-Z][A-Z0-9_]*)", code)) <= own, path
        assert not re.search(r"\beval\b", code), path


@pytest.mark.parametrize("recipe", list(presets.RECIPES))
def test_every_stage_of_every_recipe_is_one_force_removes_and_the_settings_checks_number(recipe, tmp_path):
    """The stages a recipe runs (biofairseq.recipe.plan) and what FORCE and a changed setting know of them
    (table.FORCED, table.STAGES) are one list: each stage's output lies under its FORCE key's outputs, and a stage
    table.STAGES names has its number."""
    run, _ = settings.prepare(recipe, {"NUM_GPUS": "0", "STOP_AFTER": "settings", "RUN_DIR": str(tmp_path / "run"),
                                       "PATH": os.environ["PATH"]}, REPO, f"{recipe}.sh", say=lambda line: None)
    plan = Plan(run, stop_after="none")
    recipes.BUILDERS[recipe](plan)
    for forced, number, output in plan.stages:
        rel = output.relative_to(tmp_path / "run").as_posix()
        assert any(rel == o or rel.startswith(o + "/") for o in table.FORCED[forced]), (forced, rel)
        if forced in table.STAGES and number[0].isdigit() and not number[1:]:
            assert number == table.STAGES[forced][0] or forced == "pretrain" and number == "5", (forced, number)


def test_the_settings_once_missing_from_recipe_env_are_recorded_by_every_recipe():
    for recipe in presets.RECIPES:
        recorded = {s.name for s in table.of(recipe) if s.recorded}
        assert {"PRECISION", "COMPILE", "PHASE2_TOKENS_PER_SAMPLE"} <= recorded | set(presets.RECIPES[recipe].fixed)


# a wrong value of every setting: each recipe's step is given it (below) and must stop in one line before any work
WRONG = {
    "RUN_DIR": "a-file", "STOP_AFTER": "pretrain", "FORCE": "yes", "NUM_GPUS": "all", "NUM_NODES": "0", "WORKERS": "0",
    "NER_GPU": "first", "DISTRIBUTED_PORT": "80", "BATCH_PER_DEVICE": "0", "PHASE2_BATCH_PER_DEVICE": "-1",
    "LOG_INTERVAL": "0", "PRESET": "huge", "SOURCES": "cases=missing.jsonl", "NER_DATA": "pharmaconer=missing",
    "VALID_DOCS": "0", "TEXT_DOCS": "paragraph", "TEXT_FIELD": "", "VOCAB_SIZE": "100", "SHARD_MB": "1e2", "INIT_FROM": "missing-model", "ARCH": "bio_roberta_tyni",
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
    "ADAM_BETAS": "0.9,0.98", "ADAM_EPS": "0", "DROPOUT": "1", "ATTENTION_DROPOUT": "-0.1", "LEAVE_UNMASKED_PROB": "1.5",
    "RANDOM_TOKEN_PROB": "x", "DISCRIMINATOR_WEIGHT": "0", "SEED": "-1", "DATA_WORKERS": "two",
    "KEEP_INTERVAL_UPDATES": "0", "CORPUS_LAUNCHER": "sbatch", "CORPUS_SLURM_PARTITION": "cpu long", "CORPUS_SLURM_TIME": "4h",
    "CORPUS_SLURM_MEM_GB": "0", "CONTINUE_EPOCHS": "0", "HEAD_WARMUP_UPDATES": "-3", "HEAD_WARMUP_LR": "fast",
    "VOCAB_EXTEND": "5k",
}
WRONG_FOR = {
    ("bioelectra", "ARCH"): "bio_roberta_tiny",  # a shape, but not an ELECTRA one
    ("modernbert", "ARCH"): "bio_roberta_tiny",  # nor a ModernBERT one
    # ModernBERT's context is 8,192 tokens, not the other presets' 512 positions
    ("modernbert", "TOKENS_PER_SAMPLE"): "9000", ("modernbert", "PHASE2_TOKENS_PER_SAMPLE"): "9000",
    ("modernbert", "NER_MAX_LENGTH"): "9000",
}
FIXES = ("give", "use", "must", "choose", "fix", "set", "see", "remove", "write")
EVERY = [(r, name) for r in presets.RECIPES for name in table.names(r)]
FIXED = [(r, name) for r in presets.RECIPES for name in presets.RECIPES[r].fixed]


def test_every_setting_has_a_wrong_value_in_the_table():
    assert {s.name for s in table.SETTINGS} == set(WRONG)


@pytest.mark.parametrize("recipe, name", EVERY + FIXED)
def test_a_wrong_value_of_any_setting_stops_the_step_in_one_line_before_any_work(recipe, name, tmp_path, monkeypatch):
    """Each setting of each recipe, and each a recipe records but does not take (bio_lm's PEAK_LR, ...)."""
    value = WRONG_FOR.get((recipe, name), WRONG[name])
    (tmp_path / "a-file").write_text("not a folder\n")
    monkeypatch.chdir(tmp_path)  # relative paths from a working folder of the user's
    with pytest.raises(settings.SettingsError) as error:
        settings.plan(recipe, {"NUM_GPUS": "0", name: value}, REPO, f"recipes/{recipe}.sh", say=lambda line: None)
    line = str(error.value)
    assert line.startswith(f"{name}={value}") and "\n" not in line and any(fix in line for fix in FIXES), line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]  # no run folder


@pytest.mark.parametrize("name, value, message", [
    ("PHASE2_SHARE", "1.5", "PHASE2_SHARE=1.5: the share of updates at the second length must be below 1 (0: one phase)"),
    ("PHASE2_SHARE", "a", "PHASE2_SHARE=a: not a number; give one, as 0.1 or 1e-3"),
    ("PHASE2_TOKENS_PER_SAMPLE", "1024", "PHASE2_TOKENS_PER_SAMPLE=1024: the presets' position table has 512 rows"),
    ("NUM_NODES", "0", "NUM_NODES=0: must be at least 1"),
    ("NUM_GPUS", "two", "NUM_GPUS=two: not a whole number; give one, as 10"),
    ("MAX_UPDATE", "1e5", "MAX_UPDATE=1e5: a whole number: write it without a point or exponent, as 100000"),
    ("NER_EXTRA", "--epoch 5", "NER_EXTRA=--epoch 5: sets --epochs, which the recipe gives from NER_EPOCHS; set NER_EPOCHS instead"),
    ("NER_EXTRA", "--output-dir elsewhere", "NER_EXTRA=--output-dir elsewhere: sets --output-dir, which the recipe gives from RUN_DIR; set RUN_DIR instead"),
    ("WARMUP_UPDATES", "700", "WARMUP_UPDATES=700: must be at most MAX_UPDATE (MAX_UPDATE=600)"),
    ("SHARD_MB", "0.001", "SHARD_MB=0.001: shards must hold at least 0.01 MB (0: one data-bin)"),
    ("NER_LABELLINGS", "whole-word subtoken", "NER_LABELLINGS=whole-word subtoken: subtoken: unknown; use one of: whole-word sub-token"),
    ("COMPILE", "max", "COMPILE=max: unknown; use one of: none inductor aot_eager"),
    ("PRESET", "huge", "PRESET=huge: unknown; use PRESET=tiny, PRESET=pilot, PRESET=one_gpu or PRESET=paper"),
    ("SEQUENCES_PER_UPDATE", "48", "SEQUENCES_PER_UPDATE=48 is not a multiple of 1 device(s) x BATCH_PER_DEVICE=32; change "
                                   "BATCH_PER_DEVICE (e.g. BATCH_PER_DEVICE=24, the largest up to 32 that divides it)"),
    # what a review found accepted while bash did the arithmetic
    ("BATCH_PER_DEVICE", "010", "BATCH_PER_DEVICE=010: write it without leading zeros, as 10"),  # bash read 8, fairseq 10
    ("BATCH_PER_DEVICE", "08", "BATCH_PER_DEVICE=08: write it without leading zeros, as 8"),  # bash: "value too great"
    ("NER_SEEDS", "1,4294967296", "NER_SEEDS=1,4294967296: '4294967296': must be at most 4294967295, the largest seed numpy "
                                  "takes; give comma-separated values, as 1,2,3"),  # failed at stage 7
    ("MAX_UPDATE", "9" * 5000, f"MAX_UPDATE={'9' * 5000}: too large; give at most 15 digits"),  # a traceback
    ("SOURCES", "a=examples a=examples", "SOURCES=a=examples a=examples: 'a=examples': the name a is given twice; give each "
                                         "its own name"),  # failed at stage 1, after recipe.env was written
    ("CLIP_NORM", "1e999", "CLIP_NORM=1e999: too large; give a finite number, as 0.1 or 1e-3"),  # inf
    ("NER_GPU", "0,x", "NER_GPU=0,x: 'x': not a whole number; give comma-separated values, as 0,1,2,3"),
    ("ADAM_BETAS", "(0.9,1)", "ADAM_BETAS=(0.9,1): give two numbers in [0, 1) in parentheses, as (0.9,0.98)"),
    ("LEAVE_UNMASKED_PROB", "0.95", "LEAVE_UNMASKED_PROB=0.95: must be at most 1 with RANDOM_TOKEN_PROB (the rest of "
                                    "the selected tokens become <mask>) (RANDOM_TOKEN_PROB=0.1)"),
    ("NER_EPOCHS", "1e999", "NER_EPOCHS=1e999: too large; give a finite number, as 0.1 or 1e-3"),  # a schedule of nan
    # a setting of another recipe, and names that look like settings: refused, not ignored
    ("EMBEDDING_SHARING", "gdes", "EMBEDDING_SHARING=gdes: a setting of bioelectra.sh, which bsc_bio_es.sh does not take, "
                                  "or unset it"),
    ("CORPUS_LANG", "zh", "CORPUS_LANG=zh: written without spaces between words, which the recipes' cleaning (words per "
                          "sentence), whole-word masking and NER labels count on; not supported by the recipes "
                          "(preprocess/clean_corpus.py cleans it with --min-words 0)"),  # every sentence dropped at stage 1
    ("TEXT_DOCS", "lines", "TEXT_DOCS=lines: unknown; use one of: blank-line line file"),
    ("NER_EPOCH", "3", "NER_EPOCH=3: not a setting of bsc_bio_es.sh; set NER_EPOCHS instead"),
    ("VALID_DOC", "10", "VALID_DOC=10: not a setting of bsc_bio_es.sh; set VALID_DOCS instead"),
    ("NER_WINDOWS", "3", "NER_WINDOWS=3: not a setting of bsc_bio_es.sh; see docs/recipes.md for its settings"),
    ("RUN_DIR", "/tmp/x\ntouch /tmp/y", "RUN_DIR='/tmp/x\\ntouch /tmp/y': holds a line break; give the value on one line"),
    ("CORPUS_SLURM_ACCOUNT", "lab", "CORPUS_SLURM_ACCOUNT=lab: not a setting of bsc_bio_es.sh; see docs/recipes.md for its settings"),
])
def test_a_wrong_value_is_named_in_one_line(name, value, message, tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    with pytest.raises(settings.SettingsError) as error:
        settings.plan("bsc_bio_es", {"NUM_GPUS": "0", "RUN_DIR": str(tmp_path), name: value}, REPO, "bsc_bio_es.sh",
                       say=lambda line: None)
    assert str(error.value) == message


def test_ner_extra_reaches_the_sweep_as_its_check_reads_it(tmp_path):
    """NER_EXTRA is checked with a shell's quoting (kinds); the sweep got it split on spaces, so a quoted value passed
    the check and failed at stage 7, after pretraining (a new engineer's finding)."""
    run, _ = settings.prepare("bsc_bio_es", {"NUM_GPUS": "0", "STOP_AFTER": "settings", "RUN_DIR": str(tmp_path / "run"),
                                             "NER_EXTRA": "--fc-dropout '0.5'"}, REPO, "bsc_bio_es.sh",
                              say=lambda line: None)
    plan = Plan(run, stop_after="none")
    recipes.BUILDERS["bsc_bio_es"](plan)
    sweep = next(c for c in plan.commands if c[0] == "biofairseq-ner")
    assert sweep[-2:] == ["--fc-dropout", "0.5"]


def test_a_device_count_that_no_batch_fits_names_the_devices(tmp_path):
    """PRESET=paper's 2,048 sequences on 3 GPUs: no BATCH_PER_DEVICE divides them, so the line says to change the GPUs
    or the sequences, not the batch (a new user's finding)."""
    environ = {"NUM_GPUS": "3", "PRESET": "paper", "STOP_AFTER": "settings", "RUN_DIR": str(tmp_path / "run")}
    with pytest.raises(settings.SettingsError) as error:
        settings.plan("bsc_bio_es", {**environ, **inputs_of("bsc_bio_es", "paper")}, REPO, "bsc_bio_es.sh",
                      say=lambda line: None)
    assert str(error.value) == ("SEQUENCES_PER_UPDATE=2048 is not a multiple of 3 device(s); give a number of GPUs that "
                                "divides it, or a SEQUENCES_PER_UPDATE that is a multiple of 3")


def test_the_ner_gpus_are_gpus_of_the_machine(tmp_path):
    """NER_GPU=3,4 on a machine of NUM_GPUS=4 (a preview: STOP_AFTER=settings asks torch nothing) stops before any work."""
    environ = {"NUM_GPUS": "4", "BATCH_PER_DEVICE": "8", "STOP_AFTER": "settings", "RUN_DIR": str(tmp_path / "run")}
    with pytest.raises(settings.SettingsError) as error:
        settings.plan("bsc_bio_es", {**environ, "NER_GPU": "3,4"}, REPO, "bsc_bio_es.sh", say=lambda line: None)
    assert str(error.value) == "NER_GPU=3,4: give distinct GPUs of the NUM_GPUS=4 (0 to 3), as 0,1,2,3, or more GPUs"
    text = settings.plan("bsc_bio_es", {**environ, "NER_GPU": "0,1,2,3"}, REPO, "bsc_bio_es.sh", say=lambda line: None)
    assert " --devices 0,1,2,3\n" in script_of(text)


def test_a_preview_says_where_the_run_goes_and_how_an_update_is_made_on_the_cluster(tmp_path):
    """STOP_AFTER=settings for 2 machines x 4 GPUs, previewed on a login node: the run folder, the world size, the
    batch per device and update frequency of both length phases, and that WORKERS is this machine's cores."""
    said = []
    settings.plan("beto", {"NUM_NODES": "2", "NUM_GPUS": "4", "BATCH_PER_DEVICE": "4", "PHASE2_BATCH_PER_DEVICE": "1",
                            "STOP_AFTER": "settings", "RUN_DIR": str(tmp_path / "run"), "PATH": os.environ["PATH"]},
                   REPO, "beto.sh", say=said.append)
    for line in [
        f"RUN_DIR={tmp_path / 'run'}; pretraining on 2 machine(s) x 4 GPU(s), world size 8",
        "an update: SEQUENCES_PER_UPDATE=32 = BATCH_PER_DEVICE=4 x 8 device(s) x update frequency 1",
        "an update of the second length phase: PHASE2_SEQUENCES_PER_UPDATE=8 = PHASE2_BATCH_PER_DEVICE=1 x 8 device(s) "
        "x update frequency 1",
        f"cleaning: {presets.cores()} local processes; vocabulary and binarizing: on this machine, {presets.cores()} "
        "processes (WORKERS)",
        "NER: the sweep's runs on GPU 0",
        f"note: WORKERS={presets.cores()} is this machine's cores, and srun gives each machine's task that many "
        "(--cpus-per-task); set WORKERS to the cores of a cluster machine",
    ]:
        assert line in said, (line, said)
    said.clear()
    settings.plan("beto", {"NUM_NODES": "2", "NUM_GPUS": "4", "BATCH_PER_DEVICE": "4", "PHASE2_BATCH_PER_DEVICE": "1",
                            "WORKERS": "32", "STOP_AFTER": "settings", "RUN_DIR": str(tmp_path / "run")},
                   REPO, "beto.sh", say=said.append)
    assert not any(line.startswith("note: WORKERS") for line in said)


def test_array_settings_without_arrays_are_said_to_be_unused(tmp_path):
    said = []
    settings.plan("bsc_bio_es", {"NUM_GPUS": "0", "STOP_AFTER": "settings", "RUN_DIR": str(tmp_path / "run"),
                                  "CORPUS_SLURM_PARTITION": "cpu"}, REPO, "bsc_bio_es.sh", say=said.append)
    assert ("note: CORPUS_SLURM_PARTITION is for the corpus stages' job arrays, which CORPUS_LAUNCHER=local does not "
            "make; set CORPUS_LAUNCHER=slurm to use it") in said


def test_sampling_temperatures_must_be_finite():
    with pytest.raises(settings.SettingsError, match=r"^SAMPLING_TEMPERATURE=1e999: too large"):
        settings.resolve("bioelectra", {"SAMPLING_TEMPERATURE": "1e999"}, REPO)


def test_a_value_set_but_empty_is_kept_as_given(tmp_path):
    assert resolved("bsc_bio_es", tmp_path, NER_DATA="")["NER_DATA"] == ""  # pretrain and convert only
    with pytest.raises(settings.SettingsError, match="^NER_EPOCHS=: not a number"):
        resolved("bsc_bio_es", tmp_path, NER_EPOCHS="")
    with pytest.raises(settings.SettingsError, match='^PRESET=paper needs SOURCES="NAME=PATH ..."'):
        resolved("bsc_bio_es", tmp_path, PRESET="paper", SOURCES="", NER_DATA="")


def test_what_a_recipe_computes_is_refused_with_its_reason(tmp_path):
    with pytest.raises(settings.SettingsError) as error:
        resolved("biomegatron", tmp_path, VOCAB_SIZE="8000")
    assert str(error.value) == ("VOCAB_SIZE=8000: this recipe learns one vocabulary per entry of VOCAB_SIZES; "
                                "set VOCAB_SIZES=8000")
    assert resolved("bio_lm", tmp_path, PHASE2_SHARE="0")["PHASE2_SHARE"] == "0"  # its own value: taken
    assert resolved("bio_lm", tmp_path, BASE_LR="5e-4")["PEAK_LR"] == "5e-4"


def test_an_ordinary_environment_holds_nothing_taken_for_a_setting(tmp_path):
    assert resolved("bsc_bio_es", tmp_path, **{**os.environ, "NUM_GPUS": "0"})["PRESET"] == "tiny"


def test_a_generator_fraction_that_leaves_the_generator_a_broken_head_is_named_before_any_work():
    """768 x 0.3 is 230 wide: 3 heads of 64 do not divide it (the model would refuse it after the corpus stages)."""
    settings.resolve("bioelectra", {"ARCH": "electra_base", "GENERATOR_FRACTION": "0.25"}, REPO)
    settings.resolve("bioelectra", {"ARCH": "electra_base", "GENERATOR_FRACTION": ""}, REPO)  # ARCH's own
    with pytest.raises(settings.SettingsError) as error:
        settings.resolve("bioelectra", {"ARCH": "electra_base", "GENERATOR_FRACTION": "0.3"}, REPO)
    assert str(error.value) == ("GENERATOR_FRACTION=0.3: must be a share of ARCH's width that gives its generator whole "
                                "heads of 64 (or under 128 wide), as 0.25 (ARCH=electra_base)")


def good_values(recipe, run_dir):
    return settings.resolve(recipe, {"RUN_DIR": str(run_dir), "NUM_GPUS": "0", "VALID_DOCS": "1",
                                     "SAVE_INTERVAL_UPDATES": "1"}, REPO)


def test_recipe_env_is_written_once_then_a_change_is_taken_only_before_its_stage_ran(tmp_path, capsys):
    values = good_values("beto", tmp_path)
    record.keep_recipe_env("beto", values, tmp_path)
    env = (tmp_path / "recipe.env").read_text()
    assert env.startswith("RECIPE=beto\nPRESET=tiny\n") and "CORPUS_LANG=es\n" in env and "RUN_DIR" not in env
    assert "SAVE_INTERVAL_UPDATES=1\n" in env  # which checkpoints KEEP=best chooses from
    record.keep_recipe_env("beto", {**values, "NER_EPOCHS": "3"}, tmp_path)  # no NER run yet
    assert "NER_EPOCHS=3 (was 10)" in capsys.readouterr().err and record.read(tmp_path)["NER_EPOCHS"] == "3"
    (tmp_path / "ner" / "pharmaconer" / "model=beto").mkdir(parents=True)
    with pytest.raises(settings.SettingsError, match=r"NER_EPOCHS=4, but stage 7 \(fine-tune on NER\) already made"):
        record.keep_recipe_env("beto", {**values, "NER_EPOCHS": "4"}, tmp_path)
    assert record.read(tmp_path)["NER_EPOCHS"] == "3" and len(record.changes_of(tmp_path)) == 1


def test_a_run_dir_inside_a_file_is_named_in_one_line(tmp_path):
    (tmp_path / "afile").write_text("")
    with pytest.raises(settings.SettingsError, match=r"RUN_DIR=.*/afile/sub: .*/afile is a file, not a folder; choose another RUN_DIR"):
        good_values("bsc_bio_es", tmp_path / "afile" / "sub")


def test_a_rerun_compares_values_not_spellings_names_every_conflict_and_so_does_stop_after_settings(tmp_path, capsys):
    values = {**good_values("beto", tmp_path), "PEAK_LR": "1e-3", "SHARD_MB": "0", "VALID_DOCS": "20"}
    record.keep_recipe_env("beto", values, tmp_path)
    env = (tmp_path / "recipe.env").read_text()
    (tmp_path / "clean").mkdir()
    (tmp_path / "data-bin").mkdir()
    record.keep_recipe_env("beto", {**values, "PEAK_LR": "0.001", "SHARD_MB": "0.0"}, tmp_path)  # the same numbers
    assert "note:" not in capsys.readouterr().err and (tmp_path / "recipe.env").read_text() == env
    for stop_after in ("none", "settings"):
        with pytest.raises(settings.SettingsError) as error:
            record.keep_recipe_env("beto", {**values, "STOP_AFTER": stop_after, "VALID_DOCS": "30", "SHARD_MB": "0.5"}, tmp_path)
        assert str(error.value).startswith("VALID_DOCS=30, but stage 1 (clean the sources) already made ")
        assert "; SHARD_MB=0.5 too, was 0; give VALID_DOCS=20 SHARD_MB=0 to go on" in str(error.value)
    record.keep_recipe_env("beto", {**values, "STOP_AFTER": "settings", "MAX_UPDATE": "800"}, tmp_path)
    assert "MAX_UPDATE=800 (was 600): no stage made with it has run yet; would be recorded" in capsys.readouterr().err
    assert (tmp_path / "recipe.env").read_text() == env and not (tmp_path / "recipe.changes").exists()


@pytest.mark.parametrize("recipe, preset", [(r, p) for r in presets.RECIPES for p in presets.RECIPES[r].presets if p != "tiny"])
def test_a_preset_of_ones_own_data_needs_the_corpus_and_the_ner_data(recipe, preset, tmp_path):
    with pytest.raises(settings.SettingsError, match=rf'^PRESET={preset} needs SOURCES="NAME=PATH ..." \(.+\); see the top of '):
        resolved(recipe, tmp_path, PRESET=preset)
    with pytest.raises(settings.SettingsError, match=rf'^PRESET={preset} needs NER_DATA="NAME=DIR ..." \(e.g. .+\), or NER_DATA= '):
        resolved(recipe, tmp_path, PRESET=preset, **{k: v for k, v in inputs_of(recipe, preset).items() if k != "NER_DATA"})
    assert resolved(recipe, tmp_path, PRESET=preset, **{**inputs_of(recipe, preset), "NER_DATA": ""})["NER_DATA"] == ""


SLURM = REPO / "tests" / "slurm"  # stand-ins for Slurm's commands


@pytest.mark.parametrize("environ, message", [
    ({"NUM_GPUS": "0"}, "NUM_NODES=2 needs GPUs: set NUM_GPUS to the GPUs of each machine, or NUM_NODES=1"),
    ({"NUM_GPUS": "8", "PATH": f"{SLURM}{os.pathsep}/usr/bin", "SLURM_JOB_ID": ""},
     "NUM_NODES=2: not inside a Slurm allocation (no SLURM_JOB_ID); submit the recipe with sbatch"),
    ({"NUM_GPUS": "8", "PATH": f"{BIN}{os.pathsep}/usr/bin{os.pathsep}/bin"}, "NUM_NODES=2: srun not found"),
    ({"NER_DATA": "pharmaconer"}, "NER_DATA=pharmaconer: 'pharmaconer': give NAME=DIR"),
])
def test_several_machines_without_gpus_or_slurm_and_a_nameless_data_set_stop_in_one_line(environ, message, tmp_path):
    if "srun not found" in message and shutil.which("srun", path=environ["PATH"]):
        pytest.skip("this machine has Slurm")
    with pytest.raises(settings.SettingsError) as error:
        resolved("bsc_bio_es", tmp_path, **{"STOP_AFTER": "none", "NUM_NODES": "2", **environ})
    assert str(error.value).startswith(message) and not (tmp_path / "recipe.env").exists()


def test_the_docs_tables_of_settings_and_presets_are_the_tables_themselves():
    docs = (REPO / "docs" / "recipes.md").read_text(encoding="utf-8")
    begin, end = "<!-- generated: python -m biofairseq.recipe docs -->\n", "<!-- end of generated -->"
    assert docs[docs.index(begin) + len(begin):docs.index(end)].strip() == settings_docs.docs().strip(), \
        "docs/recipes.md: run python -m biofairseq.recipe docs and paste its tables between the markers"


def test_a_rerun_compares_folders_by_what_they_name_may_change_the_sweeps_grid_and_forces_from_a_stage(tmp_path, monkeypatch, capsys):
    """notes=notes and notes=/abs/notes are one corpus (refused as a changed setting before); NER_SEEDS and NER_LRS
    may grow or shrink after the sweeps ran; FORCE=ner lets NER's settings change and keeps the earlier stages'."""
    work, run_dir = tmp_path / "work", tmp_path / "run"
    (work / "sub").mkdir(parents=True)
    shutil.copy(EXAMPLES / "clinical_cases.jsonl.gz", work / "cases.jsonl.gz")
    monkeypatch.chdir(work)

    def rerun(**environ):
        environ = {"NUM_GPUS": "0", "RUN_DIR": str(run_dir), "STOP_AFTER": "none", "SOURCES": "cases=cases.jsonl.gz", **environ}
        return settings.plan("bsc_bio_es", environ, REPO, "bsc_bio_es.sh", say=lambda line: print(line, file=__import__("sys").stderr))

    rerun()
    assert record.read(run_dir)["SOURCES"] == f"cases={work / 'cases.jsonl.gz'}"  # recorded absolute
    for name in ("clean", "ner/pharmaconer/model=bsc_bio_es/lr=0.0005/seed=1"):
        (run_dir / name).mkdir(parents=True)
    rerun(SOURCES=f"cases={work / 'cases.jsonl.gz'}")
    monkeypatch.chdir(work / "sub")
    rerun(SOURCES="cases=../cases.jsonl.gz")
    monkeypatch.chdir(work)
    env = (run_dir / "recipe.env").read_text()
    (run_dir / "recipe.env").write_text(env.replace(str(work / "cases.jsonl.gz"), "cases.jsonl.gz"))  # an older record
    rerun(SOURCES=f"cases={work / 'cases.jsonl.gz'}")
    assert "note:" not in capsys.readouterr().err and not (run_dir / "recipe.changes").exists()
    shutil.copy(work / "cases.jsonl.gz", work / "other.jsonl.gz")
    with pytest.raises(settings.SettingsError, match=r"^SOURCES=cases=.*other.jsonl.gz, but stage 1 .* FORCE=clean to redo from stage 1 on"):
        rerun(SOURCES="cases=other.jsonl.gz")

    rerun(NER_SEEDS="2,1,1", NER_LRS="0.001,5e-4")  # the tiny preset's grid, in another order
    assert "note:" not in capsys.readouterr().err
    rerun(NER_SEEDS="1", NER_LRS="5e-4")  # the tiny preset's 1,2 and 5e-4,1e-3
    err = capsys.readouterr().err
    assert "NER_SEEDS=1 (was 1,2): the sweep keeps its finished runs, runs the missing ones and reports those asked for" in err
    assert record.read(run_dir)["NER_SEEDS"] == "1" and len(record.changes_of(run_dir)) == 2
    with pytest.raises(settings.SettingsError, match=r"^NER_EPOCHS=4, but stage 7 .*; give NER_EPOCHS=10 to go on, FORCE=ner to redo from stage 7 on"):
        rerun(NER_EPOCHS="4")
    text = rerun(NER_EPOCHS="4", FORCE="ner")
    err = capsys.readouterr().err
    assert "NER_EPOCHS=4 (was 10): its stage is redone (FORCE)" in err
    assert f"note: FORCE=ner removes {run_dir / 'ner'} before the first stage" in err
    removed = [shlex.split(line)[3] for line in text.splitlines() if line.startswith("if [[ -e ")]
    assert removed == [str(run_dir / name) for name in ("ner", "breakout", "report.md", "report.json", "report.png")]
    with pytest.raises(settings.SettingsError, match=r"^PEAK_LR=0.0002, but .*FORCE=pretrain to redo from stage 4"):
        (run_dir / "pretrain").mkdir()
        (run_dir / "pretrain" / "checkpoint_last.pt").touch()
        rerun(PEAK_LR="0.0002", FORCE="ner")


@pytest.mark.parametrize("recipe", list(presets.RECIPES))
def test_every_key_of_every_preset_table_is_a_setting(recipe):
    """A misspelt key in a preset (PEAK_RL) would be dropped by the merge without a word: every key of the shared
    table, the recipe's defaults, its presets, its continuation layer and what it fixes is a Setting."""
    r = presets.RECIPES[recipe]
    tables = {"SHARED": presets.SHARED, "defaults": r.defaults, "fixed": r.fixed, "continuation": presets.continuation(recipe),
              **{f"presets[{name!r}]": t for name, t in r.presets.items()}}
    unknown = {where: sorted(set(t) - set(table.BY_NAME)) for where, t in tables.items() if set(t) - set(table.BY_NAME)}
    assert not unknown, f"{recipe}: not settings (biofairseq/recipe/table.py): {unknown}"
    assert not set(r.computed) & set(table.BY_NAME), "a computed value that is also a setting"


@pytest.mark.parametrize("recipe", ["bsc_bio_es", "bio_lm"])
def test_the_script_a_preview_prints_is_the_one_the_run_writes_and_runs(recipe, tmp_path):
    """One renderer: STOP_AFTER=settings prints the script that a run without it writes to RUN_DIR/run.sh and runs
    (recipes/lib/recipe.sh), byte for byte; the preview writes nothing."""
    environ = {"NUM_GPUS": "0", "RUN_DIR": str(tmp_path / "run"), "PATH": os.environ["PATH"]}
    previewed = settings.render(recipe, {**environ, "STOP_AFTER": "settings"}, REPO, f"{recipe}.sh", say=lambda line: None)
    assert previewed.startswith("#!/usr/bin/env bash\n") and not (tmp_path / "run").exists()
    path = settings.render(recipe, environ, REPO, f"{recipe}.sh", say=lambda line: None)
    assert path == str(tmp_path / "run" / "run.sh") and (tmp_path / "run" / "run.sh").read_text() == previewed


def test_every_public_function_of_the_package_has_type_hints():
    """biofairseq/ is typed throughout: a public function (or method) without hints on its parameters and its return
    fails here. (Annotations only: nothing checks them against the code but ruff's undefined names.)"""
    import ast

    bare = []
    for path in sorted((REPO / "biofairseq").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
                params = [a for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs if a.arg not in ("self", "cls")]
                params += [a for a in (node.args.vararg, node.args.kwarg) if a is not None]
                if node.returns is None or any(a.annotation is None for a in params):
                    bare.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}")
    assert not bare, bare
