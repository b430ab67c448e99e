#!/usr/bin/env python
"""Learns a domain vocabulary from cleaned training text and writes the fairseq dict.txt that goes with it.

bytelevel-bpe: HF tokenizers' byte-level BPE (RoBERTa's), vocab.json + merges.txt; 50,262 entries by default,
specials included, as bsc-bio-es. sentencepiece: a unigram or BPE model (sentencepiece.model), e.g. 32k as
BETO or 30k/50k as BioMegatron, with byte fallback and no normalisation by default so that text round-trips.
Either way <s> <pad> </s> <unk> <mask> take ids 0-4 and a fairseq index equals the tokenizer's id.
"""

import argparse
import codecs
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

try:  # run by a Python without the project (the venv not active): one line, not a traceback
    import biofairseq  # noqa: F401
except ModuleNotFoundError as missing:
    sys.exit(f"{sys.argv[0]}: error: {missing.name} not found; run 'make install' and 'source .venv/bin/activate', "
             "then run this again")

from biofairseq.arguments import OneLineParser, at_least


def input_problem(path):
    """None if ``path`` is cleaned text (clean_corpus.py's train.txt), else what it is and the fix, in one line."""
    p = Path(path)
    if p.is_dir():
        hint = f", e.g. {p / 'train.txt'}" if (p / "train.txt").is_file() else ""
        return f"{path}: a folder; give the cleaned text file{hint} (preprocess/clean_corpus.py's train.txt)"
    if not p.is_file() or p.stat().st_size == 0:
        return f"{path}: missing or empty; run preprocess/clean_corpus.py first"
    with open(p, "rb") as f:
        head = f.read(1 << 16)
    if head.startswith((b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00", b"\x28\xb5\x2f\xfd")):
        return f"{path}: a compressed file, not cleaned text; run preprocess/clean_corpus.py on it and give its train.txt"
    try:  # a character cut at the end of the head is not an error
        text = codecs.getincrementaldecoder("utf-8")().decode(head, final=len(head) < 1 << 16)
    except UnicodeDecodeError:
        return f"{path}: not UTF-8 text; give the cleaned text of preprocess/clean_corpus.py (train.txt)"
    if "\x00" in text:
        return f"{path}: a binary file, not cleaned text; give the cleaned text of preprocess/clean_corpus.py (train.txt)"
    if text.lstrip().startswith("{"):
        return f"{path}: JSON lines, not cleaned text; run preprocess/clean_corpus.py on it and give its train.txt"
    return None


def main(argv=None):
    p = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--input", nargs="+", required=True, help="cleaned text, e.g. CLEAN_DIR/train.txt")
    p.add_argument("--type", choices=("bytelevel-bpe", "sentencepiece"), default="bytelevel-bpe")
    p.add_argument("--vocab-size", type=at_least(1), default=50262, help="entries, specials included (default: 50262)")
    p.add_argument("--output-dir", required=True, help="new folder for the vocabulary, dict.txt and vocab_info.json")
    p.add_argument("--min-frequency", type=int, default=2, help="bytelevel-bpe: least count of a merge (default: 2)")
    p.add_argument("--lowercase", action="store_true", help="bytelevel-bpe: lowercase (uncased vocabulary)")
    p.add_argument("--model-type", choices=("unigram", "bpe"), default="unigram", help="sentencepiece model")
    p.add_argument("--character-coverage", type=float, default=0.9999, help="sentencepiece (default: 0.9999)")
    p.add_argument("--normalization", default="identity",
                   help="sentencepiece normalisation rule: identity (default; text round-trips) or nmt_nfkc")
    p.add_argument("--no-byte-fallback", dest="byte_fallback", action="store_false",
                   help="sentencepiece: map unseen characters to <unk> instead of bytes")
    p.add_argument("--max-sentences", type=at_least(1), default=10_000_000,
                   help="train on a seeded sample of at most this many lines (both types; default: 10M), which "
                        "bounds the memory of learning the vocabulary")
    p.add_argument("--workers", type=at_least(1), default=os.cpu_count(), help="threads")
    args = p.parse_args(argv)

    for f in args.input:
        problem = input_problem(f)
        if problem:
            sys.exit(f"error: {problem}")
    out = Path(args.output_dir)
    if out.exists():
        sys.exit(f"error: {out}: already exists; remove it or choose another --output-dir")
    if any(parent.exists() and not parent.is_dir() for parent in out.parents):
        sys.exit(f"error: --output-dir {out}: inside a file, not a folder; choose another --output-dir")
    os.environ.setdefault("RAYON_NUM_THREADS", str(args.workers))
    from biofairseq.corpus import vocab

    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent if out.parent.exists() else None))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)  # mkdtemp's 0700 would shut teammates out of a shared run folder
    try:
        if args.type == "bytelevel-bpe":
            size = vocab.train_bytelevel_bpe(args.input, tmp, args.vocab_size, args.min_frequency, args.lowercase,
                                             args.max_sentences)
            info = vocab.write_info(tmp, args.type, size, lowercase=args.lowercase)
        else:
            try:
                size = vocab.train_sentencepiece(
                    args.input, tmp, args.vocab_size, args.model_type, args.max_sentences, args.workers,
                    args.character_coverage, args.byte_fallback, args.normalization,
                )
            except RuntimeError as error:
                most = re.search(r"Vocabulary size (?:is )?too high \(\d+\)\. Please set it to a value <= (\d+)", str(error))
                if not most:
                    raise
                sys.exit(f"error: --vocab-size {args.vocab_size}: {' '.join(args.input)} allows a SentencePiece "
                         f"{args.model_type} vocabulary of at most {int(most.group(1)):,} entries; give --vocab-size "
                         f"{most.group(1)} or less (VOCAB_SIZE, or VOCAB_SIZES, in the recipes), or more text")
            info = vocab.write_info(tmp, args.type, size, model_type=args.model_type, normalization=args.normalization)
        out.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if size != args.vocab_size:
        print(f"note: the corpus gave {size:,} entries, fewer than --vocab-size {args.vocab_size:,}", file=sys.stderr)
    print(f"{out}: {info['type']} vocabulary of {size:,} entries; dict.txt for fairseq-preprocess --srcdict")


if __name__ == "__main__":
    from biofairseq.interrupts import ends_in_one_line

    with ends_in_one_line("train_vocab.py", "nothing was written (the vocabulary folder appears only when complete); "
                          "run the same command again"):
        main()
