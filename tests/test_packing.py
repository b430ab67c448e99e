"""--pack-documents: several document blocks per row, each computed as if alone in its row."""

import numpy as np
import pytest
import torch

from biofairseq.data.packing import pack
from conftest import TINY, build_in_process

PACKED = [*TINY[2:], "--total-num-update", "10", "--attention", "sdpa", "--pack-documents", "--dropout", "0", "--attention-dropout", "0"]


def test_best_fit_rows_hold_every_block_once_and_never_overflow():
    sizes = np.random.default_rng(0).integers(2, 129, 5000)
    order, offsets = pack(sizes, 128)
    assert sorted(order) == list(range(len(sizes)))
    rows = np.add.reduceat(sizes[order], offsets[:-1])
    assert rows.max() <= 128 and len(rows) < 1.02 * sizes.sum() / 128  # near the bound of full rows
    assert all((np.diff(order[a:b]) > 0).all() for a, b in zip(offsets[:-1], offsets[1:]))  # corpus order inside
    with pytest.raises(ValueError, match="does not fit"):
        pack([129], 128)


def test_a_document_in_a_packed_row_computes_what_it_computes_alone(bytebpe_corpus):
    task, model, _ = build_in_process(bytebpe_corpus.data_bin, *PACKED)
    rows = task.dataset("valid")
    bos, pad = task.source_dictionary.bos(), task.source_dictionary.pad()
    row = next(i for i in range(len(rows)) if int(rows[i]["net_input.src_tokens"].eq(bos).sum()) >= 2)
    tokens = rows[row]["net_input.src_tokens"]
    starts = [*tokens.eq(bos).nonzero().view(-1).tolist(), len(tokens)]
    padded = torch.cat([tokens, torch.full((5,), pad)]).unsqueeze(0)  # and padding after the last document
    model.eval()
    for mode in ("eval", "train"):  # train: without dropout, so that the two compare
        getattr(model, mode)()
        together = model(padded, features_only=True)[0][0]
        for a, b in zip(starts[:-1], starts[1:]):
            alone = model(tokens[a:b].unsqueeze(0), features_only=True)[0][0]
            torch.testing.assert_close(together[a:b], alone, rtol=1e-5, atol=1e-5)
    assert torch.isfinite(together).all()
    # the same weights, reading the row as one document (no packing): the second document's states change
    _, unpacked, _ = build_in_process(bytebpe_corpus.data_bin, *(f for f in PACKED if f != "--pack-documents"))
    unpacked.load_state_dict(model.state_dict())
    unpacked.eval()
    a, b = starts[1], starts[2]
    together, alone = (unpacked(t.unsqueeze(0), features_only=True)[0][0] for t in (tokens, tokens[a:b]))
    assert (together[a:b] - alone).abs().max() > 0.1


def test_packing_needs_sdpa_attention(bytebpe_corpus):
    with pytest.raises(ValueError, match="--attention sdpa"):
        build_in_process(bytebpe_corpus.data_bin, *TINY[2:], "--total-num-update", "10", "--pack-documents")
    # training with it (and its padding, packed or not): tests/test_pretrain_speed.py
