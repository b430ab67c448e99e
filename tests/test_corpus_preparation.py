"""preprocess/: raw real sources -> cleaned documents -> vocabulary -> data-bin -> document_mlm training."""

import bz2
import functools
import gzip
import itertools
import json
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import xxhash

import command_server
import inprocess
from biofairseq.dev.samples import NCBI, PHARMACONER, REPO, clinical_lines, trainer_in_process

ENGLISH_DOC = (
    "The patient was admitted with fever and abdominal pain.\nBlood cultures were negative and the fever "
    "resolved after three days of intravenous antibiotics.\nShe was discharged home in good condition."
)


def docs_of(path):
    return [d for d in Path(path).read_text(encoding="utf-8").split("\n\n") if d.strip()]


def run_py(script, *args, check=True, cwd=None):
    """preprocess/SCRIPT as ``python SCRIPT ARGS`` runs it, in this process (binarize.sh, a shell script, runs in bash
    with its Python commands served here: run_script)."""
    return inprocess.run("python", REPO / "preprocess" / script, *args, check=check, cwd=cwd)


def run_script(script, *args, check=True, cwd=None):
    return command_server.script(script, *args, check=check, cwd=cwd)


def binarize_here(clean_dir, vocab, out, *flags):
    """``python -m biofairseq.corpus.binarize``, the binarizer that binarize.sh runs after its checks, in this process."""
    return inprocess.run("python", "-m", "biofairseq.corpus.binarize", clean_dir, vocab, out, "--workers", 2, *flags)


@pytest.fixture(scope="module")
def raw_sources(tmp_path_factory):
    """Three sources in four formats, with duplicates across sources, English, and broken records."""
    raw = tmp_path_factory.mktemp("raw")
    cases = clinical_lines(0, 300)
    with gzip.open(raw / "cases.jsonl.gz", "wt", encoding="utf-8") as f:
        f.writelines(cases[:150])
        f.write(json.dumps({"id": "en", "text": ENGLISH_DOC}) + "\n")
        f.write('{"id": "broken", "text": "no closing quote}\n')  # line 152: invalid JSON
        f.write(json.dumps({"id": "notext", "body": "x"}) + "\n")  # line 153: no text field
        f.writelines(cases[150:])
    # the second source repeats 40 documents of the first, as plain text with blank lines, bz2-compressed
    reports = raw / "reports"
    reports.mkdir()
    texts = ["\n".join(p for p in json.loads(line)["text"].split("\n") if p.strip()) for line in clinical_lines(260, 100)]
    with bz2.open(reports / "part1.txt.bz2", "wt", encoding="utf-8") as f:
        f.write("\n\n".join(texts[:50]) + "\n")
    (reports / "part2.txt").write_bytes(
        "\n\n".join(texts[50:]).encode("utf-8") + b"\n\nTexto roto \xff\xfe en la l\xednea.\n"
    )
    (reports / "empty.txt").write_text("")
    brat = raw / "brat"
    brat.mkdir()
    for ann in sorted((PHARMACONER / "train").glob("*.ann"))[:6]:
        shutil.copy(ann, brat)
        shutil.copy(ann.with_suffix(".txt"), brat)
    shutil.copy(ann.with_suffix(".txt"), brat / "unpaired.txt")
    return raw


def clean(raw, out, *extra, check=True):
    return run_py(
        "clean_corpus.py", "--source", f"cases={raw / 'cases.jsonl.gz'}", "--source",
        f"reports={raw / 'reports'}", "--source", f"pharma={raw / 'brat'}", "--output-dir", out, "--lang", "es",
        "--valid-docs", 40, "--quiet", *extra, check=check,
    )


@pytest.fixture(scope="module")
def cleaned(raw_sources, tmp_path_factory):
    out = tmp_path_factory.mktemp("clean")
    clean(raw_sources, out, "--workers", 2)
    return out, json.loads((out / "stats.json").read_text())


def test_cleaning_counts_and_output_layout(cleaned):
    out, stats = cleaned
    train, valid = docs_of(out / "train.txt"), docs_of(out / "valid.txt")
    assert len(valid) == 40 and len(train) == stats["total"]["docs_out"] - 40
    text = (out / "train.txt").read_text(encoding="utf-8")
    assert text.endswith("\n\n") and "\n\n\n" not in text  # one blank line between documents
    for name, counts in stats["sources"].items():
        assert counts["docs_out"] <= counts["docs_in"] and counts["tokens_out"] <= counts["tokens_in"]
    assert stats["sources"]["cases"]["docs_in"] == 301
    assert stats["sources"]["pharma"]["docs_in"] == 6


def test_duplicates_across_sources_are_kept_once(cleaned):
    out, stats = cleaned
    docs = docs_of(out / "train.txt") + docs_of(out / "valid.txt")
    assert len({xxhash.xxh3_64_intdigest(d.encode()) for d in docs}) == len(docs)
    assert stats["sources"]["reports"]["duplicate_docs_global"] == 40  # documents 260-299 are in both
    from biofairseq.text.sentences import split_sentences

    sentence = max(split_sentences(json.loads(clinical_lines(270, 1)[0])["text"]), key=len)
    lines = [line for d in docs for line in d.split("\n")]
    assert lines.count(" ".join(sentence.split())) == 1


class SequentialDeduplicator:
    """The oracle: the single pass with a dict of every hash that the bucketed deduplication replaced (its code, kept
    here): the first occurrence in corpus order stays, and a repeat is counted as in its own source or across sources."""

    def __init__(self, min_words):
        self.min_words, self.docs, self.sentences = min_words, {}, {}

    def _first_seen(self, table, key, source):
        h = xxhash.xxh3_64_intdigest(key.encode("utf-8"))
        first = table.get(h)
        if first is None:
            table[h] = source
            return None
        return "source" if first == source else "global"

    def filter(self, sentences, source, counts):
        seen = self._first_seen(self.docs, "\n".join(sentences), source)
        if seen:
            counts[f"duplicate_docs_{seen}"] += 1
            return None
        kept = []
        for s in sentences:
            if s.count(" ") + 1 >= self.min_words:
                seen = self._first_seen(self.sentences, s, source)
                if seen:
                    counts[f"duplicate_sentences_{seen}"] += 1
                    continue
            kept.append(s)
        counts["left_empty"] += not kept
        return kept or None


@pytest.fixture(scope="module")
def repeats(tmp_path_factory):
    """Two sources whose documents repeat whole, repeat paragraphs of others (so some are left with nothing), and
    repeat across sources."""
    raw = tmp_path_factory.mktemp("repeats")
    texts = [json.loads(line)["text"] for line in clinical_lines(0, 160)]
    paragraphs = [p for t in texts for p in t.split("\n") if len(p.split()) > 12]
    mixes = ["\n".join(paragraphs[i::37][:3]) for i in range(30)] + paragraphs[:20]  # the last 20: one paragraph each
    first = texts[:100] + texts[:10] + mixes
    second = texts[80:160] + mixes[::3]
    for name, docs in (("first", first), ("second", second)):
        (raw / f"{name}.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in docs), encoding="utf-8")
    return raw


def clean_repeats(raw, out, *extra):
    run_py("clean_corpus.py", "--source", f"first={raw / 'first.jsonl'}", "--source", f"second={raw / 'second.jsonl'}",
           "--output-dir", out, "--lang", "es", "--valid-docs", 20, "--quiet", *extra)
    return json.loads((out / "stats.json").read_text())


def test_bucketed_deduplication_keeps_what_one_pass_over_all_hashes_keeps(repeats, tmp_path):
    # shards of ~40 kB and 64 hashes a bucket: several shards per source and buckets per kind
    stats = clean_repeats(repeats, tmp_path / "buckets", "--workers", 2, "--shard-size", 40_000,
                          "--dedup-bucket-hashes", 64, "--keep-work")
    work = tmp_path / "buckets" / "work"
    plan = json.loads((work / "plan.json").read_text())
    names = [f"{s['source']}/{s['index']:05d}" for s in plan["shards"]]
    assert len(names) >= 4
    oracle, expected, counts = SequentialDeduplicator(5), [], {"first": Counter(), "second": Counter()}
    for source_index, source in enumerate(("first", "second")):
        for name in (n for n, s in zip(names, plan["shards"]) if s["source"] == source):
            for doc in docs_of(work / "shards" / f"{name}.txt"):
                kept = oracle.filter(doc.split("\n"), source_index, counts[source])
                if kept:
                    expected.append("\n".join(kept))
    assert [d for name in names for d in docs_of(work / "kept" / f"{name}.txt")] == expected
    for source in ("first", "second"):
        for kind in ("docs_source", "docs_global", "sentences_source", "sentences_global"):
            found = stats["sources"][source].get(f"duplicate_{kind}", 0)
            assert found == counts[source][f"duplicate_{kind}"], (source, kind)
    # every kind of repeat happened, and a document left with no sentence was dropped
    assert all(counts["first"][f"duplicate_{k}_source"] for k in ("docs", "sentences"))
    assert all(counts["second"][f"duplicate_{k}_global"] for k in ("docs", "sentences"))
    cleaning_empty = sum(json.loads((work / "shards" / f"{n}.json").read_text())["counts"].get("empty_docs", 0) for n in names)
    left_empty = counts["first"]["left_empty"] + counts["second"]["left_empty"]
    assert left_empty > 0 and stats["total"]["empty_docs"] == cleaning_empty + left_empty
    # one bucket and one shard per source: the same corpus
    whole = clean_repeats(repeats, tmp_path / "whole")
    assert whole["total"] == stats["total"]
    for split in ("train", "valid"):
        assert (tmp_path / "whole" / f"{split}.txt").read_text() == (tmp_path / "buckets" / f"{split}.txt").read_text()


def test_near_duplicate_documents_are_dropped_when_asked_and_distinct_ones_kept(tmp_path):
    """Planted copies of cases of 300 words or more with one word changed (word 5-gram Jaccard above 0.96: found with
    probability 0.9999) go at --near-duplicates 0.8; copies with 1 word in 8 changed (about 0.35: 0.0001) stay, as do
    the originals; with the default (off) every copy stays."""
    texts = [json.loads(line)["text"] for line in clinical_lines(0, 200)]
    rng = np.random.default_rng(1)

    def changed(text, every):
        words = text.split(" ")
        for place in rng.choice(len(words), max(1, len(words) // every), replace=False):
            words[place] = "modificado"
        return " ".join(words)

    long = [t for t in texts if len(t.split()) >= 300][:20]
    close, far = [changed(t, 10_000) for t in long[:10]], [changed(t, 8) for t in long[10:]]
    source = tmp_path / "cases.jsonl"
    source.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts + close + far), encoding="utf-8")
    args = ["--source", f"cases={source}", "--lang", "es", "--valid-docs", 5, "--quiet", "--workers", 2]
    run_py("clean_corpus.py", *args, "--output-dir", tmp_path / "off")
    run_py("clean_corpus.py", *args, "--output-dir", tmp_path / "near", "--near-duplicates", 0.8)
    off, near = (json.loads((tmp_path / name / "stats.json").read_text())["sources"]["cases"] for name in ("off", "near"))
    assert off.get("near_duplicate_docs_source", 0) == 0
    assert near["near_duplicate_docs_source"] == len(close) == 10
    kept = docs_of(tmp_path / "near" / "train.txt") + docs_of(tmp_path / "near" / "valid.txt")
    assert not any(d.count("modificado") == 1 for d in kept)  # no close copy is left
    assert sum("modificado" in d for d in kept) == len(far)  # every far copy is


def test_byte_level_bpe_learns_from_a_bounded_seeded_sample(cleaned, tmp_path):
    from biofairseq.corpus.vocab import sample_lines, train_bytelevel_bpe

    train = cleaned[0] / "train.txt"
    lines = [line + "\n" for line in train.read_bytes().decode("utf-8").split("\n")[:-1] if line]  # at "\n" alone
    sample = sample_lines([train], 300)
    assert len(sample) == 300 and set(sample) <= set(lines) and sample == sample_lines([train], 300)  # seeded
    assert sample_lines([train], len(lines)) is None  # no more lines than the bound: the files are read whole
    (tmp_path / "sample.txt").write_text("".join(sample), encoding="utf-8")
    for name, files, bound in (("bounded", [train], 300), ("sample", [tmp_path / "sample.txt"], 10_000_000)):
        (tmp_path / name).mkdir()
        train_bytelevel_bpe(files, tmp_path / name, 600, max_sentences=bound)
    assert (tmp_path / "bounded" / "merges.txt").read_text() == (tmp_path / "sample" / "merges.txt").read_text()


def test_non_spanish_document_is_dropped(cleaned):
    out, stats = cleaned
    assert stats["sources"]["cases"]["other_language_docs"] == 1
    everything = (out / "train.txt").read_text() + (out / "valid.txt").read_text()
    assert "Blood cultures were negative" not in everything


def test_unreadable_inputs_are_counted_with_file_and_line(cleaned, raw_sources):
    _, stats = cleaned
    assert stats["sources"]["cases"]["unreadable_docs"] == 2
    assert stats["sources"]["reports"]["unreadable_docs"] == 2  # the bad bytes, the empty file
    assert stats["sources"]["pharma"]["unreadable_docs"] == 1  # the .txt without .ann
    errors = "\n".join(e for errs in stats["errors"].values() for e in errs)
    assert "cases.jsonl.gz:152: invalid JSON" in errors
    assert 'cases.jsonl.gz:153: no "text" string field' in errors
    assert re.search(r"part2.txt:\d+: invalid UTF-8 byte 0xff", errors)
    assert "empty.txt: empty file" in errors and "unpaired.txt: BRAT file without its .ann" in errors


def test_strict_stops_at_the_first_bad_record_and_writes_nothing(raw_sources, tmp_path):
    proc = clean(raw_sources, tmp_path, "--strict", check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1].startswith("error: ")
    assert not (tmp_path / "train.txt").exists() and not (tmp_path / "stats.json").exists()


def test_valid_split_is_disjoint_and_seeded(cleaned, tmp_path):
    out, _ = cleaned
    train = {xxhash.xxh3_64_intdigest(d.encode()) for d in docs_of(out / "train.txt")}
    valid = {xxhash.xxh3_64_intdigest(d.encode()) for d in docs_of(out / "valid.txt")}
    assert not train & valid
    source = tmp_path / "cases.jsonl"  # --seed draws another valid set (of 5 in 40 documents)
    source.write_text("".join(clinical_lines(0, 40)), encoding="utf-8")
    args = ["--source", f"cases={source}", "--lang", "es", "--valid-docs", 5, "--quiet"]
    for seed in (1, 2):
        run_py("clean_corpus.py", *args, "--seed", seed, "--output-dir", tmp_path / f"seed{seed}")
    assert set(docs_of(tmp_path / "seed1" / "valid.txt")) != set(docs_of(tmp_path / "seed2" / "valid.txt"))


def test_a_rerun_cleans_only_the_shards_left_and_a_finished_run_is_left_alone(tmp_path):
    """What a killed run leaves (test_kill_anywhere kills a real one): some shards done, no outputs. The rerun says
    how many shards it kept and makes the uninterrupted run's outputs; a rerun of a finished run does nothing."""
    source = tmp_path / "cases.jsonl"
    source.write_text("".join(clinical_lines(0, 120)), encoding="utf-8")
    args = ["--source", f"cases={source}", "--lang", "es", "--valid-docs", 10, "--shard-size", 40_000]
    out = tmp_path / "out"
    run_py("clean_corpus.py", *args, "--quiet", "--keep-work", "--output-dir", out)
    whole = {name: (out / name).read_bytes() for name in ("train.txt", "valid.txt", "stats.json")}
    for name in (*whole, "timing.json"):
        (out / name).unlink()
    results = sorted((out / "work" / "shards" / "cases").glob("*.json"))
    total = len(json.loads((out / "work" / "plan.json").read_text())["shards"])
    done = total // 2
    assert len(results) == total and 1 <= done < total
    for result in results[done:]:  # cut short before their results were written
        result.unlink()
    resumed = run_py("clean_corpus.py", *args, "--output-dir", out)
    assert f"resuming: {done} of {total} shards already cleaned" in resumed.stderr
    assert {name: (out / name).read_bytes() for name in whole} == whole
    again = run_py("clean_corpus.py", *args, "--quiet", "--output-dir", out)  # complete: nothing to do
    assert again.returncode == 0 and {name: (out / name).read_bytes() for name in whole} == whole
    assert not (out / "work").exists()


def test_a_bilingual_source_has_every_sentence_read_and_the_others_keep_the_default(tmp_path):
    """--source-langid abstracts=sentence: that source's sentences are all read by the language id (no gate), the other
    source's only behind the gate; a name that is no --source stops before any work."""
    english = " ".join(line.split("\t")[0] for line in (NCBI / "train.tsv").read_text(encoding="utf-8").splitlines()[:40])
    spanish = [json.loads(line)["text"] for line in clinical_lines(0, 30)]
    docs = [{"text": f"{text} {english.capitalize()}."} for text in spanish]
    for name in ("abstracts", "cases"):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    args = ["--source", f"abstracts={tmp_path / 'abstracts.jsonl'}", "--source", f"cases={tmp_path / 'cases.jsonl'}",
            "--lang", "es", "--valid-docs", 2, "--quiet"]
    run_py("clean_corpus.py", *args, "--output-dir", tmp_path / "out", "--source-langid", "abstracts=sentence")
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())["sources"]
    assert stats["abstracts"]["sentences_in"] == stats["cases"]["sentences_in"]
    assert stats["abstracts"].get("other_language", 0) > stats["cases"].get("other_language", 0)
    proc = run_py("clean_corpus.py", *args, "--output-dir", tmp_path / "bad", "--source-langid", "scielo=sentence",
                  check=False)
    assert proc.returncode == 2 and "--source-langid scielo=sentence: no --source is named scielo" in proc.stderr
    assert not (tmp_path / "bad").exists()


def test_a_rerun_after_the_shards_were_cleaned_redoes_only_the_filtering_left(tmp_path):
    """Killed after deduplication, while the shards were being filtered of their repeats (each shard's filtering a
    task of its own): the rerun filters only the shards without a result, reuses the others, and makes the
    uninterrupted run's outputs."""
    source = tmp_path / "cases.jsonl"
    source.write_text("".join(clinical_lines(0, 120)), encoding="utf-8")
    args = ["--source", f"cases={source}", "--lang", "es", "--valid-docs", 10, "--shard-size", 40_000, "--quiet",
            "--keep-work"]
    out = tmp_path / "out"
    run_py("clean_corpus.py", *args, "--output-dir", out)
    whole = {name: (out / name).read_bytes() for name in ("train.txt", "valid.txt", "stats.json")}
    for name in whole:
        (out / name).unlink()
    results = sorted((out / "work" / "kept" / "cases").glob("*.json"))
    assert len(results) >= 4
    for result in results[1::2]:  # half the shards not yet filtered
        result.unlink()
    kept = {p: p.stat().st_mtime_ns for p in (out / "work" / "kept" / "cases").glob("*.txt")}
    run_py("clean_corpus.py", *args, "--output-dir", out)
    assert {name: (out / name).read_bytes() for name in whole} == whole
    redone = {p for p, mtime in kept.items() if p.stat().st_mtime_ns != mtime}
    assert redone == {Path(str(r)[:-len(".json")] + ".txt") for r in results[1::2]}


@pytest.fixture(scope="module", params=["bytelevel-bpe", "sentencepiece"])
def vocab_and_bin(request, cleaned, tmp_path_factory):
    """A vocabulary of the cleaned corpus (train_vocab.py) and its data-bin (binarize.sh's binarizer)."""
    out, _ = cleaned
    root = tmp_path_factory.mktemp(request.param)
    run_py("train_vocab.py", "--input", out / "train.txt", "--type", request.param,
           "--vocab-size", 3000, "--output-dir", root / "vocab", "--workers", 2)
    binarize_here(out, root / "vocab", root / "data-bin")
    return out, root / "vocab", root / "data-bin"


def test_vocabulary_round_trips_text_and_ids_equal_fairseq_indices(vocab_and_bin):
    from fairseq.data import Dictionary

    from biofairseq.corpus.vocab import Encoder

    clean_dir, vocab, data_bin = vocab_and_bin
    sentences = [s for d in docs_of(clean_dir / "valid.txt") for s in d.split("\n")][:500]
    encoder = Encoder(vocab)
    encoded = encoder.encode_lines(sentences)
    assert [encoder.decode(e) for e in encoded] == sentences  # held-out text round-trips exactly
    dictionary = Dictionary.load(str(data_bin / "dict.txt"))
    dictionary.add_symbol("<mask>")  # as the masked LM tasks do
    assert len(dictionary) == json.loads((vocab / "vocab_info.json").read_text())["size"] == 3000
    assert dictionary.index("<mask>") == 4
    if encoder.type == "bytelevel-bpe":
        ids = [encoder.tok.encode(s).ids for s in sentences]
    else:
        ids = encoder.sp.encode(sentences)
    for e, i in zip(encoded, ids):
        assert dictionary.encode_line(e, append_eos=False, add_if_not_exist=False).tolist() == i


def test_document_boundaries_survive_encoding_and_binarization(vocab_and_bin):
    from fairseq.data import data_utils
    from fairseq.data import Dictionary

    clean_dir, _, data_bin = vocab_and_bin
    dictionary = Dictionary.load(str(data_bin / "dict.txt"))
    for split in ("train", "valid"):
        lines = data_utils.load_indexed_dataset(str(data_bin / split), dictionary)
        separators = int((lines.sizes == 1).sum())  # a blank line binarizes to </s> alone
        assert separators == len(docs_of(clean_dir / f"{split}.txt"))
        assert len(lines) == len((clean_dir / f"{split}.txt").read_text().splitlines())


def test_token_counts_are_read_in_chunks_and_recorded_once(vocab_and_bin):
    from fairseq.data import data_utils
    from fairseq.data import Dictionary

    from biofairseq.corpus.vocab import recorded_counts, token_counts

    _, _, data_bin = vocab_and_bin
    lines = data_utils.load_indexed_dataset(str(data_bin / "train"), Dictionary.load(str(data_bin / "dict.txt")))
    everything = np.bincount(np.concatenate([lines[i].numpy() for i in range(len(lines))]))
    chunked = token_counts(data_bin, "train", 8, chunk=1000)  # chunks of 1,000 tokens, and fewer counts asked for
    assert chunked.tolist() == everything.tolist()
    recorded = recorded_counts(data_bin, "train")  # what the binarizer wrote into dict.txt
    assert recorded[4:].tolist() == np.pad(everything, (0, len(recorded) - len(everything)))[4:].tolist()
    assert recorded_counts(data_bin, "valid") is None


# Lines a user's own text may hold that cleaned text does not: every kind of whitespace, a carriage return inside a
# line, the vocabulary's special tokens written out, scripts the vocabulary never saw, and a line that encodes to
# nothing in SentencePiece (U+00A0 alone).
ODD_DOCUMENT = "\n".join([
    "dos  espacios y\ttabulador", " espacio al principio", "y al final ", "no\u00a0separable\u2009fino", "\u3000\u3000",
    "\u00a0", "retorno\rde carro\r\ren medio", "<mask> <s> </s> <unk> <pad>", "emoji 🧬, 中文 y e\u0301 combinada",
    "MAYÚSCULAS Ǆ İ ß ΣΑΣ", "números 1.000,5 mg/kg ²³ ½ Ⅻ", "it's we've 're 'll", "\x0b\x0c\x1c\x1d\x1e\x1f\x85 controles",
    "\u2028separador\u2029de párrafo", "\ufeffcon BOM", "\u180emongol\u200bancho cero",
])


def with_odd_documents(clean_dir, folder):
    """clean_dir's text with ODD_DOCUMENT after its first document and at the end (no final blank line) of each split."""
    folder.mkdir()
    for split in ("train", "valid"):
        docs = docs_of(clean_dir / f"{split}.txt")
        text = "".join(d + "\n\n" for d in [docs[0], ODD_DOCUMENT, *docs[1:]]) + ODD_DOCUMENT
        (folder / f"{split}.txt").write_text(text, encoding="utf-8", newline="")
    return folder


def data_files(data_bin):
    """Every file of a data-bin and its bytes, but fairseq-preprocess's log (which names temporary paths)."""
    return {str(p.relative_to(data_bin)): p.read_bytes() for p in sorted(Path(data_bin).rglob("*"))
            if p.is_file() and p.name != "preprocess.log"}


def two_shards(clean_dir, vocab, tmp_path):
    """SHARD_MB that cuts the encoded training text (as encode.py writes it) into two shards: 60% of its size."""
    from biofairseq.corpus.encode import encode_file

    encode_file(vocab, clean_dir / "train.txt", tmp_path / "train.bpe")
    return f"{(tmp_path / 'train.bpe').stat().st_size * 0.6 / (1 << 20):.4f}"


def assert_binarized_alike(new, reference, shards):
    """The two data-bins hold the same files, byte for byte: a data-bin, or (shards=2) two shards."""
    new, reference = data_files(new), data_files(reference)
    trains = ["shard0/train.bin", "shard1/train.bin"] if shards == 2 else ["train.bin"]
    assert [name for name in new if name.endswith("train.bin")] == trains
    assert new.keys() == reference.keys()
    assert [name for name in new if new[name] != reference[name]] == []


@pytest.fixture(scope="module")
def odd_binarized(vocab_and_bin, tmp_path_factory):
    """(text, vocabulary, new, reference): the cleaned corpus with ODD_DOCUMENT, binarized by the binarizer and by
    binarize.sh --reference. Byte-level BPE (its word cache sizes the text its own way): by binarize.sh, in two
    shards; SentencePiece whole (the irregular pieces' test cuts SentencePiece shards)."""
    clean_dir, vocab, _ = vocab_and_bin
    root = tmp_path_factory.mktemp("odd")
    odd = with_odd_documents(clean_dir, root / "clean")
    if "bytelevel" in vocab.parent.name:
        megabytes = two_shards(odd, vocab, root)
        run_script("preprocess/binarize.sh", odd, vocab, root / "new", 2, megabytes)
    else:
        megabytes = "0"
        binarize_here(odd, vocab, root / "new")
    run_script("preprocess/binarize.sh", "--reference", odd, vocab, root / "reference", 2, megabytes)
    return odd, vocab, root / "new", root / "reference"


def test_binarized_byte_for_byte_as_encode_py_and_fairseq_preprocess_give_it(odd_binarized):
    from fairseq.data.indexed_dataset import MMapIndexedDataset

    from biofairseq.corpus.binarize import document_ranges
    from biofairseq.text.documents import is_blank

    odd, vocab, new, reference = odd_binarized
    bytelevel = "bytelevel" in vocab.parent.name
    assert_binarized_alike(new, reference, shards=2 if bytelevel else 1)
    if not bytelevel:
        return
    # the cut is inside the second of the parts that the two workers encode: shard0 is assembled from both
    (_, first_part_end), _ = document_ranges(odd / "train.txt", 2)
    first_part = (odd / "train.txt").read_bytes()[:first_part_end].split(b"\n")[:-1]
    shard0 = MMapIndexedDataset(str(new / "shard0" / "train"))
    assert (shard0.sizes == 1).sum() > sum(is_blank(line) for line in first_part)  # a blank line: a lone </s>


def test_irregular_sentencepiece_pieces_binarize_as_fairseq_reads_their_text(tmp_path):
    """A SentencePiece model learnt on text with tabs and ideographic spaces has pieces that fairseq's line reader
    splits (whitespace): lines holding them take the reference's way."""
    from fairseq.data import Dictionary

    from biofairseq.corpus.binarize import Indices
    from biofairseq.corpus.vocab import train_sentencepiece, write_info

    lines = [f"campo\t{i}\tvalor\u3000{i % 7}\t\tfin \u3000{i % 3}" for i in range(400)]
    odd = tmp_path / "clean"
    odd.mkdir()
    (odd / "train.txt").write_text("".join(f"{a}\n{b}\n\n" for a, b in zip(lines[::2], lines[1::2])), encoding="utf-8")
    vocab = tmp_path / "vocab"
    vocab.mkdir()
    size = train_sentencepiece([odd / "train.txt"], vocab, 400, model_type="bpe")
    write_info(vocab, "sentencepiece", size)
    with open(odd / "train.txt", "a", encoding="utf-8", newline="") as f:
        f.write(ODD_DOCUMENT)  # characters the vocabulary never saw: byte pieces
    (odd / "valid.txt").write_text("\n".join(lines[:5]) + "\n\n" + ODD_DOCUMENT + "\n", encoding="utf-8", newline="")
    irregular = Indices(vocab, Dictionary.load(str(vocab / "dict.txt"))).irregular
    assert irregular.sum() >= 2  # pieces holding "\t" or "\u3000"
    megabytes = two_shards(odd, vocab, tmp_path)
    binarize_here(odd, vocab, tmp_path / "new", "--shard-mb", megabytes)
    run_script("preprocess/binarize.sh", "--reference", odd, vocab, tmp_path / "reference", 2, megabytes)
    assert_binarized_alike(tmp_path / "new", tmp_path / "reference", shards=2)


# What str.splitlines() cuts a line at besides "\n" (and "\r", which fairseq's own readers cut at too)
LINE_BREAKS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\r"


@pytest.mark.parametrize("byte_fallback", [True, False], ids=["byte-fallback", "no-byte-fallback"])
def test_sentencepiece_pieces_of_line_breaking_characters_binarize_as_the_reference(byte_fallback, tmp_path):
    """A SentencePiece vocabulary learnt (identity normalisation) on text holding them has pieces of them: dict.txt
    keeps one line a piece, and fairseq loads it. Without byte fallback, what the vocabulary lacks is an unknown
    piece that encode.py writes as its text, which fairseq looks up (a piece of whitespace: no token at all)."""
    import sentencepiece as spm
    from fairseq.data import Dictionary

    from biofairseq.corpus.vocab import train_sentencepiece, write_info

    lines = [f"{c}campo{c}{i}{c}valor {c * 2}fin {c}{i % 7}{c}" for i in range(400) for c in LINE_BREAKS[i % 9]]
    odd = tmp_path / "clean"
    odd.mkdir()
    text = "".join(f"{a}\n{b}\n\n" for a, b in zip(lines[::2], lines[1::2]))
    (odd / "train.txt").write_text(text, encoding="utf-8", newline="")
    vocab = tmp_path / "vocab"
    vocab.mkdir()
    size = train_sentencepiece([odd / "train.txt"], vocab, 80 + 260 * byte_fallback, model_type="bpe",
                               byte_fallback=byte_fallback)
    write_info(vocab, "sentencepiece", size)
    sp = spm.SentencePieceProcessor(model_file=str(vocab / "sentencepiece.model"))
    pieces = sp.id_to_piece(list(range(size)))
    assert {c for c in LINE_BREAKS if any(c in p and p.isspace() for p in pieces)} == set(LINE_BREAKS)
    lacked = ODD_DOCUMENT + "\n\nun\u3000espacio\u3000ideográfico\n\u3000\n"  # characters the vocabulary lacks
    unknown = {p for line in lacked.split("\n") for p, i in zip(sp.encode(line, out_type=str), sp.encode(line))
               if i == sp.unk_id()}
    assert any(p.isspace() for p in unknown) != byte_fallback
    with open(odd / "train.txt", "a", encoding="utf-8", newline="") as f:
        f.write(lacked)
    (odd / "valid.txt").write_text("\n".join(lines[:9]) + "\n\n" + lacked, encoding="utf-8", newline="")
    dictionary = Dictionary.load(str(vocab / "dict.txt"))
    assert len(dictionary) == size  # fairseq's 4 specials, then a line per piece: a fairseq index is the piece's id
    assert all(dictionary.index(p) == i for i, p in enumerate(pieces) if i > 3 and "\r" not in p)
    megabytes = two_shards(odd, vocab, tmp_path)
    binarize_here(odd, vocab, tmp_path / "new", "--shard-mb", megabytes)
    run_script("preprocess/binarize.sh", "--reference", odd, vocab, tmp_path / "reference", 2, megabytes)
    assert_binarized_alike(tmp_path / "new", tmp_path / "reference", shards=2)
    assert len(Dictionary.load(str(tmp_path / "new" / "shard1" / "dict.txt"))) == size


def test_the_byte_level_word_cache_gives_the_tokenizers_ids_for_every_character(vocab_and_bin):
    """Each character of the Basic Multilingual Plane at a line's start, inside a word, after and before a single
    space and at the line's end (the places where the cache may cut): the cache splits at single spaces only where
    the byte-level pre-tokenizer does, or sends the line to the tokenizer whole."""
    from fairseq.data import Dictionary

    from biofairseq.corpus.binarize import Indices

    _, vocab, data_bin = vocab_and_bin
    if "bytelevel" not in vocab.parent.name:
        pytest.skip("the cache is the byte-level BPE's")
    indices = Indices(vocab, Dictionary.load(str(data_bin / "dict.txt")))
    chars = [chr(c) for c in range(1, 0x10000) if not 0xD800 <= c < 0xE000]
    runs = ["".join(run) for run in itertools.product(" \tx\u00a0", repeat=5)]  # whitespace runs around spaces
    texts = [f"{c}b{c}cd ef {c}gh{c} {c}" for c in chars] + [f"a{r}b" for r in runs]
    encoded = indices.tok.encode_batch(texts)
    lengths = [len(e.ids) for e in encoded]
    expected = indices.table[np.fromiter(itertools.chain.from_iterable(e.ids for e in encoded), np.int64, sum(lengths))]
    ends = np.cumsum([0] + lengths)
    for start in range(0, len(texts), 20000):  # later batches find words in the cache, and miss others
        stop = min(start + 20000, len(texts))
        flat, got = indices.cached(texts[start:stop])
        assert got.tolist() == lengths[start:stop]
        assert flat.tolist() == expected[ends[start]:ends[stop]].tolist()
    assert len(indices.cache[0]) + len(indices.cache[1]) > 1000  # the words went through the cache
    # whatever the vocabulary's merges: where the cache takes a line, its words are the pre-tokenizer's
    from tokenizers import pre_tokenizers

    from biofairseq.corpus.binarize import splits_at_spaces

    pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    pieces = functools.lru_cache(maxsize=None)(lambda text: [p for p, _ in pre_tokenizer.pre_tokenize_str(text)])
    by_words = lambda text: sum((pieces(" " * (k > 0) + w) for k, w in enumerate(text.split(" "))), [])  # noqa: E731
    cut_elsewhere = [text for text in texts if by_words(text) != pieces(text)]
    assert "a \t \txb" in cut_elsewhere and not any(splits_at_spaces(text) for text in cut_elsewhere)


def test_a_sharded_data_bin_holds_the_same_documents_and_trains_an_epoch_on_each_shard(odd_binarized, tmp_path, caplog):
    from fairseq.data import data_utils
    from fairseq.data import Dictionary

    from biofairseq.corpus.vocab import read_dict
    from biofairseq.data_bin import fairseq_path, shards

    odd, vocab, sharded, _ = odd_binarized
    if "bytelevel" not in vocab.parent.name:
        pytest.skip("one vocabulary is enough")
    folders = shards(sharded)
    assert len(folders) >= 2 and [f.name for f in folders] == [f"shard{k}" for k in range(len(folders))]
    assert (folders[0] / "valid.bin").is_file() and not any((f / "valid.bin").exists() for f in folders[1:])
    assert all((f / "vocab.json").is_file() for f in folders)
    binarize_here(odd, vocab, tmp_path / "whole")  # the same text in one data-bin
    dictionary = Dictionary.load(str(tmp_path / "whole" / "dict.txt"))
    lines = lambda prefix: data_utils.load_indexed_dataset(str(prefix), dictionary)  # noqa: E731
    pieces = [[x.tolist() for x in lines(f / "train")] for f in folders]
    whole = lines(tmp_path / "whole" / "train")
    assert sum(pieces, []) == [whole[i].tolist() for i in range(len(whole))]  # the same lines, in order
    assert all(piece[-1] == [dictionary.eos()] for piece in pieces[:-1])  # each cut is at a document's end
    counts = np.bincount(np.concatenate(sum(pieces, [])), minlength=len(dictionary))[4:len(dictionary)]
    for folder in folders:  # every shard's dict.txt has the counts of all
        assert read_dict(folder / "dict.txt")[1] == counts.tolist()
    # fairseq's Trainer as fairseq-train drives it: an epoch's iterator loads its shard, and a step trains on it
    from fairseq.trainer import Trainer

    trainer = trainer_in_process(fairseq_path(sharded), "--task", "document_mlm", "--criterion",
                                 "masked_lm_accuracy", "--arch", "bio_roberta_tiny", "--tokens-per-sample", 128,
                                 "--batch-size", 8, "--optimizer", "adam", "--lr", "1e-3", "--max-epoch", 2, "--cpu",
                                 "--num-workers", 0, "--data-buffer-size", 0, "--seed", 1, trainer=Trainer)
    assert trainer.task.has_sharded_data("train")
    loaded = []
    for epoch in (1, 2):
        with caplog.at_level("INFO", logger="biofairseq.tasks.document_mlm"):
            batches = trainer.get_train_iterator(epoch, load_dataset=True).next_epoch_itr(shuffle=True)
        loaded += re.findall(r"blocks from \d+ lines of (\S+)/train", caplog.text)
        caplog.clear()
        assert np.isfinite(trainer.train_step([next(batches)])["loss"])
    assert loaded == [str(folders[0]), str(folders[1])]  # epoch 1 read shard0, epoch 2 shard1


def test_the_data_bin_trains_with_document_mlm_and_whole_words(vocab_and_bin):
    """fairseq's Trainer, task and model as fairseq-train builds them from these flags, in this process: 8 updates on
    the data-bin's own batches, masking whole words (the recipes run fairseq-train itself); with SentencePiece, as
    ModernBERT's block on packed rows at 30%."""
    import torch
    from fairseq.trainer import Trainer

    _, vocab, data_bin = vocab_and_bin
    model = ["--arch", "bio_roberta_tiny"]
    if json.loads((vocab / "vocab_info.json").read_text())["type"] == "sentencepiece":
        model = ["--arch", "bio_modernbert_tiny", "--pack-documents", "--mask-prob", "0.3"]
    trainer = trainer_in_process(data_bin, "--task", "document_mlm", "--mask-whole-words", "--criterion", "masked_lm_accuracy",
                                 *model, "--tokens-per-sample", 128, "--batch-size", 16,
                                 "--optimizer", "adam", "--lr", "1e-3", "--max-update", 8, "--cpu", "--seed", 1,
                                 trainer=Trainer, split="train")
    dataset = trainer.task.dataset("train")
    batches = trainer.task.get_batch_iterator(dataset, max_sentences=16, seed=1, num_workers=0).next_epoch_itr(shuffle=True)
    batches = [batch for batch, _ in zip(batches, range(8))]
    losses = [trainer.train_step([batch])["loss"] for batch in batches]
    assert len(losses) == 8 and all(np.isfinite(losses))
    starts = torch.as_tensor(trainer.task._word_starts.starts).bool()  # what the masking reads: which entries begin a word
    assert 0 < int(starts.sum()) < len(starts)
    pad = trainer.task.dictionary.pad()
    for batch in batches:  # a word's pieces are masked together, at about the rate asked
        src, target = batch["net_input"]["src_tokens"], batch["target"]
        masked = target.ne(pad)
        original = torch.where(masked, target, src)
        # a piece that continues a word, not after <s> or </s> (a line's first word has no leading space in byte BPE)
        continues = ~starts[original[:, 1:]] & original[:, :-1].ge(trainer.task.dictionary.nspecial)
        assert continues.any() and masked[:, 1:][continues].eq(masked[:, :-1][continues]).all()
        rate = masked.sum().item() / src.ne(pad).sum().item()
        assert 0.5 * float(trainer.task.cfg.mask_prob) < rate < 1.5 * float(trainer.task.cfg.mask_prob)


@pytest.mark.fast
def test_mojibake_is_repaired_and_clean_text_skips_ftfy():
    import ftfy

    from biofairseq.corpus.cleaning import _NEEDS_FTFY, CleaningConfig, DocumentCleaner, _ftfy_config

    cleaner = DocumentCleaner(CleaningConfig(langid="off"), "es")
    assert cleaner.repair("El paciente presentÃ³ fiebre y cefalea.") == "El paciente presentó fiebre y cefalea."
    config = _ftfy_config()
    skipped = [json.loads(line)["text"] for line in clinical_lines(0, 1000)]
    skipped = [t for t in skipped if not _NEEDS_FTFY.search(t)]
    assert len(skipped) > 500
    assert all(ftfy.fix_text(t, config) == t for t in skipped)  # the fast path changes nothing ftfy would


@pytest.mark.fast
@pytest.mark.parametrize(
    "text, sentences",
    [
        ("Se pautó paracetamol 2.5 mg. cada 8 h. El Dr. García indicó reposo.",
         ["Se pautó paracetamol 2.5 mg. cada 8 h.", "El Dr. García indicó reposo."]),
        ("Ac. Toxoplasma negativo. Se pautó ác. Fólico.", ["Ac. Toxoplasma negativo.", "Se pautó ác. Fólico."]),
        ("Antecedentes: 1. Hipertensión. 2. Diabetes.", ["Antecedentes: 1. Hipertensión.", "2. Diabetes."]),
        ("Dr. Smith et al. reported it, i.e. twice. Fig. 1 shows it.",
         ["Dr. Smith et al. reported it, i.e. twice.", "Fig. 1 shows it."]),
        ("¿Dolor? No. ¡Mejoró!\nSegunda línea", ["¿Dolor?", "No.", "¡Mejoró!", "Segunda línea"]),
    ],
)
def test_sentence_splitting_of_clinical_text(text, sentences):
    from biofairseq.text.sentences import split_sentences

    assert split_sentences(text) == sentences


def test_breakout_rates_on_brat_and_conll(mistakes):
    for ner, lang, entities in ((PHARMACONER / "test", "es", 259), (NCBI / "test.tsv", "en", 185)):
        out = run_py("vocab_stats.py", "--vocab", f"bpe={mistakes / 'vocab'}", "--ner", ner, "--lang", lang)
        rows = {r.split("|")[1].strip(): [c.strip() for c in r.split("|")[2:-1]] for r in out.stdout.splitlines()[2:]}
        assert int(rows["all mentions"][0].replace(",", "")) == entities
        assert float(rows["all mentions"][2]) > 1.0 and float(rows["all text"][2]) > 1.0


def test_a_large_compressed_file_is_cleaned_in_parts_with_the_same_output_and_messages(raw_sources, tmp_path):
    args = ["--source", f"cases={raw_sources / 'cases.jsonl.gz'}", "--lang", "es", "--valid-docs", 20, "--quiet"]
    run_py("clean_corpus.py", *args, "--output-dir", tmp_path / "whole")
    run_py("clean_corpus.py", *args, "--output-dir", tmp_path / "parts", "--shard-size", 100_000, "--workers", 2,
           "--keep-work")
    pieces = [p for s in json.loads((tmp_path / "parts" / "work" / "plan.json").read_text())["shards"] for p in s["pieces"]]
    assert len(pieces) >= 3 and all(p["origin"] == str(raw_sources / "cases.jsonl.gz") for p in pieces)
    assert [p["first_line"] for p in pieces] == sorted(p["first_line"] for p in pieces)  # in order, each its first line
    for name in ("train.txt", "valid.txt"):
        assert (tmp_path / "parts" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes()
    stats = [json.loads((tmp_path / run / "stats.json").read_text()) for run in ("whole", "parts")]
    assert stats[0]["errors"] == stats[1]["errors"]  # the compressed file and its line numbers, not a part's
    assert "cases.jsonl.gz:152: invalid JSON" in stats[1]["errors"]["cases"][0]
    assert stats[0]["sources"] == stats[1]["sources"]


def test_one_file_per_document_skips_bad_files_and_blank_line_splitting_warns(tmp_path):
    """The common raw layout: a folder of .txt files, each one clinical case in several paragraphs."""
    cases = tmp_path / "cases"
    cases.mkdir()
    for i, line in enumerate(clinical_lines(0, 30)):
        (cases / f"case{i:02d}.txt").write_text(json.loads(line)["text"].replace("\n", "\n\n"), encoding="utf-8")
    (cases / "broken.txt").write_bytes(b"Paciente de 40 a\xf1os con fiebre.\n\nSin antecedentes.\n")  # Latin-1, not UTF-8
    args = ["--source", f"cases={cases}", "--lang", "es", "--valid-docs", 3]
    per_file = run_py("clean_corpus.py", *args, "--text-docs", "file", "--output-dir", tmp_path / "file")
    stats = json.loads((tmp_path / "file" / "stats.json").read_text())["sources"]["cases"]
    assert (stats["files_in"], stats["docs_in"], stats["unreadable_docs"]) == (31, 30, 1)
    assert "broken.txt:1: invalid UTF-8 byte 0xf1" in per_file.stderr and "warning" not in per_file.stderr
    by_blank_lines = run_py("clean_corpus.py", *args, "--output-dir", tmp_path / "blank")
    stats = json.loads((tmp_path / "blank" / "stats.json").read_text())["sources"]["cases"]
    assert stats["files_in"] == 31 and stats["docs_in"] > 60 and stats["unreadable_docs"] == 1
    warning = next(line for line in by_blank_lines.stderr.splitlines() if line.startswith("warning: "))
    assert "31 text files became" in warning and "--text-docs file" in warning
    assert "files in" in by_blank_lines.stdout or "files_in" in by_blank_lines.stdout


def test_binarize_without_the_venv_says_how_in_one_line(tmp_path):
    """A newcomer's first mistake: the scripts run by a Python that has no biofairseq (.venv not active)."""
    bare = subprocess.run(["python3", "-c", "import biofairseq"], capture_output=True, env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path)
    assert bare.returncode != 0  # the system Python, outside .venv
    proc = subprocess.run(["bash", str(REPO / "preprocess" / "binarize.sh"), tmp_path, tmp_path, tmp_path / "bin"],
                          capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "PYTHON": "python3"}, cwd=REPO)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1 and "source .venv/bin/activate" in lines[0] and "Traceback" not in proc.stderr
    assert not (tmp_path / "bin").exists()


# ---- a newcomer's mistakes: one line on stderr naming the setting and the fix, before any work, nothing left behind

@pytest.fixture(scope="module")
def mistakes(tmp_path_factory):
    """A working folder with 30 real clinical cases, an empty file, an empty folder, a folder of other files, a
    cleaned corpus (train.txt and valid.txt: cleaned text, as clean_corpus.py writes it) and its vocabulary."""
    root = tmp_path_factory.mktemp("mistakes")
    lines = clinical_lines(0, 30)
    (root / "cases.jsonl").write_text("".join(lines), encoding="utf-8")
    with gzip.open(root / "cases.jsonl.gz", "wt", encoding="utf-8") as f:
        f.writelines(lines)
    (root / "empty.jsonl").write_text("")
    (root / "empty_folder").mkdir()
    (root / "pdfs").mkdir()
    (root / "pdfs" / "case.pdf").write_bytes(b"%PDF-1.4\n")
    (root / "clean").mkdir()
    from biofairseq.text.sentences import split_sentences

    docs = ["\n".join(split_sentences(json.loads(line)["text"])) + "\n\n" for line in lines]
    (root / "clean" / "train.txt").write_text("".join(docs[5:]), encoding="utf-8")
    (root / "clean" / "valid.txt").write_text("".join(docs[:5]), encoding="utf-8")
    (root / "latin1").mkdir()  # cleaned text saved in another encoding
    (root / "latin1" / "train.txt").write_text("Paciente de 45 años.\n\n", encoding="latin-1")
    (root / "latin1" / "valid.txt").write_text("Paciente de 50 años.\n\n", encoding="utf-8")
    run_py("train_vocab.py", "--input", root / "clean" / "train.txt", "--vocab-size", 400, "--output-dir",
           root / "vocab", "--workers", 1)
    return root


CLEAN = {"--source": "cases=cases.jsonl", "--output-dir": "out", "--lang": "es", "--valid-docs": "5", "--workers": "1"}


@pytest.mark.fast
@pytest.mark.parametrize("changed, message", [
    ({"--source": "cases=nope.jsonl"}, "--source cases=nope.jsonl: no such file or folder; fix the PATH"),
    ({"--source": "cases"}, "--source: 'cases': expected NAME=PATH"),
    ({"--source": "cases=empty.jsonl"}, "--source cases=empty.jsonl: an empty file"),
    ({"--source": "cases=empty_folder"}, "--source cases=empty_folder: an empty folder; fix the PATH"),
    ({"--source": "cases=pdfs"}, "--source cases=pdfs: a folder with no JSON lines (.jsonl, .json, .ndjson), text (.txt)"),
    ({"--lang": "spa"}, "--lang spa: not a language of the language identifier (fastText lid.176); use --lang es"),
    ({"--lang": "spanish"}, "--lang spanish: not a language of the language identifier (fastText lid.176); use --lang es"),
    ({"--lang": "es_ES"}, "use --lang es,"),
    ({"--lang": "xx"}, "--lang xx: not a language of the language identifier (fastText lid.176); use one of its codes"),
    ({"--valid-docs": "-1"}, "argument --valid-docs: -1: must be at least 0"),
    ({"--workers": "0"}, "argument --workers: 0: must be at least 1"),
    ({"--output-dir": "cases.jsonl"}, "--output-dir cases.jsonl: an existing file, not a folder; choose a folder"),
    ({"--source": "cases=clean", "--output-dir": "clean/out"}, "--output-dir clean/out: inside --source cases=clean"),
])
def test_clean_corpus_settings_are_checked_before_any_work(changed, message, mistakes):
    args = [x for flag, value in {**CLEAN, **changed}.items() for x in (flag, value)]
    proc = run_py("clean_corpus.py", *args, check=False, cwd=mistakes)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("clean_corpus.py: error: ") and message in proc.stderr, proc.stderr
    assert not (mistakes / "out").exists() and not (mistakes / "clean" / "out").exists()


@pytest.mark.fast
def test_a_run_left_with_no_documents_names_the_stage_and_leaves_nothing_for_the_rerun(mistakes):
    """--lang en on Spanish text: the language filter removed every document, said so even at --valid-docs 0; too
    high a --valid-docs names --valid-docs; each failed run leaves no folder, so the corrected rerun needs no --overwrite."""
    for lang, valid, message in (("en", "0", "error: no document left after cleaning: of 30 read, the language filter "
                                               "removed 30 (not identified as --lang en; check --lang, or --langid off)"),
                                 ("es", "50", "error: --valid-docs 50: only 30 documents left after cleaning; use "
                                              "--valid-docs 3 (below 30), or give more text")):
        proc = run_py("clean_corpus.py", "--source", "cases=cases.jsonl.gz", "--output-dir", "out", "--lang", lang,
                      "--valid-docs", valid, "--quiet", check=False, cwd=mistakes)
        assert proc.returncode == 1 and proc.stderr == message + "\n", proc.stderr
        assert not (mistakes / "out").exists()
    run_py("clean_corpus.py", "--source", "cases=cases.jsonl.gz", "--output-dir", "out", "--lang", "es",
           "--valid-docs", 5, "--quiet", cwd=mistakes)
    assert len(docs_of(mistakes / "out" / "valid.txt")) == 5
    shutil.rmtree(mistakes / "out")


MISTAKES = [
    ("train_vocab.py", ["--input", "nope.txt", "--output-dir", "v"], 1, "error: nope.txt: missing or empty; run preprocess/clean_corpus.py first"),
    ("train_vocab.py", ["--input", "clean", "--output-dir", "v"], 1, "error: clean: a folder; give the cleaned text file, e.g. clean/train.txt"),
    ("train_vocab.py", ["--input", "cases.jsonl.gz", "--output-dir", "v"], 1, "error: cases.jsonl.gz: a compressed file, not cleaned text; run preprocess/clean_corpus.py"),
    ("train_vocab.py", ["--input", "cases.jsonl", "--output-dir", "v"], 1, "error: cases.jsonl: JSON lines, not cleaned text; run preprocess/clean_corpus.py"),
    ("train_vocab.py", ["--input", "clean/train.txt", "--output-dir", "vocab"], 1, "error: vocab: already exists; remove it or choose another --output-dir"),
    ("train_vocab.py", ["--input", "clean/train.txt", "--output-dir", "cases.jsonl/v"], 1, "error: --output-dir cases.jsonl/v: inside a file"),
    ("train_vocab.py", ["--input", "clean/train.txt", "--output-dir", "v", "--workers", "0"], 2, "train_vocab.py: error: argument --workers: 0: must be at least 1"),
    ("binarize.sh", ["nope", "vocab", "v"], 1, "error: CLEAN_DIR nope: no such folder; usage: bash preprocess/binarize.sh CLEAN_DIR VOCAB_DIR DATA_BIN"),
    ("binarize.sh", ["clean/train.txt", "vocab", "v"], 1, "error: CLEAN_DIR clean/train.txt: a file, not a folder"),
    ("binarize.sh", ["vocab", "clean", "v"], 1, "error: vocab holds a vocabulary and clean cleaned text: swap them"),
    ("binarize.sh", ["empty_folder", "vocab", "v"], 1, "error: empty_folder/train.txt: missing or empty; CLEAN_DIR is the --output-dir of preprocess/clean_corpus.py"),
    ("binarize.sh", ["clean", "empty_folder", "v"], 1, "error: empty_folder/dict.txt: missing; VOCAB_DIR is the --output-dir of preprocess/train_vocab.py"),
    ("binarize.sh", ["clean", "vocab", "clean"], 1, "error: clean: already exists; remove it or choose another DATA_BIN"),
    ("binarize.sh", ["clean", "vocab", "cases.jsonl/v"], 1, "error: DATA_BIN cases.jsonl/v: cases.jsonl is not a folder this user can write in"),
    ("binarize.sh", ["clean", "vocab", "v", "0"], 1, "error: WORKERS=0: give the number of processes, at least 1"),
    ("binarize.sh", ["latin1", "vocab", "v"], 1, "error: latin1/train.txt: not UTF-8 at byte 16; binarize the text preprocess/clean_corpus.py writes, or re-encode"),
]


# train_vocab.py runs in this process (fast); binarize.sh in bash, its Python commands served in this process
@pytest.mark.parametrize("script, args, status, message", [
    pytest.param(*mistake, marks=[pytest.mark.fast] if mistake[0].endswith(".py") else []) for mistake in MISTAKES])
def test_vocabulary_and_binarize_mistakes_give_one_line_and_no_output(script, args, status, message, mistakes):
    before = sorted(p.name for p in mistakes.iterdir())
    if script.endswith(".py"):
        proc = run_py(script, *args, check=False, cwd=mistakes)
    else:
        proc = run_script(f"preprocess/{script}", *args, check=False, cwd=mistakes)
    assert proc.returncode == status and proc.stderr.count("\n") == 1 and proc.stderr.startswith(message), proc.stderr
    assert sorted(p.name for p in mistakes.iterdir()) == before  # no output, no half-written or temporary folder


def test_the_cleaning_runs_from_python_on_its_typed_options_and_its_flags_are_their_fields(tmp_path, capsys):
    """A library user gives CorpusOptions and CleaningConfig, no argparse Namespace; clean_corpus.py's flags are the
    options' fields, each with its help, so the two cannot drift apart."""
    from dataclasses import fields

    from biofairseq.corpus.cleaning import CleaningConfig
    from biofairseq.corpus.options import CorpusOptions
    from biofairseq.corpus.pipeline import clean_corpus

    (tmp_path / "cases.jsonl").write_text("".join(clinical_lines(0, 40)), encoding="utf-8")
    options = CorpusOptions(sources=[("cases", str(tmp_path / "cases.jsonl"))], output_dir=str(tmp_path / "clean"),
                            lang="es", valid_docs=4, quiet=True)
    stats = clean_corpus(options, CleaningConfig())
    assert stats["train_docs"] + stats["valid_docs"] == stats["total"]["docs_out"] > 30 and stats["valid_docs"] == 4
    assert (tmp_path / "clean" / "valid.txt").read_text(encoding="utf-8").count("\n\n") >= 3
    from test_corpus_boundaries import _clean_corpus_module

    with pytest.raises(SystemExit):
        _clean_corpus_module().parse_args(["--help"])
    helped = " ".join(capsys.readouterr().out.split())
    for f in fields(CorpusOptions):
        assert f"{f.metadata.get('flag', '--' + f.name.replace('_', '-'))} " in helped, f.name
        assert " ".join(f.metadata["help"].split()[:6]) in helped, f.name


def test_a_small_input_is_cut_for_every_worker_and_cleans_as_one_shard(tmp_path):
    """The 12.5 MB clinical cases were one 64 MiB shard, cleaned by one of --workers 2; by default a small input is now
    cut into 4 shards a worker, and the outputs are those of one shard."""
    from biofairseq.corpus.cleaning import CleaningConfig
    from biofairseq.corpus.options import CorpusOptions
    from biofairseq.corpus.pipeline import clean_corpus

    (tmp_path / "cases.jsonl").write_text("".join(clinical_lines(0, 300)), encoding="utf-8")  # about 1 MB
    made = {}
    for name, size in (("auto", None), ("one", 64 << 20)):
        options = CorpusOptions(sources=[("cases", str(tmp_path / "cases.jsonl"))], output_dir=str(tmp_path / name),
                                lang="es", valid_docs=10, workers=2, shard_size=size, keep_work=True, quiet=True)
        stats = clean_corpus(options, CleaningConfig(langid="off"))
        shards = json.loads((tmp_path / name / "work" / "plan.json").read_text())["shards"]
        made[name] = (len(shards), (tmp_path / name / "train.txt").read_bytes(), stats["total"])
    assert made["auto"][0] >= 4 and made["one"][0] == 1  # 256 KiB shards at least
    assert made["auto"][1:] == made["one"][1:]


def test_a_document_is_read_whole_only_where_its_start_is_in_another_language():
    """The whole text costs fastText many times its first 200 characters: a document that starts in --lang is kept at
    the document level (its sentences are still judged where the gate flags them), one that starts in another
    language is judged whole, as before."""
    from biofairseq.corpus.cleaning import CleaningConfig, DocumentCleaner

    cleaner = DocumentCleaner(CleaningConfig(), "es")
    spanish = [json.loads(line)["text"] for line in clinical_lines(0, 40)]
    english = " ".join(line.split("\t")[0] for line in (NCBI / "train.tsv").read_text(encoding="utf-8").splitlines()[:3000])
    head, tail = " ".join(spanish[0].split())[:300], " ".join(spanish[1].split())[-600:]
    mixed = f"{head} {english} {tail}"
    assert cleaner._other_language(mixed, 0.5)  # whole: English
    assert not cleaner._document_in_other_language(mixed, 0.5)  # starts in Spanish: kept, sentence by sentence
    assert cleaner._document_in_other_language(f"{english} {tail}", 0.5)  # starts in English: read whole, dropped
    assert not any(cleaner._document_in_other_language(" ".join(text.split()), 0.5) for text in spanish)
