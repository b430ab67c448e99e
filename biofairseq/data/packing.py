"""Several document blocks in one row, so that short documents no longer leave a row mostly empty.

Rows are filled best-fit decreasing (each block, longest first, goes to the row it leaves least room in). Every
block keeps its leading ``<s>``, which is where the model restarts positions and where attention stops
(``biofairseq.models.documents``); inside a row, blocks keep their corpus order. The task masks each block before it
packs them (``PackedBlocksDataset.of``), so a block is masked alike in a packed row and alone in a row: packed and
unpacked runs of one seed predict the same tokens, and their validation perplexities compare.
"""

import os
from collections.abc import Sequence

import numpy as np
import torch
from fairseq.data import BaseWrapperDataset, FairseqDataset

from biofairseq.data.index_cache import cached, key_of

# The version of pack(), part of the key of the packings saved beside a split (biofairseq.data.index_cache): bump it
# with any change to the rows pack() returns, or runs will go on reading the packing of the code before.
PACKING_VERSION = 1


def pack(sizes: Sequence[int] | np.ndarray, capacity: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of block indices whose sizes sum to at most capacity: (flat block order, row offsets)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    if len(sizes) and sizes.max() > capacity:
        raise ValueError(f"a block of {sizes.max()} tokens does not fit a row of {capacity}")
    rows, room = [], [[] for _ in range(capacity + 1)]  # room[r]: rows with r tokens left
    for block in np.argsort(-sizes, kind="stable"):
        size = int(sizes[block])
        left = next((r for r in range(size, capacity + 1) if room[r]), None)
        if left is None:  # no row has room: a new one
            row, left = len(rows), capacity
            rows.append([])
        else:
            row = room[left].pop()
        rows[row].append(block)
        if left - size:
            room[left - size].append(row)
    rows = sorted((sorted(row) for row in rows), key=lambda row: row[0])
    order = np.fromiter((b for row in rows for b in row), dtype=np.int64, count=len(sizes))
    offsets = np.cumsum([0] + [len(row) for row in rows])
    return order, offsets


class PackedBlocksDataset(BaseWrapperDataset):
    """Rows of whole blocks of ``dataset`` (each beginning with <s>), at most ``capacity`` tokens each; with
    ``index_path`` (the split's path), the packing is saved beside it once and memory-mapped after."""

    def __init__(self, dataset: FairseqDataset, capacity: int, index_path: str | os.PathLike[str] | None = None,
                 rows: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        super().__init__(dataset)
        block_sizes = np.asarray(dataset.sizes)
        self.capacity = capacity
        self.order, self.offsets = rows or cached(index_path, f"packed-{capacity}", key_of(block_sizes, PACKING_VERSION),
                                                  ("order", "offsets"), lambda: pack(block_sizes, capacity))
        self._sizes = np.add.reduceat(block_sizes[self.order], self.offsets[:-1]) if len(self.order) else block_sizes[:0]

    def of(self, blocks: FairseqDataset) -> "PackedBlocksDataset":
        """``blocks`` (these blocks, masked, or their targets) in the same rows."""
        if not np.array_equal(np.asarray(blocks.sizes), np.asarray(self.dataset.sizes)):
            raise ValueError("the blocks to lay out in these rows are not the blocks they were packed from")
        return PackedBlocksDataset(blocks, self.capacity, rows=(self.order, self.offsets))

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, index: int) -> torch.Tensor:
        blocks = self.order[self.offsets[index]:self.offsets[index + 1]]
        return torch.cat([self.dataset[int(b)] for b in blocks])

    @property
    def sizes(self) -> np.ndarray:
        return self._sizes

    def num_tokens(self, index: int) -> int:
        return int(self._sizes[index])

    def size(self, index: int) -> int:
        return int(self._sizes[index])

    @property
    def supports_prefetch(self) -> bool:
        return False


def segments(rows: Sequence[torch.Tensor], bos: int) -> dict[str, torch.Tensor | int]:
    """Where the documents of a right-padded batch of ``rows`` are, for variable-length attention.

    Each segment is a document (from an <s> to the next) or the padding at a row's end, in the order of the
    flattened B x T batch; counted here, on the host, so that the model needs no device-to-host copy to learn
    the count and the longest. A dict, the form fairseq's move_to_cuda carries: offsets (int64, segments + 1),
    shortest and longest (ints) and tokens (B x T).
    """
    width = max(len(row) for row in rows)
    starts = []
    for r, row in enumerate(rows):
        cuts = {0, *row.eq(bos).nonzero().view(-1).tolist()} | ({len(row)} if len(row) < width else set())
        starts.extend(r * width + cut for cut in sorted(cuts))
    offsets = torch.tensor([*starts, len(rows) * width], dtype=torch.int64)
    lengths = offsets.diff()
    return {"offsets": offsets, "shortest": int(lengths.min()), "longest": int(lengths.max()),
            "tokens": len(rows) * width}


class DocumentSegmentsDataset(BaseWrapperDataset):
    """The ``segments`` of each batch of ``dataset``'s rows, collated like fairseq's RightPadDataset collates them."""

    def __init__(self, dataset: FairseqDataset, bos: int) -> None:
        super().__init__(dataset)
        self.bos = bos

    def collater(self, samples: list[torch.Tensor]) -> dict[str, torch.Tensor | int]:
        return segments(samples, self.bos)
