"""Sentences -> model inputs no longer than the model allows, and window predictions -> one tag per word.

A sentence whose sub-tokens do not fit is cut at word edges into windows that overlap by ``overlap``
sub-tokens; each word is then predicted by the window in which it has the most context on both sides, so
every gold word gets exactly one prediction and none is truncated away. A single word longer than a whole
window keeps only its first sub-tokens (its label sits on the first one).
"""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from transformers import PreTrainedTokenizerBase

    from biofairseq.finetune.data import Sentence

IGNORE = -100  # the label index transformers' token-classification losses skip


@dataclass
class Window:
    sentence: int  # index into the data set's sentences
    input_ids: list
    labels: list  # IGNORE where no loss applies
    owned: list  # (word index, position of its first sub-token): the words this window predicts


def special_template(tokenizer: "PreTrainedTokenizerBase") -> tuple[list[int], list[int]]:
    """Ids the tokenizer puts before and after a single sequence (``<s>`` ... ``</s>``, ``[CLS]`` ... ``[SEP]``)."""
    encoding = tokenizer(["a"], is_split_into_words=True)
    positions = [i for i, w in enumerate(encoding.word_ids()) if w is not None]
    if not positions:
        from biofairseq.finetune import NERFormatError

        raise NERFormatError(f"the tokenizer ({type(tokenizer).__name__}) gives no token for the word 'a', not even its "
                             "unknown one; save the model's own tokenizer in the folder (biofairseq-convert to-hf writes it)")
    ids = encoding["input_ids"]
    return ids[: positions[0]], ids[positions[-1] + 1 :]


def word_pieces(tokenizer: "PreTrainedTokenizerBase", sentences: "Sequence[Sentence]") -> list[list[list[int]]]:
    """Sub-token ids of every word of every sentence; a word the tokenizer maps to nothing becomes the unknown token."""
    words = [s.tokens for s in sentences]
    encodings = tokenizer(words, is_split_into_words=True, add_special_tokens=False, verbose=False)
    pieces = []
    for i, ids in enumerate(encodings["input_ids"]):
        per_word = [[] for _ in words[i]]
        for token_id, w in zip(ids, encodings.word_ids(i)):
            if w is not None:
                per_word[w].append(token_id)
        pieces.append([p or [tokenizer.unk_token_id] for p in per_word])
    return pieces


def spans(lengths: Sequence[int], budget: int, overlap: int) -> list[tuple[int, int]]:
    """(first word, last word + 1) of each window over words of these sub-token ``lengths``."""
    lengths = [min(n, budget) for n in lengths]
    windows, start = [], 0
    while True:
        end, total = start, 0
        while end < len(lengths) and total + lengths[end] <= budget:
            total += lengths[end]
            end += 1
        windows.append((start, end))
        if end == len(lengths):
            return windows
        next_start, shared = end, 0
        while next_start - 1 > start and shared + lengths[next_start - 1] <= overlap:
            next_start -= 1
            shared += lengths[next_start]
        start = next_start


def owners(windows: Iterable[tuple[int, int]], n_words: int) -> list[int]:
    """For each word, the window where it is farthest from both edges (the first such window on ties)."""
    best = [None] * n_words
    for k, (a, b) in enumerate(windows):
        for w in range(a, b):
            margin = min(w - a, b - 1 - w)
            if best[w] is None or margin > best[w][1]:
                best[w] = (k, margin)
    return [k for k, _ in best]


def overlap_used(tokenizer: "PreTrainedTokenizerBase", max_length: int, overlap: int) -> int:
    """The overlap windows get: at most half of what a window holds besides its special tokens."""
    prefix, suffix = special_template(tokenizer)
    return min(overlap, (max_length - len(prefix) - len(suffix)) // 2)


def build(sentences: "Sequence[Sentence]", tokenizer: "PreTrainedTokenizerBase", label_ids: Mapping[str, int],
          max_length: int, scheme: str = "first-subtoken", overlap: int = 128) -> list[Window]:
    """The windows of these sentences, with labels when the sentences have tags."""
    prefix, suffix = special_template(tokenizer)
    budget = max_length - len(prefix) - len(suffix)
    overlap = overlap_used(tokenizer, max_length, overlap)
    windows = []
    for index, (sentence, pieces) in enumerate(zip(sentences, word_pieces(tokenizer, sentences))):
        pieces = [p[:budget] for p in pieces]
        cuts = spans([len(p) for p in pieces], budget, overlap)
        owner = owners(cuts, len(pieces))
        for k, (a, b) in enumerate(cuts):
            ids, labels, owned = list(prefix), [IGNORE] * len(prefix), []
            for w in range(a, b):
                if owner[w] == k:
                    owned.append((w, len(ids)))
                label = label_ids[sentence.tags[w]] if sentence.tags else IGNORE
                inside = label_ids[f"I-{sentence.tags[w][2:]}"] if sentence.tags and sentence.tags[w] != "O" else label
                labels += [label] + [inside if scheme == "all-subtokens" else IGNORE] * (len(pieces[w]) - 1)
                ids += pieces[w]
            windows.append(Window(index, ids + suffix, labels + [IGNORE] * len(suffix), owned))
    return windows


def word_values(windows: Iterable[Window], values: "Iterable[Sequence[Any]] | np.ndarray",
                n_sentences: int) -> list[list[Any]]:
    """Each word's value, per sentence, from each window's values per position (a predicted label index, its
    probability): its first sub-token's, in the window that owns the word."""
    found = [dict() for _ in range(n_sentences)]
    for window, per_position in zip(windows, values):
        for w, position in window.owned:
            found[window.sentence][w] = per_position[position]
    return [[f[w] for w in range(len(f))] for f in found]


def word_tags(windows: Iterable[Window], predictions: "Iterable[Sequence[int]] | np.ndarray", labels: Sequence[str],
              n_sentences: int) -> list[list[str]]:
    """The predicted tag of every word, from each window's predicted label index per position."""
    return [[labels[int(i)] for i in s] for s in word_values(windows, predictions, n_sentences)]
