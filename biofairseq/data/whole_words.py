"""Which dictionary entries begin a word, for whole-word masking with any subword vocabulary."""

import json
import os
import re

import numpy as np
import torch
from fairseq.data import Dictionary

VOCAB_TYPES = ("bytebpe", "sentencepiece", "wordpiece")
# How each vocabulary marks a piece that follows a space, i.e. the first piece of a word (WordPiece marks the others).
WORD_START_MARKERS = {"bytebpe": "\u0120", "sentencepiece": "\u2581"}  # Ġ, ▁
CONTINUATION = "##"  # WordPiece's mark of a piece inside a word, as BERT's whole-word masking groups them


class WordStarts:
    """The word-start table that fairseq's MaskTokensDataset gathers from, made position-aware.

    MaskTokensDataset only calls ``mask_whole_words.gather(0, tokens)``. Besides looking each token up
    in the vocabulary, this also starts a word right after <s> or </s>: the first word of a line has no
    space marker in byte-level BPE, and would otherwise be glued to the previous line's </s>.
    """

    def __init__(self, starts: torch.Tensor, special: torch.Tensor) -> None:
        self.starts = starts
        self.special = special

    def gather(self, dim: int, tokens: torch.Tensor) -> torch.Tensor:
        starts = self.starts.gather(dim, tokens)
        starts[1:] |= self.special.gather(dim, tokens[:-1])
        return starts


def word_starts(dictionary: Dictionary, vocab_type: str, vocab_file: str | None = None,
                dictionary_path: str = "dict.txt") -> WordStarts:
    """WordStarts for ``dictionary``, whose symbols are pieces, or BPE ids mapped by ``vocab_file``.

    ``vocab_file`` is read only when the dictionary holds ids; a dictionary of pieces is its own vocabulary."""
    if vocab_type not in VOCAB_TYPES:
        raise ValueError(f"vocabulary type {vocab_type!r}: choose one of {', '.join(VOCAB_TYPES)}")
    special = special_symbols(dictionary)
    words = [s for i, s in enumerate(dictionary.symbols) if not special[i]]
    # fairseq's hf_byte_bpe data holds ids ("464"); SentencePiece data holds pieces, among them digit-only
    # continuation pieces ("500") that must never be read as ids.
    holds_ids = vocab_type != "wordpiece" and bool(words) and sum(s.isdigit() for s in words) > len(words) / 2
    if holds_ids and not vocab_file:
        raise ValueError(
            f"{dictionary_path} holds BPE ids, not pieces: pass --whole-word-vocab with the "
            "vocab.json (byte-level BPE) or .model (SentencePiece) that numbered them"
        )
    id_to_piece = _id_to_piece(vocab_type, vocab_file) if holds_ids else None
    starts = []
    for i, symbol in enumerate(dictionary.symbols):
        if special[i]:
            starts.append(True)
            continue
        piece = symbol
        if id_to_piece is not None:
            if not symbol.isdigit() or int(symbol) not in id_to_piece:
                raise ValueError(f"{dictionary_path}: entry {symbol} is not an id of {vocab_file}; is it the vocabulary of this data?")
            piece = id_to_piece[int(symbol)]
        starts.append(not piece.startswith(CONTINUATION) if vocab_type == "wordpiece"
                      else piece.startswith(WORD_START_MARKERS[vocab_type]))
    return WordStarts(torch.tensor(starts, dtype=torch.uint8), torch.from_numpy(special.astype(np.uint8)))


_BYTE_PIECE = re.compile(r"<0x[0-9A-F]{2}>$")  # SentencePiece byte fallback: part of a word, not a special
_UNUSED = re.compile(r"\[unused\d+\]$")  # a BERT vocabulary's reserved slots, which no text gives


def special_symbols(dictionary: Dictionary) -> np.ndarray:
    """A boolean array over the dictionary: True for symbols that are not text (specials, <mask>, padding words)."""
    return np.array([is_special(dictionary, i) for i in range(len(dictionary))], dtype=bool)


def is_special(dictionary: Dictionary, index: int) -> bool:
    symbol = dictionary[index]
    return (
        index < dictionary.nspecial
        or (symbol.startswith("<") and symbol.endswith(">") and not _BYTE_PIECE.match(symbol))
        or symbol.startswith("madeupword")
        or _UNUSED.match(symbol) is not None
    )


def _id_to_piece(vocab_type, vocab_file):
    if not os.path.isfile(vocab_file):
        raise FileNotFoundError(f"{vocab_file}: no such vocabulary file; give the vocab.json or .model the data was encoded with")
    if vocab_type == "bytebpe":
        with open(vocab_file, encoding="utf-8") as f:
            return {index: piece for piece, index in json.load(f).items()}
    import sentencepiece

    model = sentencepiece.SentencePieceProcessor(model_file=vocab_file)
    return {i: model.id_to_piece(i) for i in range(model.get_piece_size())}
