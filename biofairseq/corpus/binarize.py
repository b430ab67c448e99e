"""Cleaned text -> fairseq's mmap data-bin in one pass: token ids from the tokenizer, mapped to dictionary indices
through a lookup table, written by a subclass of fairseq's own mmap builder.

The reference is ``encode.py`` (ids or pieces written out as text) then ``fairseq-preprocess --only-source --srcdict``
(the text read back and each token looked up in Python); the data-bin made here is byte for byte the same, and so
are its shards (``SHARD_MB`` measures the encoded text, whose size is known here without writing it). The corpus is
cut into ranges of whole documents, encoded in parallel processes into parts (tokens, sizes, and per document the
size of its encoded text), then each shard is the concatenation of its documents' slices of the parts. Memory holds a
batch of lines and a bounded cache, whatever the corpus or shard size; the training counts that dict.txt gets are
gathered on the way.

    python -m biofairseq.corpus.binarize CLEAN_DIR VOCAB_DIR OUT [--workers N] [--shard-mb MB]
"""

import argparse
import io
import logging
import os
import re
import shutil
import struct
import sys
from itertools import chain, repeat
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from biofairseq.corpus.vocab import VocabError, copy_vocab, read_info, vocab_files, write_counts
from biofairseq.data_bin import starts_new_part
from biofairseq.text.documents import is_blank

BATCH_BYTES = 1 << 21  # text read and encoded at once
RANGE_BYTES = 64 << 20  # a part: the ranges are at least --workers, and at most this large
CACHE_WORDS = 1 << 20  # byte-level BPE words remembered per process (about 150 MB at most)
# whitespace but the space: every character that str.isspace() and str.split() take for whitespace
_OTHER_SPACE = re.compile("[%s]" % re.escape("".join(c for c in map(chr, range(sys.maxunicode + 1))
                                                     if c.isspace() and c != " ")))
COPY_BYTES = 16 << 20


class BinarizeError(Exception):
    pass


class Indices:
    """Lines of text -> the fairseq indices that encode.py + fairseq-preprocess give them, per line.

    ``table[id]`` is the index fairseq looks up for the symbol encode.py writes for the tokenizer's ``id``
    (``Dictionary.index``: <unk> when dict.txt lacks it), and ``text_bytes[id]`` that symbol's size in the encoded
    text. A symbol that fairseq does not read as one token (a SentencePiece piece holding whitespace, or a carriage
    return that ends fairseq's line) is irregular: a line holding one is binarized the reference's way, from its text.
    So is SentencePiece's unknown piece, which encode.py writes as the text it covers, not as <unk>: fairseq looks
    that text up, and a piece of whitespace (without byte fallback, a space the vocabulary lacks) gives no token."""

    def __init__(self, vocab_dir, dictionary) -> None:
        info = read_info(vocab_dir)
        self.type, files = vocab_files(vocab_dir)
        self.dictionary = dictionary
        self.lowercase = info.get("lowercase", False)
        if self.type == "bytelevel-bpe":
            from tokenizers import ByteLevelBPETokenizer

            self.tok = ByteLevelBPETokenizer(files["vocab"], files["merges"], lowercase=self.lowercase)
            self.symbols = [str(i) for i in range(self.tok.get_vocab_size())]
        elif self.type == "wordpiece":  # the tokens fairseq's --bpe bert writes, looked up by name
            from biofairseq.corpus.vocab import wordpiece_settings, wordpiece_tokenizer

            self.tok = wordpiece_tokenizer(files["vocab"], wordpiece_settings(info))
            self.symbols = [self.tok.id_to_token(i) or "" for i in range(self.tok.get_vocab_size(with_added_tokens=True))]
        else:
            import sentencepiece as spm

            self.sp = spm.SentencePieceProcessor(model_file=files["model"])
            self.symbols = [self.sp.id_to_piece(i) for i in range(self.sp.get_piece_size())]
        self.table = np.zeros(len(self.symbols), np.int64)
        self.text_bytes = np.zeros(len(self.symbols), np.int64)
        self.irregular = np.zeros(len(self.symbols), bool)
        for i, symbol in enumerate(self.symbols):
            found = dictionary.encode_line(symbol, add_if_not_exist=False, append_eos=False).tolist()
            self.irregular[i] = len(found) != 1 or "\r" in symbol
            self.table[i] = found[0] if len(found) == 1 else dictionary.unk()
            self.text_bytes[i] = len(symbol.encode("utf-8"))
        if self.type == "sentencepiece" and self.sp.unk_id() >= 0:
            self.irregular[self.sp.unk_id()] = True
        self.dtype = np.dtype(_fairseq_dtype(len(dictionary)))
        # The cache holds words as index bytes, and finds the encoded text's size from the indices: it needs every id
        # regular and the ids of one index of one size, as a byte-level BPE's are (its ids 0-4 are not in dict.txt:
        # each one digit, looked up as <unk>, whose own id "3" is one digit too).
        self.index_text_bytes = np.zeros(len(dictionary), np.int64)
        self.index_text_bytes[self.table] = self.text_bytes
        one_size = (self.index_text_bytes[self.table] == self.text_bytes).all()
        self.cache = ({}, {}) if self.type == "bytelevel-bpe" and not self.irregular.any() and one_size else None

    def ids(self, texts: list[str]) -> list[list[int]]:
        """The tokenizer's ids of each text (encode.py's tokenizer calls, one thread: processes run in parallel)."""
        if not texts:
            return []
        if self.type == "bytelevel-bpe":
            return [e.ids for e in self.tok.encode_batch(texts)]
        if self.type == "wordpiece":
            return [e.ids for e in self.tok.encode_batch(texts, add_special_tokens=False)]
        return self.sp.encode(texts, out_type=int, num_threads=1)

    def _index_bytes(self, ids):
        return self.table[np.asarray(ids, np.int64)].astype(self.dtype).tobytes()

    def cached(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(indices back to back, how many for each text) of non-blank texts, through a cache of words.

        The byte-level pre-tokenizer's regex cuts before every single space that precedes a non-space (each of its
        matches ends before whitespace, and " ?X+" takes the space), so a line is the concatenation of its first
        word and each later " word" encoded alone. A line with any other whitespace (two spaces, one at an end, a tab,
        U+00A0: whatever Python's str.split() splits at) goes to the tokenizer whole, as does a lowercased line that
        is not ASCII (Python's and the tokenizer's lowercasing may differ)."""
        simple = [t.lower() if t.isascii() else t for t in texts] if self.lowercase else texts
        joined = " ".join(simple)
        words = joined.split(" ")
        if (not self.lowercase or joined.isascii()) and "" not in words and not _OTHER_SPACE.search(joined):
            return self._cached_words(simple, words)
        ok = [(not self.lowercase or t.isascii()) and splits_at_spaces(t) for t in simple]
        flat, lengths = self._cached_words([t for t, good in zip(simple, ok) if good])
        cached = iter(np.split(flat, np.cumsum(lengths)[:-1]) if len(lengths) else [])
        whole = iter(self.ids([t for t, good in zip(texts, ok) if not good]))
        arrays = [next(cached) if good else self.table[np.asarray(next(whole), np.int64)].astype(self.dtype)
                  for good in ok]
        return np.concatenate(arrays), np.array([len(a) for a in arrays], np.int64)

    def _cached_words(self, texts, words=None):
        head, tail = self.cache
        if not texts:
            return np.zeros(0, self.dtype), np.zeros(0, np.int64)
        words = " ".join(texts).split(" ") if words is None else words
        starts = np.cumsum([0] + [t.count(" ") + 1 for t in texts[:-1]])
        parts = list(map(tail.get, words, repeat(b"")))  # every word has a token: b"" is a miss
        for k in starts.tolist():
            parts[k] = head.get(words[k], b"")
        sizes = np.fromiter(map(len, parts), np.int64, len(parts))
        missing = np.flatnonzero(sizes == 0)
        if len(missing):
            first = np.zeros(len(parts), bool)
            first[starts] = True
            fresh = [{}, {}]  # words first on their line, later ones (encoded with their space)
            for k in missing.tolist():
                fresh[not first[k]][words[k]] = None
            for new, space in zip(fresh, ("", " ")):
                words_new = list(new)
                new.update(zip(words_new, map(self._index_bytes, self.ids([space + w for w in words_new]))))
            for k in missing.tolist():
                parts[k] = fresh[not first[k]][words[k]]
            sizes[missing] = [len(parts[k]) for k in missing.tolist()]
            if len(head) + len(tail) < CACHE_WORDS:
                head.update(fresh[0])
                tail.update(fresh[1])
        return np.frombuffer(b"".join(parts), self.dtype), np.add.reduceat(sizes // self.dtype.itemsize, starts)

    def reference(self, text: str, ids: Sequence[int]) -> tuple[int, bool, list[np.ndarray]]:
        """(text bytes, blank, items) of one line (``text``, whose ids are ``ids``) the reference's way: its symbols
        joined as encode.py writes them (SentencePiece's pieces as it gives them, an unknown one as the text it
        covers), read back by fairseq (universal newlines: a "\\r" ends a line) and looked up by its Dictionary."""
        pieces = self.sp.encode(text, out_type=str) if self.type == "sentencepiece" else [self.symbols[i] for i in ids]
        symbols = " ".join(pieces)
        items = [self.dictionary.encode_line(line, add_if_not_exist=False).numpy()
                 for line in io.StringIO(symbols + "\n", newline=None)]
        return len(symbols.encode("utf-8")) + 1, is_blank(symbols), items

    def batch(self, lines: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """A batch of cleaned lines -> (tokens, sizes, line_bytes, ends): every item fairseq-preprocess would make
        (its tokens back to back, </s> included, and its size), and for the last item of each encoded text line
        the line's bytes in the encoded text and whether it is blank (a document's end); 0 and False elsewhere."""
        blank = [is_blank(line) for line in lines]
        blank_arr = np.asarray(blank, bool)
        texts = [line for line, b in zip(lines, blank) if not b]
        lengths = np.zeros(len(lines), np.int64)
        if self.cache is not None:
            flat, lengths[~blank_arr] = self.cached(texts)
            text = self.index_text_bytes[flat]
            odd_lines = ()
        else:
            encoded = self.ids(texts)
            flat_ids = np.fromiter(chain.from_iterable(encoded), np.int64, sum(map(len, encoded)))
            lengths[~blank_arr] = [len(e) for e in encoded]
            flat, text = self.table[flat_ids], self.text_bytes[flat_ids]
            odd_lines = set(np.repeat(np.flatnonzero(~blank_arr), lengths[~blank_arr])[self.irregular[flat_ids]])
        starts = np.concatenate([[0], np.cumsum(lengths)])
        text_sum = np.concatenate([[0], np.cumsum(text, dtype=np.int64)])
        line_text = text_sum[starts[1:]] - text_sum[starts[:-1]] + lengths  # symbols, spaces between them, newline
        line_text[blank_arr] = 1
        keep = blank_arr | (lengths > 0)  # encode.py leaves out a line that encodes to nothing
        if not odd_lines:
            lengths, line_text, blank_arr = lengths[keep], line_text[keep], blank_arr[keep]
            eos_at = np.cumsum(lengths)
            tokens = np.insert(flat.astype(self.dtype), eos_at, self.dictionary.eos())
            return tokens, (lengths + 1).astype(np.int32), line_text, blank_arr
        # a line with an irregular symbol: the batch line by line, that line the reference's way
        parts = []
        id_lines = iter(encoded)
        for k, line in enumerate(lines):
            if not keep[k]:
                if not blank[k]:
                    next(id_lines)
                continue
            if blank[k]:
                text_size, ends, items = 1, True, [np.array([self.dictionary.eos()])]
            else:
                ids = next(id_lines)
                if k in odd_lines:
                    text_size, ends, items = self.reference(line, ids)
                else:
                    items = [np.append(self.table[np.asarray(ids, np.int64)], self.dictionary.eos())]
                    text_size, ends = int(line_text[k]), False
            for j, item in enumerate(items):
                last = j == len(items) - 1
                parts.append((item, len(item), text_size if last else 0, ends and last))
        tokens = np.concatenate([p[0] for p in parts]).astype(self.dtype) if parts else np.zeros(0, self.dtype)
        return (tokens, np.array([p[1] for p in parts], np.int32), np.array([p[2] for p in parts], np.int64),
                np.array([p[3] for p in parts], bool))


def _fairseq_dtype(size):
    from fairseq.data.indexed_dataset import best_fitting_int_dtype

    return best_fitting_int_dtype(size)


def _lines(path, start, end):
    """Batches of lines of path[start:end] as encode.py reads them: split at "\\n" alone, "\\r\\n" ends stripped."""
    with open(path, "rb") as f:
        f.seek(start)
        left = end - start
        while left > 0:
            data = f.read(min(BATCH_BYTES, left))
            left -= len(data)
            if left > 0:
                data += f.readline()  # the batch ends at a line end
                left = end - f.tell()
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as error:
                at = f.tell() - len(data) + error.start
                raise BinarizeError(f"{path}: not UTF-8 at byte {at:,}; binarize the text preprocess/clean_corpus.py "
                                    "writes, or re-encode this file as UTF-8") from None
            lines = text.split("\n")
            if lines[-1] == "":
                lines.pop()
            yield [line.rstrip("\r\n") for line in lines]


def document_ranges(path: str | Path, parts: int) -> list[tuple[int, int]]:
    """About ``parts`` (start, end) byte ranges of path, each ending after a blank line (or at the end)."""
    size = os.path.getsize(path)
    cuts = [0]
    with open(path, "rb") as f:
        for k in range(1, parts):
            at = max(cuts[-1], size * k // parts)
            if at >= size:
                break
            f.seek(at)
            if at:
                f.readline()  # to a line start
            for line in iter(f.readline, b""):
                if is_blank(line):
                    break
            if f.tell() > cuts[-1] and f.tell() < size:
                cuts.append(f.tell())
    cuts.append(size)
    return [(a, b) for a, b in zip(cuts, cuts[1:]) if b > a]


def splits_at_spaces(text: str) -> bool:
    """Whether text's only whitespace is single spaces between words: then the byte-level pre-tokenizer cuts it
    before each space (a run such as " \t \t" it cuts elsewhere)."""
    return not _OTHER_SPACE.search(text) and "" not in text.split(" ")


_INDICES = None


def _indices(vocab_dir, dict_path):
    global _INDICES
    if _INDICES is None or _INDICES.key != (vocab_dir, dict_path):
        from fairseq.data import Dictionary

        _INDICES = Indices(vocab_dir, Dictionary.load(str(dict_path)))
        _INDICES.key = (vocab_dir, dict_path)
    return _INDICES


def encode_range(job: tuple[str, str, str, tuple[int, int], str]) -> tuple[np.ndarray, int, int]:
    """One range of a split into part files: PREFIX.bin (tokens), .sizes (int32 per item) and .docs (int64 per
    document: encoded-text bytes, items, tokens); returns the counts of each index and the item and token totals."""
    vocab_dir, dict_path, path, (start, end), prefix = job
    indices = _indices(vocab_dir, dict_path)
    counts = np.zeros(len(indices.dictionary), np.int64)
    doc = np.zeros(3, np.int64)
    items = tokens = 0
    with open(f"{prefix}.bin", "wb") as bin_file, open(f"{prefix}.sizes", "wb") as sizes_file, \
            open(f"{prefix}.docs", "wb") as docs_file:
        for lines in _lines(path, start, end):
            tok, sizes, text, ends = indices.batch(lines)
            bin_file.write(tok.tobytes())
            sizes_file.write(sizes.tobytes())
            counts += np.bincount(tok, minlength=len(counts))[: len(counts)]
            items += len(sizes)
            tokens += len(tok)
            # documents: the items up to and including the last of each blank line's
            size_sum = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
            text_sum = np.concatenate([[0], np.cumsum(text)])
            records, done = [], 0
            for cut in (np.flatnonzero(ends) + 1).tolist():
                doc += (text_sum[cut] - text_sum[done], cut - done, size_sum[cut] - size_sum[done])
                records.append(doc.copy())
                doc[:], done = 0, cut
            doc += (text_sum[-1] - text_sum[done], len(sizes) - done, size_sum[-1] - size_sum[done])
            if records:
                docs_file.write(np.array(records, np.int64).tobytes())
        if doc[1]:
            docs_file.write(doc.tobytes())
    return counts, items, tokens


class ArrayBuilder:
    """fairseq's MMapIndexedDatasetBuilder fed slices of parts instead of one tensor a line: the data file as
    fairseq's builder writes it, the index through fairseq's own Index.writer header, its sizes and pointers written
    from arrays in chunks (the builder's Python lists would grow with the shard)."""

    def __init__(self, prefix, dtype) -> None:
        from fairseq.data.indexed_dataset import MMapIndexedDatasetBuilder

        self.builder = MMapIndexedDatasetBuilder(f"{prefix}.bin", dtype=dtype)
        self.prefix, self.dtype, self.slices = prefix, np.dtype(dtype), []

    def add_slice(self, part: str, items: tuple[int, int], tokens: tuple[int, int]) -> None:
        """Items [a, b) of a part, whose tokens are [c, d)."""
        (a, b), (c, d) = items, tokens
        with open(f"{part}.bin", "rb") as f:
            f.seek(c * self.dtype.itemsize)
            left = (d - c) * self.dtype.itemsize
            while left:
                data = f.read(min(COPY_BYTES, left))
                self.builder._data_file.write(data)
                left -= len(data)
        self.slices.append((part, a, b))

    def _sizes(self):
        for part, a, b in self.slices:
            sizes = np.memmap(f"{part}.sizes", np.int32, mode="r") if b > a else np.zeros(0, np.int32)
            for s in range(a, b, 1 << 22):
                yield np.asarray(sizes[s:min(b, s + (1 << 22))])

    def finalize(self) -> None:
        from fairseq.data.indexed_dataset import MMapIndexedDataset

        self.builder._data_file.close()
        count = sum(b - a for _, a, b in self.slices)
        with MMapIndexedDataset.Index.writer(f"{self.prefix}.idx", self.dtype.type) as index:
            index._file.write(struct.pack("<Q", count))
            for sizes in self._sizes():
                index._file.write(sizes.tobytes())
            address = 0
            for sizes in self._sizes():
                ends = address + np.cumsum(sizes, dtype=np.int64) * self.dtype.itemsize
                index._file.write(np.concatenate([[address], ends[:-1]]).astype(np.int64).tobytes())
                address = int(ends[-1])


def shard_plan(parts: Iterable[str], max_bytes: float) -> list[list[tuple[str, tuple[int, int], tuple[int, int]]]]:
    """[[(part, (item a, b), (token c, d)), ...] per shard]: documents in order, a new shard before a document that
    would take the shard past max_bytes of encoded text (data_bin.starts_new_part); max_bytes 0: one shard."""
    shards, current, size = [], [], 0
    for part in parts:
        docs = np.fromfile(f"{part}.docs", np.int64).reshape(-1, 3)
        item = token = 0
        start = (0, 0)
        for text, items, tokens in docs.tolist():
            if starts_new_part(size, text, max_bytes):
                if (item, token) != start:
                    current.append((part, (start[0], item), (start[1], token)))
                shards.append(current)
                current, size, start = [], 0, (item, token)
            size += text
            item += items
            token += tokens
        if (item, token) != start:
            current.append((part, (start[0], item), (start[1], token)))
    if current or not shards:
        shards.append(current)
    return shards


def binarize(clean_dir: str | Path, vocab_dir: str | Path, out: str | Path, workers: int = 1,
             shard_mb: float = 0.0) -> tuple[dict[str, tuple[int, int]], int]:
    """CLEAN_DIR/{train,valid}.txt -> OUT (a data-bin, or OUT/shard0, shard1, ... for shard_mb > 0), without the
    vocabulary files (binarize.sh copies them); returns {split: (items, tokens)} and the number of shards."""
    from biofairseq.corpus.processes import map_jobs

    clean_dir, vocab_dir, out = Path(clean_dir), Path(vocab_dir), Path(out)
    dict_path = vocab_dir / "dict.txt"
    indices = _indices(str(vocab_dir), str(dict_path))  # loaded before the fork: the workers share it
    work = out / "parts"
    work.mkdir(parents=True, exist_ok=True)
    jobs = {}
    for split in ("train", "valid"):
        path = clean_dir / f"{split}.txt"
        count = max(workers, -(-os.path.getsize(path) // RANGE_BYTES)) if split == "train" else 1
        jobs[split] = [(str(vocab_dir), str(dict_path), str(path), r, str(work / f"{split}{k}"))
                       for k, r in enumerate(document_ranges(path, count))]
    results = map_jobs(encode_range, jobs["train"] + jobs["valid"], workers)
    train_results = results[: len(jobs["train"])]
    plan = shard_plan([job[4] for job in jobs["train"]], shard_mb * (1 << 20))
    folders = [out] if not shard_mb else [out / f"shard{k}" for k in range(len(plan))]
    if shard_mb and not any(plan[0]):
        raise BinarizeError(f"{clean_dir / 'train.txt'}: encodes to nothing; nothing to binarize")
    counts = sum(r[0] for r in train_results)
    for folder, slices in zip(folders, plan):
        folder.mkdir(parents=True, exist_ok=True)
        builder = ArrayBuilder(folder / "train", indices.dtype.type)
        for part, items, tokens in slices:
            builder.add_slice(part, items, tokens)
        builder.finalize()
        shutil.copyfile(dict_path, folder / "dict.txt")
        copy_vocab(vocab_dir, folder)
    valid = ArrayBuilder(folders[0] / "valid", indices.dtype.type)
    for job, (_, items, tokens) in zip(jobs["valid"], results[len(jobs["train"]):]):
        valid.add_slice(job[4], (0, items), (0, tokens))
    valid.finalize()
    shutil.rmtree(work)
    write_counts(out, "train", counts)
    totals = {"train": (sum(r[1] for r in train_results), sum(r[2] for r in train_results)),
              "valid": (sum(r[1] for r in results[len(jobs["train"]):]), sum(r[2] for r in results[len(jobs["train"]):]))}
    return totals, len(folders)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("clean_dir")
    p.add_argument("vocab_dir")
    p.add_argument("out", help="a folder that does not exist yet (binarize.sh gives its temporary one)")
    p.add_argument("--workers", type=int, default=os.cpu_count())
    p.add_argument("--shard-mb", type=float, default=0.0)
    args = p.parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    logging.getLogger("fairseq").setLevel(logging.WARNING)  # what importing fairseq says of its optional packages
    try:
        totals, shards = binarize(args.clean_dir, args.vocab_dir, args.out, args.workers, args.shard_mb)
    except (VocabError, BinarizeError) as e:
        sys.exit(f"error: {e}")
    (train_items, train_tokens), (valid_items, valid_tokens) = totals["train"], totals["valid"]
    where = f" in {shards} shards (valid in shard0)" if args.shard_mb else ""
    print(f"train: {train_items:,} lines, {train_tokens:,} tokens; valid: {valid_items:,} lines, {valid_tokens:,} "
          f"tokens{where}", file=sys.stderr)


if __name__ == "__main__":
    from biofairseq.interrupts import ends_in_one_line

    with ends_in_one_line("binarize", "nothing was written (the data-bin appears only when complete); run the same "
                          "command again"):
        main()
