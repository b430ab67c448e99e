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


STREAMS = {}  # data-bin -> its documents' tokens and word labels: the same for every task on it


def where_and_labels(task, corpus, blocks):
    """(document, offset) of each block, and each document's word label per token."""
    key = str(corpus.data_bin)
    if key not in STREAMS:
        STREAMS[key] = document_streams(task, corpus), document_words(corpus)
    streams, labels = STREAMS[key]
    return locate_blocks(blocks, streams), labels


def partly_masked_words(task, corpus, samples, blocks):
    """Words of which some pieces are predicted and others not, counted per sample."""
    where, labels = where_and_labels(task, corpus, blocks)
    pad, partly, words = task.source_dictionary.pad(), 0, 0
    for (_, target), (d, offset) in zip(samples, where):
        masked_by_word = {}
        for label, masked in zip(labels[d][offset : offset + len(target)], target != pad):
            masked_by_word.setdefault(label, set()).add(bool(masked))
        partly += sum(len(flags) == 2 for flags in masked_by_word.values())
        words += len(masked_by_word)
    return partly, words


def full_samples(task, split="train"):
    """(original, input, target) of every sample, position 0 (<s>) included."""
    originals = task._load_blocks(split, epoch=1, combine=False)[0]
    dataset = task.dataset(split)
    return [
        (originals[i].numpy(), item["net_input.src_tokens"].numpy(), item["target"].numpy())
        for i, item in enumerate(dataset[i] for i in range(len(dataset)))
    ]


@pytest.fixture(scope="module")
def masked(bytebpe_corpus):
    """(task, full_samples at epoch 1) of the default masking, masked once for the tests that read it."""
    task = make_task(bytebpe_corpus)
    task.load_dataset("train")
    return task, full_samples(task)


@pytest.mark.fast
def test_subword_masking_rates(bytebpe_corpus, masked):
    task, full = masked
    d = task.source_dictionary
    assert all(original[0] == d.bos() for original, _, _ in full)
    samples = [(inputs[1:], target[1:]) for _, inputs, target in full]
    blocks = [original[1:] for original, _, _ in full]  # unmasked, without <s>
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


@pytest.mark.fast
def test_a_new_mask_each_epoch(masked):
    task, full = masked
    first = [target[1:] for _, _, target in full]
    dataset = task.dataset("train")
    assert all(np.array_equal(a, b[1]) for a, b in zip(first, masked_samples(task))), "same epoch, same mask"
    dataset.set_epoch(2)
    try:
        second = masked_samples(task)
    finally:
        dataset.set_epoch(1)  # as the other tests read it
    changed = sum(not np.array_equal(a, b[1]) for a, b in zip(first, second))
    assert changed > 0.95 * len(first)


def test_whole_word_masking_masks_every_piece_of_a_word(bytebpe_corpus):
    """Byte-level BPE (SentencePiece: test_whole_words_with_sentencepiece_digit_pieces)."""
    # the vocabulary comes from the data-bin's vocab_info.json (byte-level BPE data holds ids)
    task = make_task(bytebpe_corpus, mask_whole_words=True)
    task.load_dataset("train")
    samples = masked_samples(task)
    partly, words = partly_masked_words(task, bytebpe_corpus, samples, unmasked_blocks(task))
    assert words > 10_000
    assert partly == 0
    predicted = np.concatenate([t != task.source_dictionary.pad() for _, t in samples])
    assert predicted.mean() == pytest.approx(0.15, abs=0.02)


@pytest.mark.fast
def test_whole_words_of_bpe_ids_need_the_vocabulary(bytebpe_corpus, tmp_path):
    # a data-bin made by hand (no vocab_info.json) holding BPE ids
    shutil.copy(bytebpe_corpus.data_bin / "dict.txt", tmp_path / "dict.txt")
    bare = dataclasses.replace(bytebpe_corpus, data_bin=tmp_path)
    with pytest.raises(ValueError, match=r"dict.txt holds BPE ids, not pieces: pass --whole-word-vocab"):
        make_task(bare, mask_whole_words=True, vocab_type="bytebpe")
    task = make_task(bare, mask_whole_words=True, whole_word_vocab=str(bytebpe_corpus.vocab_file))
    assert task._word_starts is not None


@pytest.mark.fast
def test_special_symbols_are_never_selected_nor_drawn(bytebpe_corpus, masked):
    task, full = masked
    d = task.source_dictionary
    special = np.array([i < d.nspecial or d[i] == "<mask>" for i in range(len(d))])
    original, inputs, target = map(np.concatenate, zip(*full))
    assert special[original].sum() > 1000  # every sample starts with <s>, every line ends with </s>
    selected = target != d.pad()
    assert not selected[special[original]].any(), "a special symbol was chosen for prediction"
    assert np.array_equal(inputs[special[original]], original[special[original]])
    assert selected[~special[original]].mean() == pytest.approx(0.15, abs=0.005)  # the rate is over real tokens
    drawn = selected & (inputs != original) & (inputs != task.mask_idx)
    assert drawn.sum() > 500 and not special[inputs[drawn]].any(), "a random replacement drew a special symbol"
    # --mask-special-tokens gives stock fairseq's masking back, position 0 included
    stock = make_task(bytebpe_corpus, mask_special_tokens=True)
    stock.load_dataset("train")
    samples = full_samples(stock)
    assert sum(t[0] != d.pad() for _, _, t in samples) > 0
    original, _, target = map(np.concatenate, zip(*samples))
    assert (target[special[original]] != d.pad()).mean() == pytest.approx(0.15, abs=0.02)


@pytest.mark.fast
def test_frequency_weighted_replacement_draws_frequent_tokens(bytebpe_corpus, tmp_path):
    task = make_task(bytebpe_corpus, freq_weighted_replacement=True)
    d = task.source_dictionary
    counts = np.array(d.count, dtype=float)
    counts[: d.nspecial] = 0  # dict.txt holds the training counts; fairseq's own specials have none
    frequent = np.argsort(-counts)[:50]
    expected = counts[frequent].sum() / counts.sum()
    task.load_dataset("train")
    original, inputs, target = map(np.concatenate, zip(*full_samples(task)))
    drawn = inputs[(target != d.pad()) & (inputs != original) & (inputs != task.mask_idx)]
    share = np.isin(drawn, frequent).mean()
    # drawn as often as they occur (uniform draws would give 50 / len(d), about 2.5%)
    assert expected > 0.2 and share == pytest.approx(expected, abs=0.05), (share, expected)
    # a data-bin whose dict.txt has no counts (all 1) refuses the flag instead of drawing uniformly
    for name in ("train.bin", "train.idx", "vocab_info.json", "vocab.json", "merges.txt"):
        shutil.copy(bytebpe_corpus.data_bin / name, tmp_path / name)
    from biofairseq.corpus.vocab import read_dict, write_dict

    write_dict(tmp_path / "dict.txt", read_dict(bytebpe_corpus.data_bin / "dict.txt")[0])  # every count 1
    bare = dataclasses.replace(bytebpe_corpus, data_bin=tmp_path)
    with pytest.raises(ValueError, match=r"--freq-weighted-replacement: .*dict.txt holds no token counts"):
        make_task(bare, freq_weighted_replacement=True)


def test_whole_words_with_sentencepiece_digit_pieces(spm_corpus):
    """Whole-word masking on a SentencePiece data-bin, whose dict.txt holds pieces: "500" is a piece, not the id 500."""
    corpus = spm_corpus
    task = make_task(corpus, mask_whole_words=True)
    d = task.source_dictionary
    assert len([s for s in d.symbols if s.isdigit()]) > 30
    task.load_dataset("train")
    samples = masked_samples(task)
    blocks = unmasked_blocks(task)
    partly, words = partly_masked_words(task, corpus, samples, blocks)
    assert words > 10_000 and partly == 0
    predicted = np.concatenate([t != d.pad() for _, t in samples])
    assert predicted.mean() == pytest.approx(0.15, abs=0.02)
    # words with digit pieces were masked, each whole
    where, labels = where_and_labels(task, corpus, blocks)
    masked_numbers = set()
    for (_, target), block, (doc, offset) in zip(samples, blocks, where):
        for token, label, selected in zip(block, labels[doc][offset:], target != d.pad()):
            if selected and d[token].isdigit():
                masked_numbers.add((doc, label))
    assert len(masked_numbers) > 20


def test_a_digit_piece_beyond_the_vocabulary_is_a_piece(spm_corpus, tmp_path):
    from fairseq.data import Dictionary

    from biofairseq.data import word_starts

    d = Dictionary()
    for piece in ["\u2581El", "\u258112", "99999", "500", "\u2581mg"]:
        d.add_symbol(piece)
    starts = word_starts(d, "sentencepiece", str(spm_corpus.vocab_file)).starts
    assert [bool(starts[d.index(p)]) for p in ["\u2581El", "\u258112", "99999", "500", "\u2581mg"]] == [True, True, False, False, True]
