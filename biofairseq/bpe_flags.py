"""Prints the fairseq ``--bpe`` flags of a data-bin (or vocabulary folder), one per line, for fairseq-train.

A checkpoint trained with them records its BPE, so that ``RobertaModel.from_pretrained(DIR, ..., DATA_BIN)``
encodes text offline without further arguments:
``fairseq-train DATA_BIN --user-dir biofairseq ... $(python -m biofairseq.bpe_flags DATA_BIN)``

The paths are absolute: a checkpoint keeps them, and is read (converted, fine-tuned) from other folders.
"""

import os
import sys
from pathlib import Path


def bpe_args(vocab_dir: str | Path) -> dict[str, str | bool]:
    """fairseq's BPE settings of a vocabulary folder or data-bin, as keyword arguments of fairseq's ``from_pretrained``
    (a checkpoint trained without the flags below needs them); VocabError or FileNotFoundError if it has none."""
    from biofairseq.corpus.vocab import read_info, vocab_files
    from biofairseq.data_bin import shards

    folder = shards(vocab_dir)[0]  # a sharded data-bin: every shard has the vocabulary
    vocab_type, files = vocab_files(folder)
    files = {name: os.path.abspath(path) for name, path in files.items()}
    if vocab_type == "bytelevel-bpe":
        return {"bpe": "hf_byte_bpe", "bpe_vocab": files["vocab"], "bpe_merges": files["merges"]}
    if vocab_type == "wordpiece":  # fairseq's BertTokenizer, cased or lowercased (and then without accents: a tokenizer
        # that keeps them, BETO's uncased, is read from vocab_info.json by biofairseq, not from these flags)
        return {"bpe": "bert", "bpe_vocab_file": files["vocab"], "bpe_cased": not read_info(folder).get("lowercase", False)}
    return {"bpe": "sentencepiece", "sentencepiece_model": files["model"]}


def flags(vocab_dir: str | Path) -> list[str]:
    """The same as fairseq-train flags."""
    from biofairseq.corpus.vocab import VocabError

    if not os.path.isdir(vocab_dir):
        sys.exit(f"error: {vocab_dir}: no such folder; give the data-bin of preprocess/binarize.sh (or a vocabulary "
                 "folder of preprocess/train_vocab.py)")
    try:
        args = bpe_args(vocab_dir)
    except (VocabError, FileNotFoundError) as error:
        sys.exit(f"error: {error}")
    words = []
    for name, value in args.items():
        flag = f"--{name.replace('_', '-')}"
        words += ([flag] if value else []) if isinstance(value, bool) else [flag, value]
    return words


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m biofairseq.bpe_flags DATA_BIN")
    print("\n".join(flags(sys.argv[1])))
