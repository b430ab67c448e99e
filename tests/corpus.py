"""The tests' real data, all in the repository (NOTICE), and small fairseq data-bins built from it.

The vocabularies and data-bins come from the preprocess/ scripts; each token also gets the whitespace word
it came from (by character offsets), so masking can be checked against the text.
"""

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from biofairseq.tasks.document_mlm import DocumentMLMConfig, DocumentMLMTask

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[1]
# the demo's sample: 1,000 clinical case reports (JSON lines), 100 / 40 / 40 PharmaCoNER documents (BRAT)
CLINICAL_CASES = REPO / "examples" / "data" / "clinical_cases.jsonl.gz"
PHARMACONER = REPO / "examples" / "data" / "pharmaconer"
# the tests' own excerpts: NCBI-disease's first 300 / 300 / 200 sentences (CoNLL), and the PharmaCoNER training
# document whose official offsets disagree with its text
NCBI = REPO / "tests" / "data" / "ncbi_disease"
PHARMACONER_MISALIGNED = REPO / "tests" / "data" / "pharmaconer_misaligned"


def clinical_lines(first, count, cases=CLINICAL_CASES):
    """Lines ``first`` to ``first + count`` of the clinical cases (JSON lines, each ending in a newline; compressed or not)."""
    from biofairseq.corpus.sources import open_compressed

    # bytes split at b"\n" only: the texts hold U+2028 and other characters that str.splitlines takes for line ends
    with open_compressed(cases) as f:
        lines = [line.decode("utf-8") for i, line in zip(range(first + count), f) if i >= first]
    if len(lines) < count:
        raise ValueError(f"{cases}: holds fewer than the {first + count} documents asked for; use fewer, or the full "
                         "corpus (benchmarks: BIOFAIRSEQ_SHARED)")
    return lines


def read_documents(first, count, cases=CLINICAL_CASES):
    """Documents of the corpus as lists of non-empty paragraphs (one paragraph per line)."""
    return [[p.strip() for p in json.loads(line)["text"].split("\n") if p.strip()] for line in clinical_lines(first, count, cases)]


@dataclass
class EncodedLine:
    symbols: list  # the strings written to the fairseq-lm text (BPE ids or pieces)
    words: list  # per token: index of the whitespace word it belongs to


@dataclass
class Corpus:
    data_bin: Path
    vocab_type: str
    vocab_file: Path  # vocab.json (bytebpe) or sentencepiece.model
    documents: dict = field(default_factory=dict)  # split -> [[EncodedLine]]


def _word_of_char(text):
    word_of = [-1] * (len(text) + 1)
    for w, m in enumerate(re.finditer(r"\S+", text)):
        for c in range(m.start(), m.end()):
            word_of[c] = w
    nxt = -1
    for c in range(len(text), -1, -1):  # spaces belong to the word that follows them
        if word_of[c] == -1:
            word_of[c] = nxt
        nxt = word_of[c]
    return word_of


def _write_documents(path, docs):
    """Cleaned-corpus layout: one paragraph per line, a blank line after each document."""
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join("\n".join(doc) + "\n\n" for doc in docs))


def _encode_with_words(encoder, text):
    """The symbols encode.py writes for ``text``, with the whitespace word of each token (from offsets)."""
    word_of = _word_of_char(text)
    if encoder.type == "bytelevel-bpe":
        enc = encoder.tok.encode(text)
        return EncodedLine([str(i) for i in enc.ids], [word_of[s] for s, _ in enc.offsets])
    pieces = encoder.sp.encode(text, return_type="proto").pieces
    raw = text.encode("utf-8")
    # sentencepiece offsets are bytes of the input; map them to characters.
    return EncodedLine(
        [p.piece for p in pieces], [word_of[len(raw[: p.begin].decode("utf-8", errors="ignore"))] for p in pieces]
    )


def build_corpus(out_dir, vocab_type="bytebpe", train_docs=160, valid_docs=20, vocab_size=2000, cases=CLINICAL_CASES):
    """Real clinical cases -> preprocess/train_vocab.py -> preprocess/binarize.sh -> data-bin."""
    from biofairseq.corpus.vocab import Encoder

    out_dir = Path(out_dir)
    clean = out_dir / "clean"
    clean.mkdir(parents=True, exist_ok=True)
    splits = {"train": read_documents(0, train_docs, cases), "valid": read_documents(train_docs, valid_docs, cases)}
    for split, docs in splits.items():
        _write_documents(clean / f"{split}.txt", docs)
    vocab = out_dir / "vocab"
    kind = "bytelevel-bpe" if vocab_type == "bytebpe" else "sentencepiece"
    run_script("preprocess/train_vocab.py", "--input", clean / "train.txt", "--type", kind,
               "--vocab-size", vocab_size, "--output-dir", vocab, "--workers", 2)
    corpus = Corpus(out_dir / "data-bin", vocab_type, vocab / ("vocab.json" if kind == "bytelevel-bpe" else "sentencepiece.model"))
    run_script("preprocess/binarize.sh", clean, vocab, corpus.data_bin, 2)
    encoder = Encoder(vocab)
    for split, docs in splits.items():
        corpus.documents[split] = [[_encode_with_words(encoder, p) for p in doc] for doc in docs]
    return corpus


def run_script(script, *args, check=True, **kwargs):
    """Runs a preprocess/ script of the repository with this environment's tools on PATH."""
    cmd = ["bash" if script.endswith(".sh") else sys.executable, str(REPO / script), *map(str, args)]
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PYTHON": sys.executable, "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, **kwargs)
    if check and proc.returncode != 0:
        raise AssertionError(f"{script} failed ({proc.returncode}):\n{proc.stderr[-4000:]}\n{proc.stdout[-2000:]}")
    return proc


# ---- looking at what the document_mlm task makes of a corpus

TOKENS_PER_SAMPLE = 128


def make_task(corpus, **overrides):
    settings = {"tokens_per_sample": TOKENS_PER_SAMPLE, "seed": 1, **overrides}
    cfg = DocumentMLMConfig(data=str(corpus.data_bin), **settings)
    return DocumentMLMTask.setup_task(cfg)


def document_streams(task, corpus, split="train"):
    """Each document as fairseq encodes it: every line's tokens followed by </s>."""
    d = task.source_dictionary
    return [
        np.concatenate([d.encode_line(" ".join(line.symbols), add_if_not_exist=False).numpy() for line in doc])
        for doc in corpus.documents[split]
    ]


def locate_blocks(blocks, docs):
    """(document, offset) of each block, checking that the blocks tile the documents in order."""
    where, d, offset = [], 0, 0
    for block in blocks:
        assert np.array_equal(block, docs[d][offset : offset + len(block)]), f"block at document {d}, offset {offset}"
        where.append((d, offset))
        offset += len(block)
        if offset == len(docs[d]):
            d, offset = d + 1, 0
    assert (d, offset) == (len(docs), 0), "tokens were dropped"
    return where


def unmasked_blocks(task, split="train"):
    """The samples without masking, their leading <s> checked and removed, in corpus order."""
    samples = task._load_dataset_split(split, epoch=1, combine=False)
    assert all(samples[i][0] == task.source_dictionary.bos() for i in range(len(samples)))
    return [samples[i][1:].numpy() for i in range(len(samples))]


def document_words(corpus, split="train"):
    """Per document, a word label per token (</s> is a word of its own), aligned with document_streams."""
    labels = []
    for doc in corpus.documents[split]:
        labels.append([(n, w) for n, line in enumerate(doc) for w in [*line.words, "</s>"]])
    return labels
