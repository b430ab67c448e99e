"""The NER folder layouts a user brings to a recipe (NER_DATA=NAME=DIR), accepted or refused in one line before any
work: run from a working folder outside the repository, with relative and absolute paths, up to STOP_AFTER=settings
(the recipe's earliest exit after the NER_DATA check), so that each layout costs a fraction of a second."""

import os
import shutil
import subprocess

import pytest

from biofairseq.samples import BIN, NCBI, PHARMACONER, REPO

RECIPE = REPO / "recipes" / "bsc_bio_es.sh"


def brat(folder, split, documents=2):
    """``documents`` .txt/.ann pairs of the bundled PharmaCoNER split, in ``folder``."""
    folder.mkdir(parents=True)
    for txt in sorted((PHARMACONER / split).glob("*.txt"))[:documents]:
        shutil.copy(txt, folder)
        shutil.copy(txt.with_suffix(".ann"), folder)


# layout: what DIR holds (BRAT folders from the PharmaCoNER excerpt, CoNLL files from NCBI-disease's excerpt)
LAYOUTS = {
    "train valid test": lambda d: [brat(d / s, s) for s in ("train", "valid", "test")],
    "train dev": lambda d: [brat(d / "train", "train"), brat(d / "dev", "valid")],
    "train test": lambda d: [brat(d / s, s) for s in ("train", "test")],
    "conll train.tsv devel.tsv test.tsv": lambda d: shutil.copytree(NCBI, d),
    "conll train.conll valid.bio": lambda d: [d.mkdir(), shutil.copy(NCBI / "train.tsv", d / "train.conll"),
                                              shutil.copy(NCBI / "devel.tsv", d / "valid.bio")],
    "splits and a README.md": lambda d: [LAYOUTS["train valid test"](d), (d / "README.md").write_text("PharmaCoNER\n")],
    "no splits, BRAT files alone": lambda d: brat(d, "train"),
    "an empty train folder": lambda d: [(d / "train").mkdir(parents=True), brat(d / "valid", "valid")],
    "a file": lambda d: shutil.copy(NCBI / "train.tsv", d),
    "missing": lambda d: None,
}
# layout: (the splits found, with test or not), or a fragment of the one line that refuses it
EXPECTED = {
    "train valid test": "train ner/train, valid ner/valid, test ner/test",
    "train dev": "train ner/train, valid ner/dev, test none (the sweep and the report give valid scores only)",
    "train test": "error: NER_DATA: 'x=ner': ner has no valid (or dev, devel) split beside train; add one",
    "conll train.tsv devel.tsv test.tsv": "train ner/train.tsv, valid ner/devel.tsv, test ner/test.tsv",
    "conll train.conll valid.bio": "train ner/train.conll, valid ner/valid.bio, test none",
    "splits and a README.md": "train ner/train, valid ner/valid, test ner/test",
    "no splits, BRAT files alone": "error: NER_DATA: 'x=ner': ner has no train split; it needs train and valid (or dev)",
    "an empty train folder": "error: NER_DATA: 'x=ner': ner/train: a folder without .txt files; a split is a BRAT folder",
    "a file": "error: NER_DATA: 'x=ner': ner: not a folder; give the folder that holds train and valid (or dev)",
    "missing": "error: NER_DATA=x=ner: 'x=ner': ner: no such folder; fix the path (a relative one starts from ",
}


@pytest.mark.fast
@pytest.mark.parametrize("absolute", [False, True], ids=["relative", "absolute"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_ner_folder_layouts_are_accepted_or_refused_in_one_line_before_any_work(layout, absolute, tmp_path):
    LAYOUTS[layout](tmp_path / "ner")
    ner = tmp_path / "ner" if absolute else "ner"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PYTHON": str(BIN / "python"),
           "NUM_GPUS": "0", "STOP_AFTER": "settings", "NER_DATA": f"x={ner}"}
    env.pop("RUN_DIR", None)
    proc = subprocess.run(["bash", str(RECIPE)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    expected = EXPECTED[layout]
    if absolute:
        expected = expected.replace("x=ner", f"x={ner}").replace(" ner", f" {ner}")
    lines = proc.stderr.strip().splitlines()
    if expected.startswith("error: "):
        assert proc.returncode == 1 and lines == [lines[0]], proc.stderr  # one line
        assert lines[0].startswith(f"bsc_bio_es.sh: {expected}"), lines[0]
    else:
        assert proc.returncode == 0, proc.stderr
        assert f"NER_DATA: x: {expected}" in proc.stderr and lines[-1].endswith("STOP_AFTER=settings: stopped before any work")
        assert f"NER_DATA=x={ner}\n" in proc.stdout  # recipe.env records it as given
    assert [p.name for p in tmp_path.iterdir()] == ([] if layout == "missing" else ["ner"])  # no run folder (runs/)


@pytest.mark.fast
def test_a_corpus_language_the_language_filter_does_not_know_stops_before_any_work(tmp_path):
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PYTHON": str(BIN / "python"),
           "NUM_GPUS": "0", "STOP_AFTER": "settings", "CORPUS_LANG": "spanish"}
    proc = subprocess.run(["bash", str(REPO / "recipes" / "beto.sh")], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1 and proc.stderr == (
        "beto.sh: error: CORPUS_LANG=spanish: not a language of the language identifier (fastText lid.176); "
        "use CORPUS_LANG=es\n")
    assert not any(tmp_path.iterdir())


@pytest.mark.fast
@pytest.mark.parametrize("flag", ["--context document", "--context=document"])
def test_whole_document_ner_on_conll_data_stops_before_any_work(flag, tmp_path):
    """A CoNLL file does not say where its documents end, so biofairseq-ner refuses --context document on it: the
    recipe says so before pretraining, not hours later."""
    LAYOUTS["conll train.tsv devel.tsv test.tsv"](tmp_path / "ner")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PYTHON": str(BIN / "python"),
           "NUM_GPUS": "0", "STOP_AFTER": "settings", "NER_DATA": "x=ner", "NER_EXTRA": flag}
    env.pop("RUN_DIR", None)
    proc = subprocess.run(["bash", str(REPO / "recipes" / "modernbert.sh")], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1 and proc.stderr == (
        "modernbert.sh: error: NER_DATA: 'x=ner': ner/train.tsv: a CoNLL file, and NER_EXTRA asks for --context document, "
        "which needs BRAT folders (X.txt beside X.ann); give BRAT data or drop --context document\n")
    assert [p.name for p in tmp_path.iterdir()] == ["ner"]
