"""What the document_mlm task makes of a sample corpus (``biofairseq.dev.samples``): its blocks and words, for the masking
and block tests."""

import numpy as np

from biofairseq.tasks.document_mlm import DocumentMLMConfig, DocumentMLMTask

# ---- looking at what the document_mlm task makes of a corpus

TOKENS_PER_SAMPLE = 128


def make_task(corpus, **overrides):
    settings = {"tokens_per_sample": TOKENS_PER_SAMPLE, "seed": 1, **overrides}
    cfg = DocumentMLMConfig(data=str(corpus.data_bin), **settings)
    return DocumentMLMTask.setup_task(cfg)


def document_streams(task, corpus, split="train"):
    """Each document as fairseq encodes it: every line's tokens followed by </s>."""
    d = task.source_dictionary
    return [
        np.concatenate([d.encode_line(" ".join(line.symbols), add_if_not_exist=False).numpy() for line in doc])
        for doc in corpus.documents[split]
    ]


def locate_blocks(blocks, docs):
    """(document, offset) of each block, checking that the blocks tile the documents in order."""
    where, d, offset = [], 0, 0
    for block in blocks:
        assert np.array_equal(block, docs[d][offset : offset + len(block)]), f"block at document {d}, offset {offset}"
        where.append((d, offset))
        offset += len(block)
        if offset == len(docs[d]):
            d, offset = d + 1, 0
    assert (d, offset) == (len(docs), 0), "tokens were dropped"
    return where


def unmasked_blocks(task, split="train"):
    """The samples without masking, their leading <s> checked and removed, in corpus order."""
    samples = task._load_blocks(split, epoch=1, combine=False)[0]
    assert all(samples[i][0] == task.source_dictionary.bos() for i in range(len(samples)))
    return [samples[i][1:].numpy() for i in range(len(samples))]


def document_words(corpus, split="train"):
    """Per document, a word label per token (</s> is a word of its own), aligned with document_streams."""
    labels = []
    for doc in corpus.documents[split]:
        labels.append([(n, w) for n, line in enumerate(doc) for w in [*line.words, "</s>"]])
    return labels
