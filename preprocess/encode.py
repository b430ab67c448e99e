#!/usr/bin/env python
"""Encodes cleaned text with a vocabulary from train_vocab.py into fairseq-lm text, one line per line.

Blank lines (document separators) stay blank. Byte-level BPE gives token ids, SentencePiece gives pieces, the
symbols of the vocabulary's dict.txt. Batches are encoded on --workers threads.
"""

import argparse
import os
import sys
from pathlib import Path

try:  # run by a Python without the project (the venv not active): one line, not a traceback
    import biofairseq  # noqa: F401
except ModuleNotFoundError as missing:
    sys.exit(f"{sys.argv[0]}: error: {missing.name} not found; run 'make install' and 'source .venv/bin/activate', "
             "then run this again")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--vocab", required=True, help="the folder written by train_vocab.py")
    p.add_argument("--input", required=True, help="cleaned text (train.txt or valid.txt)")
    p.add_argument("--output", required=True, help="the encoded text (written atomically)")
    p.add_argument("--workers", type=int, default=os.cpu_count(), help="threads")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    args = p.parse_args(argv)
    if not Path(args.input).is_file():
        sys.exit(f"error: {args.input}: missing; run preprocess/clean_corpus.py first")
    os.environ["RAYON_NUM_THREADS"] = str(args.workers)
    from biofairseq.corpus.encode import encode_file
    from biofairseq.corpus.vocab import VocabError

    try:
        lines, tokens = encode_file(args.vocab, args.input, args.output, args.workers, progress=not args.quiet)
    except VocabError as e:
        sys.exit(f"error: {e}")
    print(f"{args.output}: {lines:,} lines, {tokens:,} tokens")


if __name__ == "__main__":
    from biofairseq.interrupts import ends_in_one_line

    with ends_in_one_line("encode.py", "nothing was written (the output appears only when complete); run the same "
                          "command again"):
        main()
