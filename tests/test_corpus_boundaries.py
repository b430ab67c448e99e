"""Where documents end and which ones are held out: one definition of a blank line for every splitter, a valid draw
that adding a source does not redo, and the splitting of large compressed files run where --launcher says."""

import gzip
import importlib.util
import json
import multiprocessing.pool
import os

import pytest

from biofairseq.corpus import encode, pipeline
from biofairseq.corpus.sources import Piece, plan_shards, read_documents, split_compressed
from biofairseq.data_bin import split_documents
from biofairseq.dev.samples import REPO, clinical_lines

# blank lines of spaces, tab and CR, form feed, vertical tab, CRLF: document boundaries; a line of U+00A0 or U+3000
# (Unicode but not ASCII whitespace) is a line of its document
TEXT = ("A one.\nA two.\n  \n"
        "B one.\n\t\r\n"
        "C one.\n\u00a0\nC two.\n\f\n"
        "D one.\n\u3000\nD two.\n\x0b\n"
        "E one.\r\nE two.\r\n\r\n")
DOCUMENTS = ["A one. A two.", "B one.", "C one. C two.", "D one. D two.", "E one. E two."]


def words(text):
    return " ".join(text.split())


def test_is_blank_means_the_same_for_bytes_and_str():
    from biofairseq.text.documents import is_blank

    for line, blank in (("\n", True), ("", True), ("  \t\r\n", True), ("\f\x0b\n", True), ("\u00a0\n", False),
                        ("\u3000\n", False), ("x\n", False), (" x \n", False)):
        assert is_blank(line) is blank and is_blank(line.encode("utf-8")) is blank, line


def test_a_large_file_cut_into_pieces_names_the_line_of_a_bad_record_without_counting_lines_to_plan(tmp_path):
    """Planning reads only around each cut (the host does not count a 100 GB file's lines); a bad record's message
    still names its line in the file, counted by the piece that meets it."""
    path = tmp_path / "big.jsonl"
    lines = [json.dumps({"text": f"Documento número {i}."}) + "\n" for i in range(300)]
    lines[250] = '{"text": "sin cerrar\n'
    path.write_text("".join(lines), encoding="utf-8")
    pieces = [p for s in plan_shards("s", [Piece(str(path), "jsonl")], 2000) for p in s.pieces]
    assert len(pieces) > 5 and pieces[0].first_line == 1 and all(p.first_line == 0 for p in pieces[1:])
    found = [rest for p in pieces for kind, *rest in read_documents(p)]
    errors = [rest[0] for rest in found if len(rest) == 1]
    assert errors == [f"{path}:251: invalid JSON (Invalid control character at); fix or remove the line"]
    assert sum(len(rest) == 2 for rest in found) == 299


def test_every_splitter_finds_the_same_documents(tmp_path, monkeypatch):
    path = tmp_path / "docs.txt"
    path.write_bytes(TEXT.encode("utf-8"))
    # the raw text reader
    assert [words(text) for kind, _, text in read_documents(Piece(str(path), "text"))] == DOCUMENTS
    # large uncompressed files cut into pieces, at most a byte a shard: a piece a document
    pieces = [p for s in plan_shards("s", [Piece(str(path), "text")], 1) for p in s.pieces]
    assert [[words(t) for _, _, t in read_documents(p)] for p in pieces] == [[d] for d in DOCUMENTS]
    # large compressed files decompressed into parts of at most a byte: a part a document
    gz = tmp_path / "docs.txt.gz"
    gz.write_bytes(gzip.compress(TEXT.encode("utf-8")))
    parts = split_compressed(Piece(str(gz), "text"), 1, tmp_path / "parts")
    assert [words(open(p.path, encoding="utf-8").read()) for p in parts] == DOCUMENTS
    # a data-bin's shards, parts of at most a byte: a part a document
    parts = split_documents(path, 1, str(tmp_path / "bin" / "part{}.txt"))
    assert [words(open(p, encoding="utf-8").read()) for p in parts] == DOCUMENTS

    # the encoder, one symbol a character, none for U+00A0 and U+3000 (as SentencePiece, which normalizes them to
    # spaces and strips them): fairseq makes a line without tokens a lone </s>, a document boundary
    class Encoder:
        def __init__(self, vocab_dir):
            pass

        def encode_lines(self, lines, threads=1):
            return [" ".join(str(ord(c)) for c in line if c not in "\u00a0\u3000") for line in lines]

    monkeypatch.setattr(encode, "Encoder", Encoder)
    encode.encode_file("vocab", path, tmp_path / "encoded.txt")
    docs, doc = [], []
    for line in open(tmp_path / "encoded.txt", encoding="utf-8"):
        if line.split():
            doc.append("".join(chr(int(s)) for s in line.split()))
        elif doc:
            docs.append(words(" ".join(doc)))
            doc = []
    assert docs == DOCUMENTS


def _write(path, docs):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(d + "\n\n" for d in docs), encoding="utf-8")


def _docs(path):
    return [d for d in path.read_text(encoding="utf-8").split("\n\n") if d]


def _split(tmp_path, name, docs, valid_docs=40, seed=1, shards=3):
    """train and valid documents of ``docs`` cut into ``shards`` kept shards, as the pipeline's last stages make them."""
    from types import SimpleNamespace

    from biofairseq.corpus.dedup import Repeats

    kept, size = [], -(-len(docs) // shards)
    for k in range(shards):
        _write(tmp_path / name / "work" / f"{k}.txt", docs[k * size:(k + 1) * size])
        kept.append(pipeline.filter_shard((k, tmp_path / name / "work" / f"{k}.txt", (Repeats([]),) * 3, valid_docs,
                                           seed, tmp_path / name / "work" / f"kept{k}")))
    stages = pipeline.Stages(SimpleNamespace(launcher="local", workers=1), tmp_path / name / "work")
    pipeline._split(kept, tmp_path / name, valid_docs, stages)
    return _docs(tmp_path / name / "train.txt"), _docs(tmp_path / name / "valid.txt")


def test_adding_a_source_keeps_the_valid_documents_that_no_new_one_displaces(tmp_path):
    first = [f"Documento {i} de la primera fuente.\nSegunda frase {i}." for i in range(1000)]
    second = [f"Documento {i} de la segunda fuente." for i in range(200)]
    train, valid = _split(tmp_path, "one", first)
    assert len(valid) == 40 and sorted(train + valid, key=first.index) == first
    assert [d for d in first if d in valid] == valid and [d for d in first if d in train] == train  # corpus order
    for name, corpus in (("after", first + second), ("before", second + first)):
        train2, valid2 = _split(tmp_path, name, corpus)
        entered = len(set(valid2) - set(first))
        stayed = len(set(valid) & set(valid2))
        assert stayed == 40 - entered and stayed >= 25, (name, stayed, entered)
        assert [d for d in corpus if d in valid2] == valid2
    assert set(_split(tmp_path, "seed2", first, seed=2)[1]) != set(valid)


def test_identical_documents_are_drawn_deterministically(tmp_path):
    corpus = [f"Documento {i}." for i in range(100)] * 2
    train, valid = _split(tmp_path, "one", corpus, valid_docs=41)
    assert len(valid) == 41 and len(train) == 159
    assert (train, valid) == _split(tmp_path, "two", corpus, valid_docs=41)


def _clean_corpus_module():
    spec = importlib.util.spec_from_file_location("clean_corpus_cli", REPO / "preprocess" / "clean_corpus.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("launcher", ["submitit-local", "slurm"])
def test_large_compressed_files_are_split_as_array_tasks_under_a_job_array_launcher(launcher, tmp_path, monkeypatch):
    """Under --launcher slurm the decompression of large compressed inputs runs as a job array (here through the
    stand-in sbatch of tests/slurm), a task a file, not in --workers processes of the submitting host; then the shards
    run as job arrays of at most --slurm-array-size tasks (submitit's local executor, or its Slurm executor with the
    stand-in sbatch, srun and sacct, which keep the sbatch scripts submitit writes and run them here). The outputs match
    local workers."""
    raw = tmp_path / "raw"
    raw.mkdir()
    for name, (first, count) in {"a": (0, 60), "b": (60, 60)}.items():
        with gzip.open(raw / f"{name}.jsonl.gz", "wt", encoding="utf-8") as f:
            f.writelines(clinical_lines(first, count))
    mapped = []  # the functions of every local process pool
    real_map = multiprocessing.pool.Pool.map
    monkeypatch.setattr(multiprocessing.pool.Pool, "map",
                        lambda pool, f, *a, **k: mapped.append(f.__name__) or real_map(pool, f, *a, **k))
    cli = _clean_corpus_module()
    common = ["--source", f"cases={raw}", "--lang", "es", "--valid-docs", 10, "--shard-size", 100_000, "--quiet",
              "--workers", 2, "--keep-work"]

    def clean(out, *extra):
        args = cli.parse_args([str(a) for a in (*common, "--output-dir", out, *extra)])
        pipeline.clean_corpus(cli.options.options_from_args(args), cli.config_from_args(args))

    clean(tmp_path / "local")
    assert any("split" in f for f in mapped)  # the spy sees the local splitting
    mapped.clear()
    monkeypatch.setenv("PATH", f"{REPO / 'tests' / 'slurm'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("SLURM_STANDIN", str(tmp_path / "slurm"))
    clean(tmp_path / "array", "--launcher", launcher, "--slurm-array-size", 2, "--slurm-partition", "cpu",
          "--slurm-time", 30)
    assert not mapped, mapped  # no stage in the submitting host's processes
    work = tmp_path / "array" / "work"
    assert len(list((work / "submitit-split").glob("*_log.out"))) == 2  # a task a file
    shards = len(json.loads((work / "plan.json").read_text())["shards"])
    assert shards >= 4 and len(list((work / "submitit").glob("*_log.out"))) == shards  # every task's log there
    # then the deduplication's partitions (a task a shard) and buckets, the filter (a task a shard), the split (one)
    assert len(list((work / "submitit-filter").glob("*_log.out"))) == shards
    assert len(list((work / "submitit-dedup").glob("*_log.out"))) == 2 * (shards + 1)  # documents, then sentences
    assert len(list((work / "submitit-split-valid").glob("*_log.out"))) == 1
    if launcher == "slurm":
        scripts = [p.read_text() for p in sorted((tmp_path / "slurm").glob("*.sh"), key=lambda p: int(p.stem))]
        shard_arrays = (shards + 1) // 2  # the split array, then the shards' arrays of at most 2 tasks
        assert len(scripts) == 1 + shard_arrays + 2 * (shard_arrays + 1) + shard_arrays + 1
        for k, script in enumerate(scripts[:1 + shard_arrays]):
            tasks = 2 if k == 0 else min(2, shards - 2 * (k - 1))
            for line in (f"--array=0-{tasks - 1}%{tasks}", "--cpus-per-task=1", "--partition=cpu", "--time=30"):
                assert f"#SBATCH {line}\n" in script, (line, script)
        for script in scripts[1 + shard_arrays:]:
            assert "#SBATCH --partition=cpu\n" in script and "--array=0-2" not in script, script
    for name in ("train.txt", "valid.txt"):
        assert (tmp_path / "array" / name).read_bytes() == (tmp_path / "local" / name).read_bytes()
