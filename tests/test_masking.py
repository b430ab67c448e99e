"""Masking on real encoded text: the rates asked for, a new mask each epoch, and whole words."""

import dataclasses
import shutil

import numpy as np
import pytest

from corpus import document_streams, document_words, locate_blocks, make_task, unmasked_blocks


def masked_samples(task, split="train"):
    """(input, target) of every sample without its <s>, in corpus order; target is pad where unmasked."""
    dataset = task.dataset(split)
    return [
        (item["net_input.src_tokens"][1:].numpy(), item["target"][1:].numpy())
        for item in (dataset[i] for i in range(len(dataset)))
    ]


def partly_masked_words(task, corpus, samples, blocks):
    """Words of which some pieces are predicted and others not, counted per sample."""
    where = locate_blocks(blocks, document_streams(task, corpus))
    labels = document_words(corpus)
    pad, partly, words = task.source_dictionary.pad(), 0, 0
    for (_, target), (d, offset) in zip(samples, where):
        masked_by_word = {}
        for label, masked in zip(labels[d][offset : offset + len(target)], target != pad):
            masked_by_word.setdefault(label, set()).add(bool(masked))
        partly += sum(len(flags) == 2 for flags in masked_by_word.values())
        words += len(masked_by_word)
    return partly, words


def test_subword_masking_rates(bytebpe_corpus):
    task = make_task(bytebpe_corpus)
    task.load_dataset("train")
    d = task.source_dictionary
    samples = masked_samples(task)
    blocks = unmasked_blocks(task)
    tokens = sum(len(t) for _, t in samples)
    predicted = np.concatenate([t != d.pad() for _, t in samples])
    inputs = np.concatenate([s for s, _ in samples])[predicted]
    originals = np.concatenate(blocks)[predicted]
    assert tokens > 50_000
    assert predicted.mean() == pytest.approx(0.15, abs=0.01)
    assert (inputs == task.mask_idx).mean() == pytest.approx(0.8, abs=0.02)
    assert (inputs == originals).mean() == pytest.approx(0.1, abs=0.02)
    assert ((inputs != originals) & (inputs != task.mask_idx)).mean() == pytest.approx(0.1, abs=0.02)
    # subword masking cuts words: the whole-word check below would catch it
    partly, words = partly_masked_words(task, bytebpe_corpus, samples, blocks)
    assert partly > 0.01 * words


def test_a_new_mask_each_epoch(bytebpe_corpus):
    task = make_task(bytebpe_corpus)
    task.load_dataset("train")
    first = masked_samples(task)
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(first, masked_samples(task))), "same epoch, same mask"
    task.dataset("train").set_epoch(2)
    second = masked_samples(task)
    changed = sum(not np.array_equal(a[1], b[1]) for a, b in zip(first, second))
    assert changed > 0.95 * len(first)


@pytest.mark.parametrize("vocab", ["bytebpe", "sentencepiece"])
def test_whole_word_masking_masks_every_piece_of_a_word(vocab, bytebpe_corpus, spm_corpus):
    corpus = bytebpe_corpus if vocab == "bytebpe" else spm_corpus
    # the vocabulary comes from the data-bin's vocab_info.json (byte-level BPE data holds ids)
    task = make_task(corpus, mask_whole_words=True)
    task.load_dataset("train")
    samples = masked_samples(task)
    partly, words = partly_masked_words(task, corpus, samples, unmasked_blocks(task))
    assert words > 10_000
    assert partly == 0
    predicted = np.concatenate([t != task.source_dictionary.pad() for _, t in samples])
    assert predicted.mean() == pytest.approx(0.15, abs=0.02)


def test_whole_words_of_bpe_ids_need_the_vocabulary(bytebpe_corpus, tmp_path):
    # a data-bin made by hand (no vocab_info.json) holding BPE ids
    shutil.copy(bytebpe_corpus.data_bin / "dict.txt", tmp_path / "dict.txt")
    bare = dataclasses.replace(bytebpe_corpus, data_bin=tmp_path)
    with pytest.raises(ValueError, match=r"dict.txt holds BPE ids, not pieces: pass --whole-word-vocab"):
        make_task(bare, mask_whole_words=True, vocab_type="bytebpe")
    task = make_task(bare, mask_whole_words=True, whole_word_vocab=str(bytebpe_corpus.vocab_file))
    assert task._word_starts is not None
