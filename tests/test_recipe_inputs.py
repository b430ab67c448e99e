"""The NER folder layouts a user brings to a recipe (NER_DATA=NAME=DIR), accepted or refused in one line before any
work: the recipes' settings step (biofairseq/recipe/settings.py, which every recipe evals first), in this process, from
a working folder outside the repository, with relative and absolute paths, up to STOP_AFTER=settings."""

import shutil

import pytest

from biofairseq.recipe import settings
from biofairseq.dev.samples import NCBI, NCBI_TEXT, PHARMACONER, REPO
from recipe_preview import recorded_env

pytestmark = pytest.mark.fast


def step(recipe, **environ):
    """(exit status, stdout, stderr) of the recipe's settings step, as bash gets them."""
    said = []
    try:
        out = settings.plan(recipe, {"NUM_GPUS": "0", "STOP_AFTER": "settings", **environ}, REPO, f"{recipe}.sh",
                             say=said.append)
    except settings.SettingsError as error:
        return 1, "", f"{recipe}.sh: error: {error}\n"
    return 0, recorded_env(out), "".join(line + "\n" for line in said)


def brat(folder, split, documents=2):
    """``documents`` .txt/.ann pairs of the bundled PharmaCoNER split, in ``folder``."""
    folder.mkdir(parents=True)
    for txt in sorted((PHARMACONER / split).glob("*.txt"))[:documents]:
        shutil.copy(txt, folder)
        shutil.copy(txt.with_suffix(".ann"), folder)


def tool_exports(folder):
    """train.jsonl (doccano's export) and valid.json (Label Studio's) of two PharmaCoNER documents each."""
    from biofairseq.finetune import data, json_formats, outputs

    for split, name, fmt in (("train", "train.jsonl", "doccano"), ("valid", "valid.json", "labelstudio")):
        brat(folder / "brat" / split, split)
        json_formats.write(folder / name, fmt, outputs.tool_documents(data.read(folder / "brat" / split)), gold=True)
    shutil.rmtree(folder / "brat")


# layout: what DIR holds (BRAT folders from the PharmaCoNER excerpt, CoNLL files from NCBI-disease's excerpt)
LAYOUTS = {
    "train valid test": lambda d: [brat(d / s, s) for s in ("train", "valid", "test")],
    "train dev": lambda d: [brat(d / "train", "train"), brat(d / "dev", "valid")],
    "train test": lambda d: [brat(d / s, s) for s in ("train", "test")],
    "conll train.tsv devel.tsv test.tsv": lambda d: shutil.copytree(NCBI, d),
    "conll train.conll valid.bio": lambda d: [d.mkdir(), shutil.copy(NCBI / "train.tsv", d / "train.conll"),
                                              shutil.copy(NCBI / "devel.tsv", d / "valid.bio")],
    "json train.jsonl valid.json": tool_exports,
    "splits and a README.md": lambda d: [LAYOUTS["train valid test"](d), (d / "README.md").write_text("PharmaCoNER\n")],
    # splits that are links to the folders of a release unpacked beside them (train -> release/train-set/ner)
    "train and valid links to BRAT folders": lambda d: [
        brat(d / "release" / "train-set" / "ner", "train"), brat(d / "release" / "dev-set" / "ner", "valid"),
        (d / "train").symlink_to("release/train-set/ner"), (d / "valid").symlink_to(d / "release" / "dev-set" / "ner")],
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
    "json train.jsonl valid.json": "train ner/train.jsonl, valid ner/valid.json, test none",
    "splits and a README.md": "train ner/train, valid ner/valid, test ner/test",
    "train and valid links to BRAT folders": "train ner/train, valid ner/valid, test none",
    "no splits, BRAT files alone": "error: NER_DATA: 'x=ner': ner has no train split; it needs train and valid (or dev)",
    "an empty train folder": "error: NER_DATA: 'x=ner': ner/train: a folder without .txt files; a split is a BRAT folder",
    "a file": "error: NER_DATA: 'x=ner': ner: not a folder; give the folder that holds train and valid (or dev)",
    "missing": "error: NER_DATA=x=ner: 'x=ner': ner: no such folder; fix the path (a relative one starts from ",
}


@pytest.mark.parametrize("absolute", [False, True], ids=["relative", "absolute"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_ner_folder_layouts_are_accepted_or_refused_in_one_line_before_any_work(layout, absolute, tmp_path, monkeypatch):
    LAYOUTS[layout](tmp_path / "ner")
    monkeypatch.chdir(tmp_path)
    ner = tmp_path / "ner" if absolute else "ner"
    english = {"SOURCES": f"abstracts={NCBI_TEXT}",
               "TEXT_DOCS": "line", "CORPUS_LANG": "en"}  # NCBI-disease's language (the settings step compares them)
    code, stdout, stderr = step("bsc_bio_es", NER_DATA=f"x={ner}", **(english if layout.startswith("conll") else {}))
    expected = EXPECTED[layout]
    if absolute:
        expected = expected.replace("x=ner", f"x={ner}").replace(" ner", f" {ner}")
    lines = stderr.strip().splitlines()
    if expected.startswith("error: "):
        assert code == 1 and lines == [lines[0]], stderr  # one line
        assert lines[0].startswith(f"bsc_bio_es.sh: {expected}"), lines[0]
    else:
        assert code == 0, stderr
        assert f"NER_DATA: x: {expected}" in stderr and lines[-1].endswith("STOP_AFTER=settings: stopped before any work")
        assert f"NER_DATA=x={tmp_path / 'ner'}\n" in stdout  # recipe.env records the folder, absolute
    assert [p.name for p in tmp_path.iterdir()] == ([] if layout == "missing" else ["ner"])  # no run folder (runs/)


def test_a_corpus_language_the_language_filter_does_not_know_stops_before_any_work(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert step("beto", CORPUS_LANG="spanish") == (1, "", (
        "beto.sh: error: CORPUS_LANG=spanish: not a language of the language identifier (fastText lid.176); "
        "use CORPUS_LANG=es\n"))
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("flag", ["--context document", "--context=document"])
def test_whole_document_ner_on_conll_data_stops_before_any_work(flag, tmp_path, monkeypatch):
    """A CoNLL file does not say where its documents end, so biofairseq-ner refuses --context document on it: the
    recipe says so before pretraining, not hours later."""
    LAYOUTS["conll train.tsv devel.tsv test.tsv"](tmp_path / "ner")
    monkeypatch.chdir(tmp_path)
    assert step("modernbert", NER_DATA="x=ner", NER_EXTRA=flag) == (1, "", (
        "modernbert.sh: error: NER_DATA: 'x=ner': ner/train.tsv: a CoNLL file, and NER_EXTRA asks for --context document, "
        "which needs BRAT folders (X.txt beside X.ann); give BRAT data or drop --context document\n"))
    assert [p.name for p in tmp_path.iterdir()] == ["ner"]


def test_a_corpus_folder_of_links_is_read_through_them_and_a_link_loop_once(tmp_path, monkeypatch):
    """Sources built of links: a linked file, a linked folder inside the source folder, and a link back up the tree."""
    from biofairseq.corpus.sources import discover

    corpus, elsewhere = tmp_path / "corpus", tmp_path / "elsewhere"
    brat(elsewhere / "brat", "train")
    corpus.mkdir()
    (corpus / "cases.jsonl.gz").symlink_to(REPO / "examples" / "data" / "clinical_cases.jsonl.gz")
    (corpus / "brat").symlink_to(elsewhere / "brat", target_is_directory=True)
    (corpus / "brat" / "loop").symlink_to(elsewhere, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    pieces, errors = discover("corpus", "blank-line")
    assert errors == [] and sorted(p.fmt for p in pieces) == ["brat", "brat", "jsonl"]
    assert step("bsc_bio_es", SOURCES="notes=corpus", RUN_DIR="run")[0] == 0


def _inputs(folder):
    """Inputs a review found refused or accepted wrongly, each (file or folder, what its check says or None)."""
    import gzip
    import json
    import os

    folder.mkdir()
    paragraph = "Paragraph of a full-text article on renal failure and its treatment in adults. " * 6
    with open(folder / "fulltext.txt", "w") as f:  # documents longer than the first 64 KiB, between blank lines
        f.write("\n\n".join("\n".join([paragraph] * 150) for _ in range(3)))
    with gzip.open(folder / "abstracts.txt.gz", "wt") as f:  # an abstract a line, 1.5 KB each: 43 in 64 KiB
        f.writelines(f"{'The patient presented with fever and cough. ' * 33}{i}\n" for i in range(300))
    with open(folder / "bom.jsonl", "w", encoding="utf-8-sig") as f:  # JSON lines saved with a byte-order mark
        f.writelines(json.dumps({"text": f"Patient {i} with fever, treated with antibiotics."}) + "\n" for i in range(20))
    (folder / "notes").mkdir()  # notes, a manifest beside them, and a broken link
    for i in range(3):
        (folder / "notes" / f"n{i}.txt").write_text("Patient presented with chest pain.\n\nAnother note.\n")
    (folder / "notes" / "manifest.json").write_text('{"version": 1, "files": 3}\n')
    (folder / "notes" / "broken.txt").symlink_to(folder / "nowhere.txt")
    (folder / "bad.txt.zst").write_bytes(os.urandom(4096))  # not zstandard data
    return {"fulltext.txt": None, "abstracts.txt.gz": "300 lines and no blank line, so one document",
            "bom.jsonl": None, "notes": None, "bad.txt.zst": "bad.txt.zst: can't read it (zstd decompress error"}


def test_the_source_checks_take_long_documents_marked_files_and_stray_files_and_refuse_what_they_should(tmp_path):
    from biofairseq.corpus.checks import source_problem

    for name, says in _inputs(tmp_path / "in").items():
        problem = source_problem("x", tmp_path / "in" / name)
        assert (problem is None) if says is None else (says in (problem or "")), (name, problem)


def test_the_sample_of_a_source_reads_its_start_only(tmp_path):
    """The language check's sample of a file of one document (TEXT_DOCS=file, or text without blank lines) read the
    whole file to cut 64 KiB of it: 40 MB here, 10 GB on a real corpus."""
    import tracemalloc

    from biofairseq.corpus.sources import sample_documents

    big = tmp_path / "one.txt"
    big.write_text("Patient with fever. " * 2_000_000)
    tracemalloc.start()
    try:
        documents = sample_documents([big], "file")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sum(map(len, documents)) == 1 << 16 and peak < 4 << 20, peak


def test_a_folder_of_notes_read_at_blank_lines_and_more_valid_documents_than_the_corpus_are_named_before_any_work(tmp_path, monkeypatch):
    """Both were noticed only by the cleaning, after it had read the whole corpus: a folder of notes split into their
    paragraphs (a warning at the end), VALID_DOCS=2000 against 300 notes (an error at the end)."""
    import gzip
    import json

    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes").mkdir()
    with gzip.open(REPO / "examples" / "data" / "clinical_cases.jsonl.gz", "rt", encoding="utf-8") as f:
        cases = [json.loads(line)["text"] for line, _ in zip(f, range(30))]
    for n, case in enumerate(cases):  # three paragraphs a note
        words = case.split()
        third = len(words) // 3
        (tmp_path / "notes" / f"note{n:02}.txt").write_text(
            "\n\n".join(" ".join(words[i * third:(i + 1) * third if i < 2 else None]) for i in range(3)), encoding="utf-8")
    code, _, err = step("bsc_bio_es", SOURCES="notes=notes", VALID_DOCS="10")  # of 90 paragraphs
    assert code == 0 and err.startswith("note: SOURCES 'notes': its first 20 text files give 60 documents, split at "
                                        "blank lines (TEXT_DOCS=blank-line); if each file is one document (a note, a "
                                        "case), give TEXT_DOCS=file (and a VALID_DOCS=10 that the files outnumber "
                                        "twice)"), err
    code, _, err = step("bsc_bio_es", SOURCES="notes=notes", VALID_DOCS="10", TEXT_DOCS="blank-line")  # as meant
    assert code == 0 and "note:" not in err, err
    assert step("bsc_bio_es", SOURCES="notes=notes", TEXT_DOCS="file") == (1, "", (
        "bsc_bio_es.sh: error: VALID_DOCS=50, but SOURCES hold 30 documents (read as TEXT_DOCS=file) before cleaning, "
        "none left to train on; give VALID_DOCS=3 (a tenth)\n"))
    code, _, err = step("bsc_bio_es", SOURCES="notes=notes", TEXT_DOCS="file", VALID_DOCS="16")
    assert code == 1 and "30 documents (read as TEXT_DOCS=file) before cleaning, 14 left to train on" in err, err
    code, _, err = step("bsc_bio_es", SOURCES="notes=notes", TEXT_DOCS="file", VALID_DOCS="15")
    assert code == 0 and "note:" not in err, err
    assert [p.name for p in tmp_path.iterdir()] == ["notes"]  # no run folder
