"""Builds small fairseq data-bins from the real Spanish clinical cases, as the tests need them.

The vocabularies are learned here with tokenizers / sentencepiece directly; each token also gets the
whitespace word it came from (by character offsets), so masking can be checked against the text.
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

SHARED = Path(os.environ.get("BIOFAIRSEQ_SHARED", Path(__file__).resolve().parents[2] / "shared"))
CLINICAL_CASES = SHARED / "data" / "spanish_clinical_text" / "clinical_cases.jsonl"
BIN = Path(sys.executable).parent


def read_documents(first, count):
    """Documents of the corpus as lists of non-empty paragraphs (one paragraph per line)."""
    docs = []
    with open(CLINICAL_CASES, encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i >= first + count:
                break
            if i >= first:
                docs.append([p.strip() for p in json.loads(line)["text"].split("\n") if p.strip()])
    return docs


@dataclass
class EncodedLine:
    symbols: list  # the strings written to the fairseq-lm text (BPE ids or pieces)
    words: list  # per token: index of the whitespace word it belongs to


@dataclass
class Corpus:
    data_bin: Path
    vocab_type: str
    vocab_file: Path  # vocab.json (bytebpe) or spm.model (sentencepiece)
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


class _ByteLevel:
    def __init__(self, texts, out_dir, vocab_size):
        from tokenizers import ByteLevelBPETokenizer

        self.tok = ByteLevelBPETokenizer()
        self.tok.train_from_iterator(
            texts, vocab_size=vocab_size, min_frequency=2, show_progress=False,
            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        )
        self.tok.save_model(str(out_dir))
        self.vocab_file = out_dir / "vocab.json"

    def encode(self, text):
        enc = self.tok.encode(text)
        word_of = _word_of_char(text)
        return EncodedLine([str(i) for i in enc.ids], [word_of[s] for s, _ in enc.offsets])


class _SentencePiece:
    def __init__(self, texts, out_dir, vocab_size):
        import sentencepiece as spm

        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(texts), model_prefix=str(out_dir / "spm"), vocab_size=vocab_size,
            model_type="unigram", character_coverage=1.0, num_threads=2, minloglevel=2,
        )
        self.vocab_file = out_dir / "spm.model"
        self.sp = spm.SentencePieceProcessor(model_file=str(self.vocab_file))

    def encode(self, text):
        # Words are those of the text the model sees: NFKC can add spaces (´ becomes space + accent).
        text = self.sp.normalize(text).replace("\u2581", " ").strip()
        pieces = self.sp.encode(text, return_type="proto").pieces
        raw = text.encode("utf-8")
        word_of = _word_of_char(text)
        # sentencepiece offsets are bytes of the input; map them to characters.
        return EncodedLine(
            [p.piece for p in pieces],
            [word_of[len(raw[: p.begin].decode("utf-8", errors="ignore"))] for p in pieces],
        )


def build_corpus(out_dir, vocab_type="bytebpe", train_docs=160, valid_docs=20, vocab_size=2000):
    """Real clinical cases -> vocabulary -> encoded fairseq-lm text -> fairseq-preprocess data-bin."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    splits = {"train": read_documents(0, train_docs), "valid": read_documents(train_docs, valid_docs)}
    tokenizer = (_ByteLevel if vocab_type == "bytebpe" else _SentencePiece)(
        [p for doc in splits["train"] for p in doc], out_dir, vocab_size
    )
    corpus = Corpus(out_dir / "data-bin", vocab_type, tokenizer.vocab_file)
    for split, docs in splits.items():
        corpus.documents[split] = [[tokenizer.encode(p) for p in doc] for doc in docs]
        with open(out_dir / f"{split}.bpe", "w", encoding="utf-8") as f:
            f.write("\n\n".join("\n".join(" ".join(l.symbols) for l in doc) for doc in corpus.documents[split]) + "\n")
    subprocess.run(
        [str(BIN / "fairseq-preprocess"), "--only-source", "--trainpref", str(out_dir / "train.bpe"),
         "--validpref", str(out_dir / "valid.bpe"), "--destdir", str(corpus.data_bin), "--workers", "2"],
        check=True, capture_output=True,
    )
    return corpus


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
