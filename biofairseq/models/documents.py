"""A RoBERTa that reads rows of several documents (``--pack-documents``) as if each were alone in its row.

Every document block begins with ``<s>``. ``attend_within_documents`` makes the model restart the learned
positions at each ``<s>`` and keeps attention inside the span from one ``<s>`` to the next, so a row holding
documents A and B computes for A exactly what a row holding A alone computes (tested). On rows of one document
both are what fairseq computes. The positions come from the tokens inside the positional embedding; the document
mask, computed once per forward, reaches the attention layers, which see only hidden states, through a pre-hook on
the encoder.
"""

import torch
import torch.nn.functional as F
from fairseq.models.transformer import TransformerEncoderBase
from fairseq.modules import LearnedPositionalEmbedding

from biofairseq.models.attention import SdpaSelfAttention


def document_mask(tokens, bos, pad):
    """B x 1 x T x T: True where query and key are in the same document (the same count of <s> up to them) and the
    key is not padding."""
    ids = tokens.eq(bos).cumsum(dim=1)
    return (ids.unsqueeze(2) == ids.unsqueeze(1)).logical_and_(tokens.ne(pad).unsqueeze(1)).unsqueeze(1)


class DocumentPositions(LearnedPositionalEmbedding):
    """Learned positions counted from the last <s> (fairseq counts from the row's start)."""

    bos = 0

    def forward(self, input, incremental_state=None, positions=None):
        if positions is not None or incremental_state is not None:
            return super().forward(input, incremental_state, positions)
        index = torch.arange(input.size(1), device=input.device).expand_as(input)
        start = torch.where(input.eq(self.bos), index, torch.zeros_like(index)).cummax(dim=1).values
        positions = torch.where(input.eq(self.padding_idx), self.padding_idx, index - start + self.padding_idx + 1)
        # the lookup fairseq's forward makes after counting positions its own way
        return F.embedding(positions, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse)


def attend_within_documents(model, bos):
    """Switches ``model`` (a fairseq RoBERTa with --attention sdpa) to document-local positions and attention."""
    encoders = [m for m in model.modules() if isinstance(m, TransformerEncoderBase)]
    attentions = [m for m in model.modules() if isinstance(m, SdpaSelfAttention)]
    if len(encoders) != 1 or not attentions:
        raise ValueError("--pack-documents needs a RoBERTa encoder with --attention sdpa; add --attention sdpa")
    positions = encoders[0].embed_positions
    if type(positions) not in (LearnedPositionalEmbedding, DocumentPositions):
        raise ValueError("--pack-documents needs learned positions; drop --no-token-positional-embeddings")
    positions.__class__ = DocumentPositions
    positions.bos = bos

    def share_document_mask(encoder, args, kwargs):
        mask = document_mask(args[0] if args else kwargs["src_tokens"], bos, positions.padding_idx)
        for attention in attentions:
            attention.document_mask = mask

    encoders[0].register_forward_pre_hook(share_document_mask, with_kwargs=True)
    return model
