"""Rows of several documents (``--pack-documents``), each computed as if alone in its row.

Every document block begins with ``<s>``. A packed model restarts the learned positions at each ``<s>`` and keeps
attention inside the span from one ``<s>`` to the next, so a row holding documents A and B computes for A exactly
what a row holding A alone computes (tested). On rows of one document both are what fairseq computes.

A packed encoder finds the documents once per forward (``documents``) and hands them to every layer as an argument:
a dense boolean mask computed from the tokens, through which SDPA computes every pair of a row's tokens and discards
the cross-document ones. The collater also gives each batch its ``segments`` (``biofairseq.data.packing``: offsets
counted on the host, so nothing synchronises), with which attention can run over variable-length sequences instead
(torch's jagged tensors, which reach the flash kernel, dropout included) on the devices of ``VARLEN_DEVICES``. Both
give the same result (tested). That list is empty: on an H200 (bf16, 12 x 768, rows of 512 tokens; run by
``benchmarks/packed_attention.py``) one attention's forward and backward took 9.6 ms through the jagged tensors
against 1.1 ms through the dense mask, and a packed training step 173 against 59 ms (profiled, the jagged step kept
the host busy several times as long as the GPU); on a CPU the jagged path is an order of magnitude slower too.
"""

import torch
import torch.nn.functional as F
from fairseq.modules import LearnedPositionalEmbedding
from fairseq.tasks import FairseqTask

VARLEN_DEVICES = ()  # where segments go to the variable-length kernels: none (see above)


def packed_bos(task: FairseqTask) -> int | None:
    """``<s>``, where each document starts, when ``task`` packs rows of several documents (its --pack-documents);
    None when it does not: what a model needs to know, at build time, to be built for packed rows."""
    packing = getattr(getattr(task, "cfg", None), "pack_documents", False)
    return task.source_dictionary.bos() if packing else None


def document_positions(tokens: torch.Tensor, bos: int, pad: int) -> torch.Tensor:
    """fairseq's learned-position indices (padding_idx + 1 onwards, padding_idx at padding), counted from the last <s>."""
    index = torch.arange(tokens.size(1), device=tokens.device).expand_as(tokens)
    start = torch.where(tokens.eq(bos), index, torch.zeros_like(index)).cummax(dim=1).values
    return torch.where(tokens.eq(pad), pad, index - start + pad + 1)


def document_mask(tokens: torch.Tensor, bos: int, pad: int) -> torch.Tensor:
    """B x 1 x T x T: True where query and key are in the same document (the same count of <s> up to them) and the
    key is not padding."""
    ids = tokens.eq(bos).cumsum(dim=1)
    return (ids.unsqueeze(2) == ids.unsqueeze(1)).logical_and_(tokens.ne(pad).unsqueeze(1)).unsqueeze(1)


def documents(tokens: torch.Tensor, segments: dict[str, torch.Tensor | int] | None, bos: int,
              pad: int) -> torch.Tensor | dict[str, torch.Tensor | int]:
    """Where a batch's documents are, for ``SdpaSelfAttention``: its segments (from the collater) on the devices of
    VARLEN_DEVICES, a dense mask from the tokens otherwise."""
    if segments is not None and tokens.device.type in VARLEN_DEVICES:
        if segments["offsets"].device != tokens.device:
            raise ValueError(f"segments on {segments['offsets'].device}, tokens on {tokens.device}: move the whole "
                             "sample (fairseq's utils.move_to_cuda)")
        return segments
    return document_mask(tokens, bos, pad)


class DocumentPositions(LearnedPositionalEmbedding):
    """Learned positions counted from the last <s> (fairseq counts from the row's start)."""

    def __init__(self, learned: LearnedPositionalEmbedding, bos: int) -> None:
        """Takes over the table fairseq built (and initialised): same parameter, same checkpoints, same random
        numbers drawn when a model is built."""
        with torch.device("meta"):  # draws nothing
            super().__init__(learned.num_embeddings, learned.embedding_dim, learned.padding_idx)
        self.weight = learned.weight
        self.bos = bos

    def forward(self, input: torch.Tensor, incremental_state: dict[str, dict[str, torch.Tensor | None]] | None = None,
                positions: torch.Tensor | None = None) -> torch.Tensor:
        if positions is not None or incremental_state is not None:
            return super().forward(input, incremental_state, positions)
        positions = document_positions(input, self.bos, self.padding_idx)
        # the lookup fairseq's forward makes after counting positions its own way
        return F.embedding(positions, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse)
