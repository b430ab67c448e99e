"""Samples stay inside one document, and every token of the corpus is in exactly one sample."""

import os

import numpy as np
import pytest
from fairseq.data import TokenBlockDataset, data_utils

from biofairseq.tasks.document_mlm import DocumentMLMConfig, DocumentMLMTask
from corpus import TOKENS_PER_SAMPLE, document_streams, locate_blocks, make_task, unmasked_blocks

pytestmark = pytest.mark.fast  # make test-fast


@pytest.fixture(scope="module")
def documents(bytebpe_corpus):
    """Each training document as fairseq encodes it, whatever the sample break mode."""
    return document_streams(make_task(bytebpe_corpus), bytebpe_corpus)


@pytest.mark.parametrize("mode", ["complete_doc", "doc"])
def test_blocks_cover_every_token_once_and_never_cross_a_document(bytebpe_corpus, documents, mode):
    task = make_task(bytebpe_corpus, sample_break_mode=mode)
    docs = documents
    longest_line = max(len(line.symbols) + 1 for doc in bytebpe_corpus.documents["train"] for line in doc)
    assert longest_line > TOKENS_PER_SAMPLE, "the corpus must have lines longer than a sample"

    blocks = unmasked_blocks(task)  # each sample starts with <s>
    assert max(map(len, blocks)) <= TOKENS_PER_SAMPLE - 1
    where = locate_blocks(blocks, docs)  # no block crosses a document, none is lost
    if mode == "doc":  # full blocks, except for each document's last one
        last = [i + 1 == len(where) or where[i + 1][0] != d for i, (d, _) in enumerate(where)]
        assert all(len(b) == TOKENS_PER_SAMPLE - 1 for b, is_last in zip(blocks, last) if not is_last)


@pytest.mark.parametrize("mode", ["complete_doc", "doc"])
def test_the_block_index_and_packing_are_built_once_then_memory_mapped(bytebpe_corpus, mode, tmp_path, caplog):
    from biofairseq.data import DocumentBlockDataset, PackedBlocksDataset

    task = make_task(bytebpe_corpus)
    lines = data_utils.load_indexed_dataset(os.path.join(bytebpe_corpus.data_bin, "train"), task.source_dictionary)
    split_path = tmp_path / "train"  # where the index goes: beside the split
    made = []
    for index_path in (None, split_path, split_path):  # in memory, then built and saved, then read
        with caplog.at_level("INFO", logger="biofairseq.data.index_cache"):
            blocks = DocumentBlockDataset(lines, lines.sizes, 127, pad=1, eos=2, break_mode=mode, index_path=index_path)
            rows = PackedBlocksDataset(blocks, 128, index_path=index_path)
        made.append((blocks, rows))
    messages = [r.getMessage().split(" index ")[0] for r in caplog.records]
    assert messages == [f"built the blocks-{mode}-127", "built the packed-128",
                        f"memory-mapped the blocks-{mode}-127", "memory-mapped the packed-128"]
    assert isinstance(made[2][1].order, np.memmap)
    for blocks, rows in made[1:]:  # the same blocks and rows as built in memory
        assert [blocks[i].tolist() for i in range(len(blocks))] == [made[0][0][i].tolist() for i in range(len(blocks))]
        assert rows.order.tolist() == made[0][1].order.tolist() and rows.offsets.tolist() == made[0][1].offsets.tolist()
    other = DocumentBlockDataset(lines, lines.sizes, 63, pad=1, eos=2, break_mode=mode, index_path=split_path)
    assert len(other) > len(made[0][0])  # another block size: another index, not the saved one
    assert len(list((tmp_path / "train.index").glob("blocks-*"))) == 2


def test_stock_complete_doc_keeps_long_lines_whole(bytebpe_corpus):
    """Why the task exists: fairseq's complete_doc makes samples longer than the model accepts."""
    task = make_task(bytebpe_corpus)
    lines = data_utils.load_indexed_dataset(os.path.join(bytebpe_corpus.data_bin, "train"), task.source_dictionary)
    stock = TokenBlockDataset(lines, lines.sizes, TOKENS_PER_SAMPLE - 1, pad=1, eos=2, break_mode="complete_doc")
    assert stock.sizes.max() > TOKENS_PER_SAMPLE - 1
    task.load_dataset("train")
    assert np.max(task.dataset("train").sizes) <= TOKENS_PER_SAMPLE


def test_too_small_a_sample_is_refused(bytebpe_corpus):
    task = make_task(bytebpe_corpus, tokens_per_sample=4)
    with pytest.raises(ValueError, match="--tokens-per-sample must be at least"):
        task.load_dataset("train")


def test_missing_data_names_the_file(tmp_path, bytebpe_corpus):
    with pytest.raises(FileNotFoundError, match=r"dict.txt: no dictionary"):
        DocumentMLMTask.setup_task(DocumentMLMConfig(data=str(tmp_path), seed=1))
    task = make_task(bytebpe_corpus)
    with pytest.raises(FileNotFoundError, match=r"test.bin: no such dataset"):
        task.load_dataset("test")


def test_inherited_flags_that_would_be_ignored_are_refused(bytebpe_corpus):
    with pytest.raises(ValueError, match="--shorten-method: document_mlm never truncates"):
        make_task(bytebpe_corpus, shorten_method="truncate")
