"""New tokens for a published model's vocabulary, learned from the training text: the words it cuts into several pieces
that shorten the text most for each entry they add, written as an extended vocabulary folder.

Tokens saved is what the choice ranks by, not frequency alone: a WordPiece word seen 100 times in three pieces saves
as many tokens as one seen 200 times in two, and the break-out rate (pieces per word) is what extension is for. A
byte-level BPE word costs an entry for each merge of its chain, and each saves one token where the word occurs, so
there the most frequent words come first. Every new
token gets an id after the existing ones, and the extended vocabulary cuts a text that holds no new token exactly as
the old one did:

- WordPiece (BERT's greedy longest match): a new word is a whole entry of vocab.txt. BERT's pre-tokenizer cuts at
  spaces and punctuation, so every word begins a pre-token, and a whole word needs no ``##`` form. Where the match
  takes no new entry, it took the old one it would have taken.
- byte-level BPE: a new word is the end of a chain of new merges after the existing ones (``Ġcardi omy`` ->
  ``Ġcardiomy``, ``Ġcardiomy opathy`` -> ``Ġcardiomyopathy``), each making a token the vocabulary did not have: the
  old merges run first and give the old pieces, and a new merge fires only where it makes a new token. A chain step
  that would make an old token is never added (the word is left out), and every new step is an entry of its own.
- SentencePiece is not extended: its pieces are scored as a whole, and transformers' added tokens split text
  differently from sentencepiece's user-defined symbols.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Optional

from biofairseq.corpus.vocab import INFO, Encoder, read_dict, read_info, write_dict

KINDS = ("wordpiece", "bytelevel-bpe")
CONTINUATION = "##"
BATCH_LINES = 10_000  # lines encoded at once: the tokenizer's threads share a batch
SELECTION = {"wordpiece": "tokens saved: occurrences x (pieces - 1)",
             "bytelevel-bpe": "tokens saved per new merge: occurrences"}


class ExtensionError(Exception):
    pass


@dataclass
class NewToken:
    """A token the extended vocabulary adds: as the vocabulary spells it (``Ġ`` for a space before a byte-level BPE
    word), the old vocabulary's pieces of it, and how often the text holds it as a word (0: a BPE chain's step)."""
    token: str
    pieces: list
    count: int = 0


NAMES = {"wordpiece": "WordPiece", "bytelevel-bpe": "byte-level BPE", "sentencepiece": "SentencePiece"}


def refusal(kind: str) -> Optional[str]:
    """None, or why a vocabulary of this kind is not extended (the caller names the file and the fix)."""
    if kind in KINDS:
        return None
    return (f"a {NAMES.get(kind, kind)} vocabulary, and only WordPiece and byte-level BPE ones are extended (a "
            "SentencePiece model scores its pieces as a whole, so an added piece would change how other text is cut)")


def word_counts(vocab_dir: str | Path, lines: Iterable[str]) -> Counter:
    """How often the text holds each word the vocabulary cuts into several pieces, as the tuple of its pieces (a
    word WordPiece leaves unknown is one [UNK]: not counted)."""
    encoder = Encoder(vocab_dir)
    tokenizer = encoder.tok
    counts = Counter()
    batch = []

    def count(batch: list) -> None:
        encodings = tokenizer.encode_batch(batch, add_special_tokens=False) if encoder.type == "wordpiece" else \
            tokenizer.encode_batch(batch)
        for encoding in encodings:
            word, pieces = None, []
            for token, index in zip(encoding.tokens, encoding.word_ids):
                if index != word:
                    if len(pieces) > 1:
                        counts[tuple(pieces)] += 1
                    word, pieces = index, []
                pieces.append(token)
            if len(pieces) > 1:
                counts[tuple(pieces)] += 1

    for line in lines:
        if line.strip():
            batch.append(line.rstrip("\n"))
        if len(batch) == BATCH_LINES:
            count(batch)
            batch = []
    count(batch)
    return counts


def _is_word(text: str) -> bool:
    return any(c.isalpha() for c in text)


def choose(counts: Counter, size: int, kind: str, old_vocab: Iterable[str], min_count: int = 2,
           max_chars: int = 100) -> tuple[list, list]:
    """(new tokens, merges) of at most ``size`` new entries: the words of ``counts`` seen at least ``min_count``
    times that save the most tokens, each with a letter in it; for byte-level BPE, the new merges in order."""
    old = set(old_vocab)

    def spelled(pieces: tuple) -> str:
        if kind == "wordpiece":
            return pieces[0] + "".join(p.removeprefix(CONTINUATION) for p in pieces[1:])
        return "".join(pieces)

    # tokens saved per new entry: a WordPiece word is one entry, saving its pieces but one at each occurrence; each
    # step of a BPE chain is one entry, saving one token at each occurrence
    per_entry = (lambda p, n: n * (len(p) - 1)) if kind == "wordpiece" else (lambda p, n: n)
    ranked = sorted(((per_entry(p, n), n * (len(p) - 1), spelled(p), p, n) for p, n in counts.items() if n >= min_count),
                    key=lambda r: (-r[0], -r[1], r[2]))
    new, merges = [], []
    if kind == "wordpiece":
        for *_, word, pieces, n in ranked:
            if len(new) == size:
                break
            if _is_word(word) and len(word) <= max_chars and word not in old:
                new.append(NewToken(word, list(pieces), n))
        return new, merges
    added = {}  # new token -> its NewToken, in order
    ranks = {}  # the new merges' ranks, after every old one
    for *_, word, pieces, n in ranked:
        if len(added) == size:
            break
        if word in added:  # a step of an earlier word's chain already
            added[word].count = n
            continue
        if not _is_word(word) or word in old:
            continue
        current = _apply(list(pieces), ranks)
        steps, prefix = [], current[0]
        for piece in current[1:]:
            steps.append((prefix, piece))
            prefix += piece
        made = [a + b for a, b in steps]
        if any(t in old for t in made) or len(added) + sum(t not in added for t in made) > size:
            continue  # a step would make an old token, or the budget is spent
        for (a, b), token in zip(steps, made):
            if (a, b) not in ranks:
                ranks[(a, b)] = len(ranks)
                merges.append((a, b))
            if token not in added:
                added[token] = NewToken(token, None)  # its old pieces: ``extend`` cuts it with the old vocabulary
        added[word].count = n
    return list(added.values()), merges


def _apply(pieces: list, ranks: dict) -> list:
    """BPE's merges (lowest rank first) of ``ranks`` on pieces, as tokenizers applies them."""
    while len(pieces) > 1:
        pairs = [(ranks.get((a, b)), i) for i, (a, b) in enumerate(zip(pieces, pieces[1:])) if (a, b) in ranks]
        if not pairs:
            break
        _, i = min(pairs)
        pieces[i:i + 2] = [pieces[i] + pieces[i + 1]]
    return pieces


def write(vocab_dir: str | Path, out_dir: str | Path, new: list, merges: list, record: dict) -> None:
    """The extended vocabulary in ``out_dir``: the vocabulary files and dict.txt with the new tokens after the old
    ones, and vocab_info.json with ``record`` (what was added, from what) under "extension"."""
    vocab_dir, out_dir = Path(vocab_dir), Path(out_dir)
    info = read_info(vocab_dir)
    symbols, counts = read_dict(vocab_dir / "dict.txt")
    tokens = [t.token for t in new]
    if info["type"] == "wordpiece":
        vocab_txt = (vocab_dir / info["files"]["vocab"]).read_text(encoding="utf-8")
        (out_dir / info["files"]["vocab"]).write_text(vocab_txt + "".join(t + "\n" for t in tokens), encoding="utf-8")
        added = tokens
    else:
        vocab = json.loads((vocab_dir / info["files"]["vocab"]).read_text(encoding="utf-8"))
        first = max(vocab.values()) + 1
        ids = {t: first + k for k, t in enumerate(tokens)}
        (out_dir / info["files"]["vocab"]).write_text(json.dumps({**vocab, **ids}, ensure_ascii=False), encoding="utf-8")
        old_merges = (vocab_dir / info["files"]["merges"]).read_text(encoding="utf-8")
        if old_merges and not old_merges.endswith("\n"):
            old_merges += "\n"
        (out_dir / info["files"]["merges"]).write_text(old_merges + "".join(f"{a} {b}\n" for a, b in merges),
                                                       encoding="utf-8")
        added = [str(ids[t]) for t in tokens]
    write_dict(out_dir / "dict.txt", [*symbols, *added], [*counts, *[max(1, t.count) for t in new]])
    for name, path in info["files"].items():
        if not (out_dir / path).exists():
            shutil.copyfile(vocab_dir / path, out_dir / path)
    (out_dir / INFO).write_text(json.dumps({**info, "size": info["size"] + len(new), "extension": record}, indent=1) + "\n")


def extend(vocab_dir: str | Path, out_dir: str | Path, text: str | Path, size: int, min_count: int = 2,
           log: Callable[[str], None] = print) -> list:
    """Chooses up to ``size`` new tokens from ``text`` and writes the extended vocabulary (``write``); returns them,
    each with its old pieces."""
    info = read_info(vocab_dir)
    problem = refusal(info["type"])
    if problem:
        raise ExtensionError(f"{vocab_dir}: {problem}")
    with open(text, encoding="utf-8", newline="\n") as f:
        counts = word_counts(vocab_dir, f)
    encoder = Encoder(vocab_dir)
    old = encoder.tok.get_vocab(with_added_tokens=True)
    max_chars = read_info(vocab_dir).get("max_word_chars", 100)
    new, merges = choose(counts, size, info["type"], old, min_count, max_chars)
    if info["type"] == "bytelevel-bpe":  # every new token's old pieces: the old merges on its bytes
        model = encoder.tok.model
        for token in new:
            token.pieces = [t.value for t in model.tokenize(token.token)]
    words = sum(1 for t in new if t.count)
    candidates = sum(1 for p, n in counts.items() if n >= min_count and _is_word("".join(p)))
    record = {"added": len(new), "words": words, "asked": size, "from": str(Path(text).resolve()),
              "min_count": min_count, "selection": SELECTION[info["type"]],
              "candidates": candidates,
              "tokens_saved": sum(t.count * (len(t.pieces) - 1) for t in new if t.count)}
    write(vocab_dir, out_dir, new, merges, record)
    if not new:
        log(f"note: no word of {Path(text).name} that the vocabulary cuts into several pieces is seen {min_count} times "
            "or more: the vocabulary is unchanged")
    log(f"vocabulary: {len(new):,} new tokens ({words:,} words) of the {size:,} asked, from {candidates:,} words of "
        f"{Path(text).name} cut into several pieces and seen at least {min_count} times")
    return new
