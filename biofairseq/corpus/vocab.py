"""Vocabularies (byte-level BPE or SentencePiece, learned here; a published model's WordPiece) and the fairseq dict.txt
that goes with each.

A vocabulary learned here puts <s> <pad> </s> <unk> <mask> at ids 0-4, fairseq's own order, and dict.txt lists
<mask> and then every other token in id order, so a fairseq index equals the tokenizer's id. The fairseq-lm text
holds byte-level BPE ids as numbers (fairseq's hf_byte_bpe convention), SentencePiece pieces and WordPiece tokens as
strings (fairseq's sentencepiece and bert conventions). A WordPiece vocabulary is a published BERT-family model's
``vocab.txt`` (``biofairseq-convert from-hf``): its dict.txt holds the same tokens in fairseq's order, its [CLS],
[PAD], [SEP], [UNK] and [MASK] under fairseq's names. vocab_info.json records which files make the vocabulary (and a
WordPiece tokenizer's settings), so that a data-bin carrying it is enough to find the BPE later.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Self, Sequence

from biofairseq.atomic import write_text

if TYPE_CHECKING:
    import numpy as np
    from tokenizers import Tokenizer

SPECIALS = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")
FAIRSEQ_SPECIALS = 4  # <s> <pad> </s> <unk>: fairseq's Dictionary adds them; dict.txt starts at <mask>
TYPES = ("bytelevel-bpe", "sentencepiece", "wordpiece")
LEARNED = TYPES[:2]  # what preprocess/train_vocab.py learns; WordPiece comes with a published model
INFO = "vocab_info.json"
FILES = {"bytelevel-bpe": {"vocab": "vocab.json", "merges": "merges.txt"}, "sentencepiece": {"model": "sentencepiece.model"},
         "wordpiece": {"vocab": "vocab.txt"}}
# a WordPiece tokenizer's settings in vocab_info.json (BertTokenizer's), with BERT's defaults
WORDPIECE_DEFAULTS = {"lowercase": False, "strip_accents": None, "chinese_chars": True, "max_word_chars": 100,
                      "specials": {"cls": "[CLS]", "pad": "[PAD]", "sep": "[SEP]", "unk": "[UNK]", "mask": "[MASK]"}}


class VocabError(Exception):
    pass


def dict_symbol(symbol: str) -> str:
    """A symbol's name in dict.txt. fairseq reads dict.txt with universal newlines, where a "\\r" or "\\n" would cut
    the symbol's line in two: it is written as a space. fairseq never looks such a symbol up (its text reader cuts
    the line there too, and its tokenizer splits at spaces), so the entry only keeps the index; a SentencePiece piece
    holds no space ("\u2581" stands for it), so the name is no other piece's."""
    return symbol.replace("\r", " ").replace("\n", " ")


def write_dict(path: str | Path, symbols: Sequence[str], counts: Sequence[int] | None = None) -> None:
    """dict.txt with these symbols in this order (with their counts, else 1), one line each, written atomically."""
    names = [dict_symbol(s) for s in symbols]
    twice = [name for name, n in Counter(names).items() if n > 1]
    if twice:
        raise VocabError(f"{path}: symbols {twice[:3]} would be written twice; fairseq refuses a repeated one")
    tmp = Path(f"{path}.tmp")
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for i, name in enumerate(names):
            f.write(f"{name} {counts[i] if counts is not None else 1}\n")
    os.replace(tmp, path)


def read_dict(path: str | Path) -> tuple[list[str], list[int]]:
    """(symbols, counts) of a dict.txt, its lines cut at "\\n" alone, where write_dict ends them: a piece may hold
    U+2028, U+0085, "\\x0b" and the like, which str.splitlines() also cuts at."""
    symbols, counts = [], []
    lines = Path(path).read_bytes().decode("utf-8").split("\n")
    for line in lines[:-1] if lines[-1] == "" else lines:
        symbol, space, count = line.rpartition(" ")
        symbols.append(symbol if space else count)
        counts.append(int(count) if space else 1)
    return symbols, counts


COUNT_CHUNK = 1 << 24  # tokens counted at once: 128 MB of int64 whatever the corpus size


def token_counts(data_bin: str | Path, split: str, size: int, chunk: int = COUNT_CHUNK) -> np.ndarray:
    """How often each index occurs in a binarized split of a data-bin (an array of ``size`` or more counts), read
    in chunks: memory does not grow with the split."""
    import numpy as np

    from biofairseq.data_bin import mmap_index

    prefix = Path(data_bin) / split
    tokens = np.memmap(f"{prefix}.bin", dtype=mmap_index(prefix)[0], mode="r")
    counts = np.zeros(size, np.int64)
    for start in range(0, len(tokens), chunk):
        part = np.bincount(tokens[start:start + chunk], minlength=size)
        if len(part) > len(counts):
            counts = np.pad(counts, (0, len(part) - len(counts)))
        counts[: len(part)] += part
    return counts


def write_counts(data_bin: str | Path, split: str = "train", counts: np.ndarray | None = None) -> None:
    """Rewrites dict.txt with how often each entry occurs in the split (over every shard of a sharded data-bin, into
    each shard's dict.txt), the order unchanged, and records in vocab_info.json that it did (``recorded_counts``
    reads them back instead of counting again).

    fairseq-preprocess --srcdict keeps the counts of the vocabulary's dict.txt (all 1); real counts are what
    ``--freq-weighted-replacement`` draws from. dict.txt lists the entries after fairseq's 4 specials. ``counts``
    (by fairseq index) are those the binarizer gathered on the way; without them, the split is read again."""
    from biofairseq.data_bin import shards

    folders = shards(data_bin)
    symbols, _ = read_dict(folders[0] / "dict.txt")
    if counts is None:
        counts = sum(token_counts(folder, split, len(symbols) + FAIRSEQ_SPECIALS) for folder in folders)
    counts = counts[: len(symbols) + FAIRSEQ_SPECIALS]  # fairseq's dictionary may hold more (madeupword padding)
    for folder in folders:
        write_dict(folder / "dict.txt", symbols, counts[FAIRSEQ_SPECIALS:].tolist())
        info = json.loads((folder / INFO).read_text())
        write_text(folder / INFO, json.dumps({**info, "counts": split}, indent=1) + "\n")


def recorded_counts(data_bin: str | Path, split: str = "train") -> np.ndarray | None:
    """The counts of ``split`` that dict.txt holds (fairseq's index order; its 4 specials 0), or None when
    ``write_counts`` did not write them (a data-bin made another way)."""
    import numpy as np

    from biofairseq.data_bin import shards

    folder = shards(data_bin)[0]
    if not (folder / INFO).is_file() or json.loads((folder / INFO).read_text()).get("counts") != split:
        return None
    return np.array([0] * FAIRSEQ_SPECIALS + read_dict(folder / "dict.txt")[1], np.int64)


def sample_lines(files: Iterable[str | Path], max_lines: int, seed: int = 1) -> list[str] | None:
    """A seeded uniform sample of ``max_lines`` of the files' non-empty lines (reservoir sampling: one pass, memory
    for the sample only), or None when they hold no more than that (then the files are read whole). Lines end at
    "\\n" alone ("\\r" kept), where tokenizers cuts the files it reads whole: the sample learns the same bytes."""
    import random

    rng, sample, seen = random.Random(seed), [], 0
    for name in files:
        with open(name, encoding="utf-8", newline="\n") as f:
            for line in f:
                if line == "\n":
                    continue
                seen += 1
                if len(sample) < max_lines:
                    sample.append(line)
                else:
                    j = rng.randrange(seen)
                    if j < max_lines:
                        sample[j] = line
    return sample if seen > max_lines else None


def train_bytelevel_bpe(files: Sequence[str | Path], out_dir: Path, vocab_size: int, min_frequency: int = 2,
                        lowercase: bool = False, max_sentences: int = 10_000_000) -> int:
    from tokenizers import ByteLevelBPETokenizer

    tok = ByteLevelBPETokenizer(lowercase=lowercase)
    options = dict(vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=list(SPECIALS), show_progress=False)
    sample = sample_lines(files, max_sentences)
    if sample is None:
        tok.train([str(f) for f in files], **options)
    else:  # tokenizers reads whole files into memory; a bounded sample, as SentencePiece's input_sentence_size
        tok.train_from_iterator(sample, **options)
        del sample
    tok.save_model(str(out_dir))
    size = tok.get_vocab_size()
    # <mask> keeps id 4 when fairseq's task adds it: it is already in the dictionary.
    write_dict(out_dir / "dict.txt", ["<mask>", *map(str, range(len(SPECIALS), size))])
    return size


def train_sentencepiece(files: Iterable[str | Path], out_dir: Path, vocab_size: int, model_type: str = "unigram",
                        max_sentences: int = 10_000_000, threads: int = 1, character_coverage: float = 0.9999,
                        byte_fallback: bool = True, normalization: str = "identity") -> int:
    import sentencepiece as spm

    prefix = out_dir / "sentencepiece"
    spm.SentencePieceTrainer.train(
        input=",".join(map(str, files)), model_prefix=str(prefix), vocab_size=vocab_size, model_type=model_type,
        bos_id=0, pad_id=1, eos_id=2, unk_id=3, user_defined_symbols=["<mask>"],
        bos_piece="<s>", pad_piece="<pad>", eos_piece="</s>", unk_piece="<unk>",
        character_coverage=character_coverage, byte_fallback=byte_fallback,
        normalization_rule_name=normalization, remove_extra_whitespaces=normalization != "identity",
        input_sentence_size=max_sentences, shuffle_input_sentence=True, num_threads=threads,
        train_extremely_large_corpus=False, minloglevel=2,
    )
    sp = spm.SentencePieceProcessor(model_file=f"{prefix}.model")
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    assert tuple(pieces[: len(SPECIALS)]) == SPECIALS, pieces[:5]
    write_dict(out_dir / "dict.txt", ["<mask>", *pieces[len(SPECIALS):]])
    return len(pieces)


def write_info(out_dir: Path, vocab_type: str, size: int, **extra: Any) -> dict[str, Any]:
    info = {"type": vocab_type, "size": size, "files": FILES[vocab_type], "specials": list(SPECIALS), **extra}
    (out_dir / INFO).write_text(json.dumps(info, indent=1) + "\n")
    return info


def read_info(vocab_dir: str | Path) -> dict[str, Any]:
    """The vocabulary recorded in VOCAB_DIR/vocab_info.json (a vocabulary folder or a data-bin)."""
    path = Path(vocab_dir) / INFO
    if not path.is_file():
        raise VocabError(f"{path}: missing; make the vocabulary with preprocess/train_vocab.py")
    info = json.loads(path.read_text())
    for name in info["files"].values():
        if not (Path(vocab_dir) / name).is_file():
            raise VocabError(f"{Path(vocab_dir) / name}: missing; copy it from the vocabulary folder")
    return info


def vocab_files(vocab_dir: str | Path) -> tuple[str, dict[str, str]]:
    info = read_info(vocab_dir)
    return info["type"], {k: str(Path(vocab_dir) / v) for k, v in info["files"].items()}


def copy_vocab(vocab_dir: str | Path, dest: str | Path) -> None:
    """Copies the vocabulary files and vocab_info.json next to a data-bin."""
    info = read_info(vocab_dir)
    for name in [*info["files"].values(), INFO]:
        shutil.copyfile(Path(vocab_dir) / name, Path(dest) / name)


def wordpiece_settings(info: Mapping[str, Any]) -> dict[str, Any]:
    """A WordPiece vocabulary's tokenizer settings (``WORDPIECE_DEFAULTS``' keys) from its vocab_info.json."""
    return {k: info.get(k, v) for k, v in WORDPIECE_DEFAULTS.items()}


def wordpiece_tokenizer(vocab_file: str | Path, settings: Mapping[str, Any]) -> Tokenizer:
    """The ``tokenizers`` WordPiece tokenizer that transformers' BertTokenizer builds for these settings (and fairseq's
    ``--bpe bert`` runs, through BertTokenizer): BERT's normaliser and pre-tokeniser, its five special tokens kept
    whole where the text holds them, no [CLS] or [SEP] added."""
    from tokenizers import AddedToken, Tokenizer, decoders, normalizers, pre_tokenizers
    from tokenizers.models import WordPiece

    with open(vocab_file, encoding="utf-8") as f:  # as BertTokenizer's load_vocab reads it
        vocab = {token.rstrip("\n"): i for i, token in enumerate(f)}
    specials = settings["specials"]
    tokenizer = Tokenizer(WordPiece(vocab, unk_token=specials["unk"], max_input_chars_per_word=settings["max_word_chars"]))
    tokenizer.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=settings["chinese_chars"],
                                                      strip_accents=settings["strip_accents"], lowercase=settings["lowercase"])
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece(prefix="##")
    tokenizer.add_special_tokens([AddedToken(t, special=True) for t in specials.values() if t in vocab])
    return tokenizer


class Encoder:
    """Text -> the symbols fairseq-lm text holds for this vocabulary, and back."""

    def __init__(self, vocab_dir) -> None:
        info = read_info(vocab_dir)
        self._load(info["type"], vocab_files(vocab_dir)[1], info.get("lowercase", False), info)

    @classmethod
    def from_files(cls, vocab_type: str, files: Mapping[str, str], lowercase: bool = False,
                   info: Mapping[str, Any] | None = None) -> Self:
        encoder = cls.__new__(cls)
        encoder._load(vocab_type, files, lowercase, info or {})
        return encoder

    def _load(self, vocab_type, files, lowercase, info) -> None:
        self.type = vocab_type
        if self.type == "bytelevel-bpe":
            from tokenizers import ByteLevelBPETokenizer

            self.tok = ByteLevelBPETokenizer(files["vocab"], files["merges"], lowercase=lowercase)
        elif self.type == "wordpiece":
            self.tok = wordpiece_tokenizer(files["vocab"], wordpiece_settings(info))
        else:
            import sentencepiece as spm

            self.sp = spm.SentencePieceProcessor(model_file=files["model"])

    def encode_lines(self, lines: list[str], threads: int = 1) -> list[str]:
        if self.type == "bytelevel-bpe":
            return [" ".join(map(str, e.ids)) for e in self.tok.encode_batch(lines)]
        if self.type == "wordpiece":
            return [" ".join(e.tokens) for e in self.tok.encode_batch(lines, add_special_tokens=False)]
        return [" ".join(p) for p in self.sp.encode(lines, out_type=str, num_threads=threads)]

    def decode(self, symbols: str) -> str:
        if self.type == "bytelevel-bpe":
            return self.tok.decode([int(s) for s in symbols.split()], skip_special_tokens=False)
        if self.type == "wordpiece":
            return self.tok.decoder.decode(symbols.split())
        return self.sp.decode(symbols.split())
