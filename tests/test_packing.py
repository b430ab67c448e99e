"""--pack-documents: several document blocks per row, each computed as if alone in its row."""

import copy

import numpy as np
import pytest
import torch

from biofairseq.data.packing import pack
from biofairseq.models import attention as attention_module
from biofairseq.models import documents
from biofairseq.models.attention import SdpaSelfAttention
from biofairseq.dev.samples import build_in_process, valid_batch
from conftest import TINY
from test_fast_path import ELECTRA, NO_DROPOUT, dropout_statistics, features

pytestmark = pytest.mark.fast  # make test-fast

PACKED = [*TINY[2:], "--total-num-update", "10", "--attention", "sdpa", "--pack-documents", *NO_DROPOUT]
ELECTRA_PACKED = [*ELECTRA, "--attention", "sdpa", "--pack-documents", *NO_DROPOUT]
MODELS = pytest.mark.parametrize("flags", [PACKED, ELECTRA_PACKED], ids=["roberta", "electra"])


def test_best_fit_rows_hold_every_block_once_and_never_overflow():
    sizes = np.random.default_rng(0).integers(2, 129, 5000)
    order, offsets = pack(sizes, 128)
    assert sorted(order) == list(range(len(sizes)))
    rows = np.add.reduceat(sizes[order], offsets[:-1])
    assert rows.max() <= 128 and len(rows) < 1.02 * sizes.sum() / 128  # near the bound of full rows
    assert all((np.diff(order[a:b]) > 0).all() for a, b in zip(offsets[:-1], offsets[1:]))  # corpus order inside
    with pytest.raises(ValueError, match="does not fit"):
        pack([129], 128)


@MODELS
def test_a_document_in_a_packed_row_computes_what_it_computes_alone(bytebpe_corpus, flags):
    task, model, _ = build_in_process(bytebpe_corpus.data_bin, *flags)
    rows = task.dataset("valid")
    bos, pad = task.source_dictionary.bos(), task.source_dictionary.pad()
    row = next(i for i in range(len(rows)) if int(rows[i]["net_input.src_tokens"].eq(bos).sum()) >= 2)
    tokens = rows[row]["net_input.src_tokens"]
    starts = [*tokens.eq(bos).nonzero().view(-1).tolist(), len(tokens)]
    padded = torch.cat([tokens, torch.full((5,), pad)]).unsqueeze(0)  # and padding after the last document
    for mode in ("eval", "train"):  # train: without dropout, so that the two compare
        getattr(model, mode)()
        together = features(model, padded)[0]
        for a, b in zip(starts[:-1], starts[1:]):
            alone = features(model, tokens[a:b].unsqueeze(0))[0]
            torch.testing.assert_close(together[a:b], alone, rtol=1e-5, atol=1e-5)
    assert torch.isfinite(together).all()
    # a copy (fairseq's --store-ema keeps one) tells its own attentions where the documents are, not the original's
    torch.testing.assert_close(features(copy.deepcopy(model), padded)[0], together)
    # the same weights, reading the row as one document (no packing): the second document's states change
    _, unpacked, _ = build_in_process(bytebpe_corpus.data_bin, *(f for f in flags if f != "--pack-documents"))
    unpacked.load_state_dict(model.state_dict())
    unpacked.eval()
    a, b = starts[1], starts[2]
    together, alone = (features(unpacked, t.unsqueeze(0))[0] for t in (tokens, tokens[a:b]))
    assert (together[a:b] - alone).abs().max() > 0.1


@MODELS
def test_segments_from_the_collater_give_the_dense_masks_result_and_gradients(bytebpe_corpus, monkeypatch, flags):
    """The variable-length path (CUDA's; forced here on CPU) against the dense document mask."""
    task, model, criterion = build_in_process(bytebpe_corpus.data_bin, *flags)
    batch = valid_batch(task, size=4)
    net_input = batch["net_input"]
    lengths = net_input["segments"]["offsets"].diff()
    assert len(lengths) > len(net_input["src_tokens"]) and lengths.sum() == net_input["src_tokens"].numel()
    jagged_calls = []  # which path the attentions took
    over_segments = attention_module.over_segments
    monkeypatch.setattr(attention_module, "over_segments", lambda *a: jagged_calls.append(1) or over_segments(*a))
    model.train()  # without dropout, so that the two compare
    results = []
    for varlen in ((), ("cpu",)):
        monkeypatch.setattr(documents, "VARLEN_DEVICES", varlen)
        model.zero_grad()
        torch.manual_seed(0)  # ELECTRA's generator draws its samples
        jagged_calls.clear()
        loss, _, _ = criterion(model, batch)
        loss.backward()
        assert bool(jagged_calls) == bool(varlen)
        results.append((loss.detach(), [p.grad for p in model.parameters()]))
    (dense, dense_grads), (jagged, jagged_grads) = results
    torch.testing.assert_close(jagged, dense, rtol=1e-5, atol=1e-5)
    for a, b in zip(jagged_grads, dense_grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_packing_needs_sdpa_attention(bytebpe_corpus):
    with pytest.raises(ValueError, match="--attention sdpa"):
        build_in_process(bytebpe_corpus.data_bin, *TINY[2:], "--total-num-update", "10", "--pack-documents")
    # training with it (and its padding, packed or not): tests/test_pretrain_speed.py


def test_the_variable_length_path_drops_attention_as_the_dense_mask_does(bytebpe_corpus):
    """Attention dropout 0.3 on packed rows: the jagged tensors (CUDA's path, run here on CPU) and the dense document
    mask, each unbiased, spread alike over the documents' tokens."""
    task, model, _ = build_in_process(bytebpe_corpus.data_bin, *TINY[2:], "--total-num-update", "10", "--attention", "sdpa",
                                      "--pack-documents", "--dropout", "0", "--attention-dropout", "0.3")
    bos, pad = task.source_dictionary.bos(), task.source_dictionary.pad()
    rows = task.dataset("valid")
    first = next(i for i in range(len(rows)) if int(rows[i]["net_input.src_tokens"].eq(bos).sum()) >= 2)
    net_input = valid_batch(task, first, 3)["net_input"]  # with padding after some rows' documents
    tokens, segments = net_input["src_tokens"], net_input["segments"]
    assert tokens.eq(bos).sum() >= 4 and tokens.eq(pad).any()
    attention = next(m for m in model.modules() if isinstance(m, SdpaSelfAttention))
    torch.manual_seed(1)
    x = torch.randn(tokens.shape[1], tokens.shape[0], 128)
    real = tokens.ne(pad).t()
    results = []
    for where in (documents.document_mask(tokens, bos, pad), segments):  # as the encoder hands them down
        results.append(dropout_statistics(attention, x, real, documents=where))
    (dense_variance, dense_bias), (jagged_variance, jagged_bias) = results
    assert dense_variance > 0 and jagged_variance == pytest.approx(dense_variance, rel=0.1)
    assert 0.5 < dense_bias < 2 and 0.5 < jagged_bias < 2


def whole_split(task, criterion, model, split="valid"):
    """The masked tokens (block, position, target: each block's from its <s>), the summed loss, the predicted-token
    count and the gradient of the summed loss over every row of ``split``, in batches of 8 rows."""
    dataset, bos, pad = task.dataset(split), task.source_dictionary.bos(), task.source_dictionary.pad()
    masked, loss, count = set(), 0.0, 0
    model.zero_grad()
    for start in range(0, len(dataset), 8):
        batch = dataset.collater([dataset[i] for i in range(start, min(start + 8, len(dataset)))])
        src, target = batch["net_input"]["src_tokens"], batch["target"]
        original = torch.where(target.ne(pad), target, src)
        for r, tokens in enumerate(src):  # each block named by its unmasked tokens
            starts = [*tokens.eq(bos).nonzero().view(-1).tolist(), int(tokens.ne(pad).sum())]
            for a, b in zip(starts[:-1], starts[1:]):
                block = tuple(original[r, a:b].tolist())
                masked |= {(block, i, int(target[r, a + i])) for i in target[r, a:b].ne(pad).nonzero().view(-1).tolist()}
        batch_loss, sample_size, _ = criterion(model, batch)
        batch_loss.backward()
        loss, count = loss + batch_loss.item(), count + sample_size
    return masked, loss, count, {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_packed_and_plain_rows_mask_the_same_tokens_and_give_the_same_loss_and_gradient(bytebpe_corpus):
    """The whole validation split through the packed and the plain path, the same weights, no dropout: each block is
    masked alike whatever row it is in (its masking is seeded by the block, not the row), so both paths predict the
    same tokens, the summed loss and its gradient agree to float error, and the loss is divided by the same count.
    Masked by row, the two paths' validation perplexities were two samples of the masking, a few % apart."""
    plain_flags = [f for f in PACKED if f != "--pack-documents"]
    found = []
    for flags in (PACKED, plain_flags):
        task, model, criterion = build_in_process(bytebpe_corpus.data_bin, *flags)
        if found:
            model.load_state_dict(found[0][-1])
        model.train()  # fairseq's training forward (dropout is off)
        found.append((*whole_split(task, criterion, model), model.state_dict()))
    (masked, loss, count, grads, _), (plain_masked, plain_loss, plain_count, plain_grads, _) = found
    assert masked == plain_masked and count == len(masked) > 100
    assert loss == pytest.approx(plain_loss, rel=1e-5)
    scale = max(float(grad.abs().max()) for grad in plain_grads.values())  # some are 0 but for rounding (keys' biases)
    for name, grad in plain_grads.items():
        torch.testing.assert_close(grads[name], grad, rtol=1e-4, atol=1e-5 * scale, msg=lambda m: f"{name}: {m}")
