"""A second user's journey: an English biomedical researcher with their own files, in a working folder outside the
repository built of links (as data folders often are), on the English excerpt the repository ships (NCBI-disease:
sentences for pretraining, one a line, and its CoNLL NER files). They first give the text as it is (one sentence a
line, no blank lines), are told it would be one document and how to say what it is, then run bsc_bio_es.sh's tiny
preset end to end with CORPUS_LANG=en, shrunk as test_recipe.py shrinks it; every other recipe's settings step takes
the same inputs; continual pretraining starts from the model just made, given as a link (INIT_FROM).

bash runs the recipes; their commands run in this process (tests/command_server.py), as in test_recipe.py. The
mistakes of this journey also stand in the catalogue (test_mistakes.py)."""

import json
import os

import pytest

from biofairseq.recipe import settings
from biofairseq.recipe.presets import RECIPES
from biofairseq.dev.samples import NCBI, NCBI_TEXT, RECIPE_SMALL, REPO
from test_recipe import recipe as run_recipe

INPUTS = {"SOURCES": "abstracts=raw/abstracts.txt", "NER_DATA": "ncbi=data/ncbi", "CORPUS_LANG": "en"}
# smaller than test_recipe.py's run, whose twin and schedule checks this journey does not repeat
SMALL = {**RECIPE_SMALL, "MAX_UPDATE": "10", "WARMUP_UPDATES": "5", "SAVE_INTERVAL_UPDATES": "5", "NER_SEEDS": "1",
         "BASELINE": "none"}


def recipe(folder, run_dir, **variables):
    """bsc_bio_es.sh run by bash from the user's folder, as test_recipe.py runs it, its commands served here."""
    return run_recipe(run_dir, check=False, served=True, cwd=folder, **{"NUM_GPUS": "0", **variables})


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """The user's folder: raw/abstracts.txt a link to the text, data/ncbi a folder of links to the CoNLL splits, and
    data/linked a link to that folder."""
    work = tmp_path_factory.mktemp("english")
    (work / "raw").mkdir()
    (work / "raw" / "abstracts.txt").symlink_to(NCBI_TEXT)
    (work / "data" / "ncbi").mkdir(parents=True)
    for split in ("train", "devel", "test"):
        (work / "data" / "ncbi" / f"{split}.tsv").symlink_to(NCBI / f"{split}.tsv")
    (work / "data" / "linked").symlink_to(work / "data" / "ncbi", target_is_directory=True)
    return work


@pytest.fixture(scope="module")
def journey(folder):
    """The text given as it is, without the corpus language (refused), then with TEXT_DOCS=line (refused: the recipe's
    language is Spanish), then with CORPUS_LANG=en: the recipe end to end."""
    given = {name: value for name, value in INPUTS.items() if name != "CORPUS_LANG"}
    tries = [recipe(folder, "runs/try", **given, **more, STOP_AFTER="settings")
             for more in ({}, {"TEXT_DOCS": "line"})]
    run = recipe(folder, "runs/en", **INPUTS, **SMALL, TEXT_DOCS="line")
    assert run.returncode == 0, run.stderr[-5000:]
    return tries, run, folder / "runs" / "en"


def test_a_document_a_line_and_the_language_are_named_before_any_work_with_the_settings_that_fix_them(journey, folder):
    tries, _, _ = journey
    said = [[line for line in proc.stderr.splitlines() if line.strip()] for proc in tries]
    assert [proc.returncode for proc in tries] == [1, 1] and said == [
        ["bsc_bio_es.sh: error: SOURCES: 'abstracts=raw/abstracts.txt': 1,000 lines and no blank line, so one document (a "
         "blank line separates documents in text); if each line is a document, give TEXT_DOCS=line; if the file is one "
         "document, TEXT_DOCS=file"],
        ["bsc_bio_es.sh: error: SOURCES: 'abstracts=raw/abstracts.txt': 100 of its first 100 documents are identified as "
         "en and 0 as es, so the cleaning would remove nearly all of it; set CORPUS_LANG=en"]]
    assert not (folder / "runs" / "try").exists()


def test_the_tiny_preset_runs_end_to_end_on_english_text_and_conll_ner(journey):
    _, run, run_dir = journey
    env = dict(line.split("=", 1) for line in (run_dir / "recipe.env").read_text().splitlines())
    assert env["CORPUS_LANG"] == "en" and env["TEXT_DOCS"] == "line"
    stats = json.loads((run_dir / "clean" / "stats.json").read_text())
    # a sentence a document, English kept: the language filter drops at most a few (gene lists, formulas)
    assert stats["total"]["docs_in"] == 1000 and stats["total"]["other_language_docs"] < 50
    assert stats["train_docs"] > 900 and stats["valid_docs"] == 10
    report = json.loads((run_dir / "report.json").read_text())
    ner = report["ner"]["ncbi"]
    assert [s["model"] for s in ner] == ["model=bsc_bio_es"]
    assert all(s["runs"] == 1 and s["split"] == "test" for s in ner)
    assert "## NER: ncbi" in run.stdout and "Disease" in (run_dir / "ner" / "ncbi" / "report.md").read_text()


def test_every_other_recipe_takes_the_english_inputs(folder, monkeypatch):
    monkeypatch.chdir(folder)
    for name in RECIPES:
        environ = {**INPUTS, "NER_DATA": "ncbi=data/linked", "TEXT_DOCS": "line", "NUM_GPUS": "0",
                   "STOP_AFTER": "settings", "RUN_DIR": f"runs/{name}", "PATH": os.environ["PATH"]}
        text = settings.plan(name, environ, REPO, f"recipes/{name}.sh", say=lambda line: None)
        assert "\nCORPUS_LANG=en\n" in text and " --train data/linked/" in text, name
    assert not (folder / "runs" / "beto").exists()


def test_continual_pretraining_starts_from_the_model_just_made_given_as_a_link(journey, folder):
    _, _, run_dir = journey
    (folder / "models").mkdir()
    (folder / "models" / "mine").symlink_to(run_dir / "hf" / "bsc_bio_es", target_is_directory=True)
    learned = {name: value for name, value in SMALL.items() if name != "VOCAB_SIZE"}  # continuing: none learned
    proc = recipe(folder, "runs/continued", **INPUTS, **learned, TEXT_DOCS="line", INIT_FROM="models/mine",
                  STOP_AFTER="binarize", CORPUS_LAUNCHER="submitit-local")
    assert proc.returncode == 0, proc.stderr[-5000:]
    assert "--launcher submitit-local" in proc.stderr  # the cleaning's stages as job arrays, as on a cluster
    continued = folder / "runs" / "continued"
    conversion = json.loads((continued / "init" / "conversion.json").read_text())
    assert conversion["fairseq_flags"][:2] == ["--arch", "bio_roberta_tiny"]
    # the data-bin is encoded with the model's own vocabulary, not one learned again
    assert (continued / "data-bin" / "dict.txt").read_text() == (run_dir / "data-bin" / "dict.txt").read_text()
