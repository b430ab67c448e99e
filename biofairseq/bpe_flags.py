"""Prints the fairseq ``--bpe`` flags of a data-bin (or vocabulary folder), one per line, for fairseq-train.

A checkpoint trained with them records its BPE, so that ``RobertaModel.from_pretrained(DIR, ..., DATA_BIN)``
encodes text offline without further arguments:
``fairseq-train DATA_BIN --user-dir biofairseq ... $(python -m biofairseq.bpe_flags DATA_BIN)``

The paths are absolute: a checkpoint keeps them, and is read (converted, fine-tuned) from other folders.
"""

import os
import sys


def flags(vocab_dir):
    from biofairseq.corpus.vocab import VocabError, vocab_files
    from biofairseq.data_bin import shards

    try:
        vocab_type, files = vocab_files(shards(vocab_dir)[0])  # a sharded data-bin: every shard has the vocabulary
    except (VocabError, FileNotFoundError) as error:
        sys.exit(f"error: {error}")
    files = {name: os.path.abspath(path) for name, path in files.items()}
    if vocab_type == "bytelevel-bpe":
        return ["--bpe", "hf_byte_bpe", "--bpe-vocab", files["vocab"], "--bpe-merges", files["merges"]]
    return ["--bpe", "sentencepiece", "--sentencepiece-model", files["model"]]


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m biofairseq.bpe_flags DATA_BIN")
    print("\n".join(flags(sys.argv[1])))
