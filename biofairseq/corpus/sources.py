"""Raw documents from files of several formats, compressed or not, cut into shards that workers read alone."""

import bz2
import codecs
import gzip
import json
import lzma
import os
import re
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Iterable, Iterator, Self

from biofairseq.text.documents import BLANK_LINE, is_blank

TEXT_DOCS = ("blank-line", "line", "file")  # plain text's documents: between blank lines, a line each, a file each
_COMPRESSED = (".gz", ".bz2", ".xz", ".zst")
_JSONL = (".jsonl", ".json", ".ndjson")
_TEXT = (".txt", ".text")


def _read_errors():
    """What reading a file may raise that says the file, not the code, is wrong: OSError (bz2, gzip's bad headers),
    EOFError (a cut file), and the decompressors' own (zlib's corrupt data, xz's, zstandard's)."""
    errors = [OSError, EOFError, lzma.LZMAError, zlib.error]
    try:
        import zstandard

        errors.append(zstandard.ZstdError)
    except ImportError:
        pass
    return tuple(errors)


READ_ERRORS = _read_errors()


class InputError(Exception):
    """A bad input file: the message names the file (and line) and the fix."""


@dataclass(frozen=True)
class Piece:
    """A whole file, or the byte range [start, end) of an uncompressed one that begins at line first_line (0: not
    counted; the line numbers of a message are counted when one is said, see Lines)."""

    path: str
    fmt: str  # jsonl | text | brat
    start: int = 0
    end: int = -1
    first_line: int = 1
    origin: str = ""  # a part of a large compressed file, decompressed once: the file that messages name

    @property
    def named(self) -> str:
        return self.origin or self.path


@dataclass
class Shard:
    source: str
    index: int
    pieces: list = field(default_factory=list)
    size: int = 0

    @property
    def name(self) -> str:
        return f"{self.source}/{self.index:05d}"

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "index": self.index, "size": self.size, "pieces": [asdict(p) for p in self.pieces]}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Self:
        return cls(d["source"], d["index"], [Piece(**p) for p in d["pieces"]], d["size"])


def open_compressed(path: str | Path) -> BinaryIO:
    """A binary stream of the file, decompressed by its suffix (.gz, .bz2, .xz, .zst, or none)."""
    suffix = Path(path).suffix
    if suffix == ".gz":
        return gzip.open(path, "rb")
    if suffix == ".bz2":
        return bz2.open(path, "rb")
    if suffix == ".xz":
        return lzma.open(path, "rb")
    if suffix == ".zst":
        import zstandard

        return zstandard.open(path, "rb")
    return open(path, "rb")


_TEXT_FORMAT = {"blank-line": "text", "line": "text-line", "file": "text-file"}


def walk(path: str | Path) -> Iterator[tuple[str, list[str], list[str]]]:
    """os.walk that follows links to folders (data folders are often built of links), each real folder once."""
    seen = set()
    for root, dirs, files in os.walk(path, followlinks=True):
        real = os.path.realpath(root)
        if real in seen:  # a link back up the tree, or a second link to one folder
            dirs[:] = []
            continue
        seen.add(real)
        dirs.sort()
        yield root, dirs, sorted(files)


def _format_of(path, text_docs):
    name = path.name[: -len(path.suffix)] if path.suffix in _COMPRESSED else path.name
    suffix = Path(name).suffix
    if suffix in _JSONL:
        return "jsonl"
    if suffix in _TEXT:
        return _TEXT_FORMAT[text_docs]
    return None


def _found(path, text_docs):
    """The pieces of one --source path, lazily, folder by folder: ("piece", Piece) and ("error", message) for what
    can't be read (an unpaired BRAT file)."""
    path = Path(path)
    if path.is_file():
        yield "piece", Piece(str(path), _format_of(path, text_docs) or _TEXT_FORMAT[text_docs])
        return
    for root, dirs, files in walk(path):
        if any(f.endswith(".ann") for f in files):  # a BRAT folder: its .txt side, one document per file
            txt = {f[:-4] for f in files if f.endswith(".txt")}
            ann = {f[:-4] for f in files if f.endswith(".ann")}
            for stem in sorted(txt | ann):
                if stem not in ann:
                    yield "error", f"{Path(root, stem)}.txt: BRAT file without its .ann; add it or move the .txt out"
                elif stem not in txt:
                    yield "error", f"{Path(root, stem)}.ann: BRAT file without its .txt; add it or remove the .ann"
                else:
                    yield "piece", Piece(str(Path(root, stem + ".txt")), "brat")
            continue
        for f in files:
            fmt = _format_of(Path(f), text_docs)
            if fmt:
                yield "piece", Piece(str(Path(root, f)), fmt)


def discover(path: str | Path, text_docs: str) -> tuple[list[Piece], list[str]]:
    """Pieces of one --source path, and messages for what can't be read (missing path, unpaired BRAT file)."""
    if not Path(path).exists():
        return [], [f"{path}: no such file or directory; fix the path in --source NAME=PATH"]
    pieces, errors = [], []
    for kind, found in _found(path, text_docs):
        (pieces if kind == "piece" else errors).append(found)
    if not pieces and not errors:
        errors.append(f"{path}: no .txt/.jsonl files (optionally .gz/.bz2/.xz/.zst) inside; check the path")
    return pieces, errors


_LINE_BASED = ("jsonl", "text", "text-line")  # formats whose records end at a line end (or a blank line)


def _cut(piece, shard_size):
    """Splits a large uncompressed line-based file at record boundaries, with the line number of each cut."""
    size = os.path.getsize(piece.path)
    if piece.fmt not in _LINE_BASED or piece.path.endswith(_COMPRESSED) or size <= shard_size:
        return [piece]
    pattern = BLANK_LINE if piece.fmt == "text" else re.compile(rb"\n")
    cuts = [0]
    with open(piece.path, "rb") as f:
        while cuts[-1] + shard_size < size:
            f.seek(cuts[-1] + shard_size)
            window, base = b"", f.tell()
            while True:
                chunk = f.read(1 << 20)
                window += chunk
                m = pattern.search(window)
                if m or not chunk:
                    break
            if not m:
                break
            cuts.append(base + m.end())
    cuts.append(size)
    # the line a cut starts at is not counted here: that would read the whole file on the planning host
    return [Piece(piece.path, piece.fmt, a, b, piece.first_line if a == 0 else 0, piece.origin)
            for a, b in zip(cuts, cuts[1:]) if b > a]


def needs_splitting(piece: Piece, shard_size: int) -> bool:
    """A compressed line-based file that likely holds more than a shard (text compresses 3-10x): one worker would
    read it alone, for hours at 100 GB."""
    return (piece.fmt in _LINE_BASED and piece.path.endswith(_COMPRESSED)
            and 4 * os.path.getsize(piece.path) > shard_size)


def split_compressed(piece: Piece, shard_size: int, folder: str | Path) -> list[Piece]:
    """Decompresses a large compressed file once, streaming, into uncompressed parts of about shard_size bytes cut at
    record boundaries (a line end for JSON lines, a blank line for text): pieces that workers clean in parallel,
    whose messages still name the file and its line."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    pieces, out, size, line, boundary = [], None, 0, 1, True
    try:
        with open_compressed(piece.path) as f:
            for raw in f:
                if out is not None and size + len(raw) > shard_size and boundary:  # a new part before this record
                    out.close()
                    out = None
                if out is None:
                    path = folder / f"{len(pieces):05d}{'.jsonl' if piece.fmt == 'jsonl' else '.txt'}"  # (read as piece.fmt)
                    out, size = open(path, "wb"), 0
                    pieces.append(Piece(str(path), piece.fmt, first_line=line, origin=piece.path))
                out.write(raw)
                size += len(raw)
                line += 1
                boundary = piece.fmt != "text" or is_blank(raw)
    except READ_ERRORS:
        return [piece]  # read whole by one worker, which reports what is wrong with it
    finally:
        if out is not None:
            out.close()
    return pieces or [piece]


def plan_shards(source: str, pieces: Iterable[Piece], shard_size: int) -> list[Shard]:
    """Packs the pieces of one source, in order, into shards of about shard_size bytes."""
    shards = [Shard(source, 0)]
    for whole in pieces:
        for piece in _cut(whole, shard_size):
            size = (piece.end if piece.end >= 0 else os.path.getsize(piece.path)) - piece.start
            if shards[-1].pieces and shards[-1].size + size > shard_size:
                shards.append(Shard(source, len(shards)))
            shards[-1].pieces.append(piece)
            shards[-1].size += size
    return [s for s in shards if s.pieces]


def _decode(data, path, line, at=lambda line: line):
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line += data[: e.start].count(b"\n")
        raise InputError(f"{path}:{at(line)}: invalid UTF-8 byte {data[e.start]:#04x}; re-encode the file as UTF-8") from None


class Lines:
    """The line numbers of a piece's messages: a piece whose first line was not counted (a cut of a large file) counts
    the lines before it once, when its first message is said, so that reading the documents costs no count."""

    def __init__(self, piece) -> None:
        self.piece, self.base = piece, piece.first_line - 1 if piece.first_line else None

    def __call__(self, line):
        """The line number in the file of the piece's line ``line`` (1: its first)."""
        if self.base is None:
            with open(self.piece.path, "rb") as f:
                self.base = sum(chunk.count(b"\n") for chunk in _chunks(f, self.piece.start))
        return self.base + line


def _chunks(f, size, chunk=1 << 24):
    while size > 0:
        data = f.read(min(chunk, size))
        if not data:
            return
        size -= len(data)
        yield data


def _lines(piece):
    """(line number in the piece, from 1; bytes) of the piece's lines."""
    with open_compressed(piece.path) as f:
        if piece.start:
            f.seek(piece.start)
        pos, line = piece.start, 1
        for raw in f:
            if piece.end >= 0 and pos >= piece.end:
                break
            yield line, raw
            pos += len(raw)
            line += 1


def read_documents(piece: Piece, text_field: str = "text") -> Iterator[tuple[str, str] | tuple[str, str, str]]:
    """Yields ("doc", where, text) for each document and ("error", message) for each unreadable one."""
    try:
        if piece.fmt in ("text-file", "brat"):
            with open_compressed(piece.path) as f:
                data = f.read()
            if is_blank(data):
                yield "error", f"{piece.named}: empty file; remove it or fill it"
                return
            try:
                yield "doc", piece.named, _decode(data, piece.named, 1)
            except InputError as e:
                yield "error", str(e)
            return
        seen, at = False, Lines(piece)
        if piece.fmt == "jsonl":
            for line, raw in _lines(piece):
                if is_blank(raw):
                    continue
                seen = True
                try:
                    text = _decode(raw, piece.named, line, at)
                    first = piece.start == 0 and line == 1
                    record = json.loads(text.lstrip("\ufeff") if first else text)  # a byte-order mark first
                    text = record[text_field]
                    if not isinstance(text, str):
                        raise KeyError
                except InputError as e:
                    yield "error", str(e)
                    continue
                except json.JSONDecodeError as e:
                    yield "error", f"{piece.named}:{at(line)}: invalid JSON ({e.msg}); fix or remove the line"
                    continue
                except (KeyError, TypeError):
                    yield "error", f'{piece.named}:{at(line)}: no "{text_field}" string field; name the field with --text-field'
                    continue
                yield "doc", _where(piece, line, at), text
        elif piece.fmt == "text-line":  # a document a line
            for line, raw in _lines(piece):
                if not is_blank(raw):
                    seen = True
                    yield _text_document(piece, line, [raw], at)
        else:  # text, documents separated by blank lines
            doc, first = [], None
            for line, raw in _lines(piece):
                if not is_blank(raw):
                    seen = True
                    first = first or line
                    doc.append(raw)
                    continue
                if doc:
                    yield _text_document(piece, first, doc, at)
                doc, first = [], None
            if doc:
                yield _text_document(piece, first, doc, at)
        if not seen and piece.start == 0 and piece.first_line == 1:
            yield "error", f"{piece.named}: empty file; remove it or fill it"
    except READ_ERRORS as e:
        yield "error", f"{piece.named}: can't read ({e}); check the file"


def _where(piece, line, at):
    """A document's place: its file and line, where its piece's lines are counted (the cleaning does not read it)."""
    return f"{piece.named}:{at(line)}" if at.base is not None else f"{piece.named}:byte {piece.start}, line {line} after"


def _text_document(piece, first, lines, at):
    try:
        return "doc", _where(piece, first, at), _decode(b"".join(lines), piece.named, first, at)
    except InputError as e:
        return "error", str(e)


def count_documents(paths: Iterable[str | Path], text_docs: str = "blank-line", text_field: str = "text",
                    more_than: int | None = None) -> int:
    """The documents of the sources as the cleaning reads them (before it removes any), counted only up to
    ``more_than`` + 1: what a check of VALID_DOCS needs costs no more than reading that many documents."""
    count = 0
    for path in paths:
        for kind, piece in _found(path, text_docs):
            if kind != "piece":
                continue
            for found, *_ in read_documents(piece, text_field):
                count += found == "doc"
                if more_than is not None and count > more_than:
                    return count
    return count


NOTE_BYTES = 1 << 20  # a text file above this is a corpus's part, not a note


def paragraphs_as_documents(path: str | Path, files: int = 20) -> tuple[int, int] | None:
    """For a folder of notes (small text files) read at blank lines: (files looked at, the documents they give) over
    its first ``files`` text files, when they give at least two a file (the cleaning's own warning, said before it
    runs); else None, also for a folder holding a text file above NOTE_BYTES (parts of a corpus)."""
    looked, documents = 0, 0
    for kind, piece in _found(path, "blank-line"):
        if kind != "piece" or piece.fmt != "text":
            continue
        if os.path.getsize(piece.path) > NOTE_BYTES:
            return None
        looked += 1
        documents += sum(found == "doc" for found, *_ in read_documents(piece))
        if looked >= files:
            break
    return (looked, documents) if looked > 1 and documents >= 2 * looked else None


def sample_documents(paths: Iterable[str | Path], text_docs: str = "blank-line", text_field: str = "text",
                     chars: int = 1 << 16) -> list[str]:
    """The first documents of the sources, about ``chars`` characters in all, as the cleaning reads them, for the
    checks that need the words before any work (their language; whether a model's vocabulary knows them). Only the
    start of each file is read, and the folders are walked only as far as needed: a 10 GB file of one document, or a
    folder of a million, costs no more than a small one."""
    taken, size = [], 0
    for path in paths:
        for kind, piece in _found(path, text_docs):
            if kind != "piece":
                continue
            try:
                with open_compressed(piece.path) as f:
                    head = f.read(4 * chars)
            except READ_ERRORS:
                continue
            for text in _head_documents(head, piece.fmt, text_field, whole=len(head) < 4 * chars):
                taken.append(text[:chars - size])
                size += len(taken[-1])
                if size >= chars:
                    return taken
    return taken


def _head_documents(head, fmt, text_field, whole):
    """The documents in the first bytes of a file (``whole``: all of it), the last one possibly cut: split as the
    cleaning splits them (BLANK_LINE), and decoded."""
    head = head.removeprefix(codecs.BOM_UTF8)
    parts = ([head] if fmt in ("text-file", "brat") else BLANK_LINE.split(head) if fmt == "text" else
             head.split(b"\n") if whole or fmt == "text-line" else head.split(b"\n")[:-1])  # JSON: no cut line
    texts = [part.decode("utf-8", "replace") for part in parts if not is_blank(part)]
    if fmt != "jsonl":
        return texts
    found = []
    for line in texts:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and isinstance(record.get(text_field), str):
            found.append(record[text_field])
    return found
