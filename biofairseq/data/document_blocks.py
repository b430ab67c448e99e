"""Blocks of tokens that never cross a document boundary and never drop a token."""

import fairseq
import numpy as np
from fairseq.data import TokenBlockDataset
from fairseq.data.indexed_dataset import best_fitting_int_dtype
from fairseq.data.token_block_utils_fast import (
    _get_block_to_dataset_index_fast,
    _get_slice_indices_fast,
)

from biofairseq.data.index_cache import cached, key_of

BREAK_MODES = ("complete_doc", "doc")
# A blank line of fairseq-lm text is binarized as a lone </s>: that is the document separator.
DOCUMENT_SEPARATOR_SIZE = 1
# Below this, cutting a long line could leave a 1-token piece, which would read as a separator.
MIN_BLOCK_SIZE = 4


class DocumentBlockDataset(TokenBlockDataset):
    """TokenBlockDataset whose blocks stay inside one document.

    ``complete_doc`` packs whole lines of a document into blocks (RoBERTa's DOC-SENTENCES); a line
    longer than the block is first cut into near-equal consecutive pieces, where fairseq's own
    ``complete_doc`` would keep it whole and training would stop with "Size of sample is invalid".
    ``doc`` cuts each document's token stream into full blocks, ignoring line ends: the densest
    packing that still never crosses a document. Every token except the separators is in exactly
    one block, in corpus order.
    """

    def __init__(self, dataset, sizes, block_size, pad, eos, break_mode="complete_doc", index_path=None) -> None:
        """index_path: the split's path, beside which the block index is saved once and memory-mapped after
        (``biofairseq.data.index_cache``); None: built in memory."""
        if break_mode not in BREAK_MODES:
            raise ValueError(f"sample break mode {break_mode!r}: choose one of {', '.join(BREAK_MODES)}")
        if block_size < MIN_BLOCK_SIZE:
            raise ValueError(f"block size {block_size}: --tokens-per-sample must be at least {MIN_BLOCK_SIZE + 1}")
        self._index_path = index_path
        super().__init__(
            dataset, sizes, block_size, pad, eos,
            break_mode=break_mode, document_sep_len=DOCUMENT_SEPARATOR_SIZE,
        )

    def _build_slice_indices(self, sizes, break_mode, document_sep_len, block_size):
        sizes = np.asarray(sizes, dtype=np.int64)
        return cached(self._index_path, f"blocks-{break_mode}-{block_size}",
                      key_of(sizes, document_sep_len, BLOCKS_VERSION, fairseq.__version__),
                      ("block_sizes", "block_to_dataset_index", "slice_indices"),
                      lambda: _slice_indices(sizes, break_mode, document_sep_len, block_size))


# The version of _slice_indices() and of the functions it calls, part of the key of the block indexes saved beside a
# split (biofairseq.data.index_cache), with fairseq's version for the functions of fairseq it calls: bump it with any
# change to the blocks they return, or runs will go on reading the blocks of the code before.
BLOCKS_VERSION = 1


def _slice_indices(sizes, break_mode, document_sep_len, block_size):
    """TokenBlockDataset's three arrays: each block's size, its (first line, offset, last line), its token range."""
    if break_mode == "complete_doc":
        slice_indices = _get_slice_indices_fast(_cut_long_lines(sizes, block_size), "complete_doc", block_size,
                                                document_sep_len)
    else:
        slice_indices = _document_blocks(sizes, block_size, document_sep_len)
    block_to_dataset_index = _get_block_to_dataset_index_fast(sizes, slice_indices)
    index_dtype = best_fitting_int_dtype(slice_indices[-1].max())
    block_sizes = (slice_indices[:, 1] - slice_indices[:, 0]).astype(np.uint16 if block_size < 65535 else np.uint32)
    return block_sizes, block_to_dataset_index.astype(index_dtype), slice_indices.astype(index_dtype)


def _cut_long_lines(sizes, block_size):
    """Sizes of the pieces left after cutting each line into ceil(size / block) near-equal parts."""
    parts = np.maximum(1, -(-sizes // block_size))
    line = np.repeat(np.arange(len(sizes)), parts)
    part = np.arange(len(line)) - np.repeat(np.cumsum(parts) - parts, parts)
    return sizes[line] // parts[line] + (part < sizes[line] % parts[line])


def _document_blocks(sizes, block_size, separator_size):
    """[start, end) token ranges cutting each document's stream into blocks of block_size."""
    ends = np.cumsum(sizes)
    starts = ends - sizes
    is_separator = sizes == separator_size
    document = np.cumsum(is_separator)[~is_separator]
    first = np.flatnonzero(np.r_[True, document[1:] != document[:-1]])
    last = np.r_[first[1:], len(document)] - 1
    text_starts, text_ends = starts[~is_separator], ends[~is_separator]
    doc_start, doc_end = text_starts[first], text_ends[last]
    blocks = -(-(doc_end - doc_start) // block_size)
    block_start = np.repeat(doc_start, blocks) + block_size * (
        np.arange(blocks.sum()) - np.repeat(np.cumsum(blocks) - blocks, blocks)
    )
    block_end = np.minimum(block_start + block_size, np.repeat(doc_end, blocks))
    return np.stack([block_start, block_end], axis=1).astype(np.int64)
