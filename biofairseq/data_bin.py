"""A data-bin, whole or in shards: what fairseq-train reads, and where its dictionary, vocabulary and valid split are.

A large corpus is binarized into shards (``preprocess/binarize.sh CLEAN VOCAB DATA_BIN WORKERS SHARD_MB``): DATA_BIN/shard0, shard1, ...,
each a data-bin of whole documents with the same dict.txt and vocabulary, the valid split in shard0 alone. fairseq
reads one shard an epoch from the colon-separated path (``data-bin/shard0:data-bin/shard1``), its own way for
corpora that do not fit in one process. A data-bin made whole is its own only shard.

    python -m biofairseq.data_bin path DATA_BIN     the path to give fairseq-train
    python -m biofairseq.data_bin megabytes SHARD_MB
                                                    SHARD_MB checked and as a number (0: one data-bin), or one line
    python -m biofairseq.data_bin split FILE MB PATTERN
                                                    FILE (blank-line separated documents) into PATTERN with {} the
                                                    part's number, parts of at most MB megabytes (a longer document
                                                    is a part alone)
"""

from __future__ import annotations

import os
import re
import struct
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from biofairseq.text.documents import is_blank

if TYPE_CHECKING:
    import numpy as np


def shards(data_bin: str | Path) -> list[Path]:
    """The data-bin's shards in order: [DATA_BIN] for one made whole."""
    data_bin = Path(data_bin)
    if (data_bin / "dict.txt").is_file():
        return [data_bin]
    found = sorted((p for p in data_bin.glob("shard*") if p.name[5:].isdigit()), key=lambda p: int(p.name[5:]))
    if not found or not (found[0] / "dict.txt").is_file():
        raise FileNotFoundError(f"{data_bin}: no dict.txt and no shard0/dict.txt; binarize with preprocess/binarize.sh")
    return found


MEGABYTES = re.compile(r"[0-9]+(\.[0-9]+)?")
SMALLEST_SHARD_MB = 0.01


def shard_megabytes(value: str) -> float:
    """SHARD_MB as a number, checked once for the recipes (settings.py) and binarize.sh: 0 (in any spelling: 0.0,
    00) is one data-bin; a shard smaller than SMALLEST_SHARD_MB would cost a fairseq-preprocess per document."""
    if not MEGABYTES.fullmatch(value):
        raise ValueError(f"SHARD_MB={value}: give megabytes per shard as a plain decimal, as 512 or 0.5 (0: one data-bin)")
    megabytes = float(value)
    if 0 < megabytes < SMALLEST_SHARD_MB:
        raise ValueError(f"SHARD_MB={value}: shards must hold at least {SMALLEST_SHARD_MB} MB (0: one data-bin)")
    return megabytes


# fairseq's MMapIndexedDataset: the .idx starts with this magic, a version (<Q), a dtype code (<B) and the item count
# (<Q), then the items' sizes (int32); the .bin holds their tokens back to back. Read with numpy, without fairseq.
MMAP_MAGIC = b"MMIDIDX\x00\x00"
MMAP_DTYPES = {1: "u1", 2: "i1", 3: "<i2", 4: "<i4", 5: "<i8", 6: "<f8", 7: "<f8", 8: "<u2", 9: "<u4", 10: "<u8"}


def mmap_index(prefix: str | Path) -> tuple[str, int]:
    """(token dtype, item count) of the fairseq mmap split at prefix (prefix.idx)."""
    path = f"{prefix}.idx"
    with open(path, "rb") as f:
        header = f.read(26)
    if header[:9] != MMAP_MAGIC or len(header) < 26 or header[17] not in MMAP_DTYPES:
        raise ValueError(f"{path}: not a fairseq mmap index; binarize with preprocess/binarize.sh")
    return MMAP_DTYPES[header[17]], struct.unpack("<Q", header[18:26])[0]


def line_sizes(folder: str | Path, split: str) -> np.ndarray:
    """Each line's tokens (</s> included) of a binarized split, read from its fairseq mmap .idx."""
    import numpy as np

    prefix = Path(folder) / split
    _, count = mmap_index(prefix)
    return np.memmap(f"{prefix}.idx", np.int32, mode="r", offset=26, shape=(count,)) if count else np.zeros(0, np.int32)


def split_size(folder: str | Path, split: str) -> tuple[int, int]:
    """(lines, tokens) of a binarized split, read from its fairseq mmap .idx (the counts fairseq-preprocess logs as
    sents and tokens, </s> included): the same whichever binarizer made it."""
    sizes = line_sizes(folder, split)
    return len(sizes), int(sizes.sum(dtype="int64"))


def fairseq_path(data_bin: str | Path) -> str:
    return os.pathsep.join(str(p) for p in shards(data_bin))


def starts_new_part(part_bytes: int, document_bytes: int, max_bytes: float) -> bool:
    """Where a training text is cut into shards, the one rule of split_documents and of the binarizer's shard plan:
    before a document that would take a part already holding some text past max_bytes (0: never)."""
    return bool(max_bytes) and part_bytes > 0 and part_bytes + document_bytes > max_bytes


def split_documents(path: str | Path, max_bytes: float, pattern: str) -> list[str]:
    """Writes the documents of ``path`` (each ending in a blank line) to pattern.format(0), pattern.format(1), ... in
    order, starting a new part before a document that would take a part past ``max_bytes``; returns their paths.

    A blank line is ``biofairseq.text.documents.is_blank``'s (ASCII whitespace only, as the corpus readers): fairseq
    makes any such line a lone </s>, so a part never ends inside a document of the data-bin."""
    parts, out, size, doc = [], None, 0, []

    def write_document() -> None:
        nonlocal out, size
        text = b"".join(doc)
        if out is None or starts_new_part(size, len(text), max_bytes):
            if out is not None:
                out.close()
            parts.append(pattern.format(len(parts)))
            Path(parts[-1]).parent.mkdir(parents=True, exist_ok=True)
            out, size = open(parts[-1], "wb"), 0
        out.write(text)
        size += len(text)
        doc.clear()

    with open(path, "rb") as f:
        for line in f:
            doc.append(line)
            if is_blank(line):
                write_document()
    if doc:
        write_document()
    if out is not None:
        out.close()
    return parts


def main(argv: Optional[list[str]] = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["path"] and len(argv) == 2:
        try:
            print(fairseq_path(argv[1]))
        except FileNotFoundError as error:
            sys.exit(f"error: {error}")
    elif argv[:1] == ["megabytes"] and len(argv) == 2:
        try:
            print(argv[1] if shard_megabytes(argv[1]) else 0)
        except ValueError as error:
            sys.exit(f"error: {error}")
    elif argv[:1] == ["split"] and len(argv) == 4:
        print("\n".join(split_documents(argv[1], float(argv[2]) * (1 << 20), argv[3])))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
