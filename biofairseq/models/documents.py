"""Encoders that read rows of several documents (``--pack-documents``) as if each were alone in its row.

Every document block begins with ``<s>``. A packed model restarts the learned positions at each ``<s>`` and keeps
attention inside the span from one ``<s>`` to the next, so a row holding documents A and B computes for A exactly
what a row holding A alone computes (tested). On rows of one document both are what fairseq computes.

The attention layers see only hidden states, so ``Documents`` tells them, once per forward, where the documents
are. On CUDA that is the batch's ``segments`` (``biofairseq.data.packing``: offsets counted on the host when the
batch is collated, so nothing synchronises): attention then runs over variable-length sequences (torch's jagged
tensors, the flash kernel, dropout included), computing no pair of tokens from different documents. Elsewhere,
or without segments, it is a dense boolean mask computed from the tokens: the same result, by a kernel that
computes every pair and discards the cross-document ones (on CPU the jagged path is an order of magnitude slower).
"""

import torch
import torch.nn.functional as F
from fairseq.models.transformer import TransformerEncoder, TransformerEncoderBase
from fairseq.modules import LearnedPositionalEmbedding

from biofairseq.models.attention import SdpaSelfAttention

VARLEN_DEVICES = ("cuda",)  # where segments go to the variable-length kernels


def document_positions(tokens, bos, pad):
    """fairseq's learned-position indices (padding_idx + 1 onwards, padding_idx at padding), counted from the last <s>."""
    index = torch.arange(tokens.size(1), device=tokens.device).expand_as(tokens)
    start = torch.where(tokens.eq(bos), index, torch.zeros_like(index)).cummax(dim=1).values
    return torch.where(tokens.eq(pad), pad, index - start + pad + 1)


def document_mask(tokens, bos, pad):
    """B x 1 x T x T: True where query and key are in the same document (the same count of <s> up to them) and the
    key is not padding."""
    ids = tokens.eq(bos).cumsum(dim=1)
    return (ids.unsqueeze(2) == ids.unsqueeze(1)).logical_and_(tokens.ne(pad).unsqueeze(1)).unsqueeze(1)


class Documents:
    """Tells the attention layers of one model where a batch's documents are."""

    def __init__(self, model, bos, pad):
        self.attentions = [m for m in model.modules() if isinstance(m, SdpaSelfAttention)]
        if not self.attentions:
            raise ValueError("--pack-documents needs --attention sdpa; add --attention sdpa")
        self.bos, self.pad = bos, pad

    def positions(self, tokens):
        return document_positions(tokens, self.bos, self.pad)

    def share(self, tokens, segments=None):
        """Before each forward: segments (from the collater) on CUDA, a dense mask from the tokens otherwise."""
        if segments is not None and tokens.device.type in VARLEN_DEVICES:
            if segments["offsets"].device != tokens.device:
                raise ValueError(f"segments on {segments['offsets'].device}, tokens on {tokens.device}: move the whole "
                                 "sample (fairseq's utils.move_to_cuda)")
            documents = segments
        else:
            documents = document_mask(tokens, self.bos, self.pad)
        for attention in self.attentions:
            attention.documents = documents


class DocumentPositions(LearnedPositionalEmbedding):
    """Learned positions counted from the last <s> (fairseq counts from the row's start)."""

    bos = 0

    def forward(self, input, incremental_state=None, positions=None):
        if positions is not None or incremental_state is not None:
            return super().forward(input, incremental_state, positions)
        positions = document_positions(input, self.bos, self.padding_idx)
        # the lookup fairseq's forward makes after counting positions its own way
        return F.embedding(positions, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse)


class PackedRowsEncoder(TransformerEncoder):
    """fairseq's encoder for packed rows. Their attentions leave out padding keys by the documents they are given,
    so the layers need no padding mask, and fairseq's test for padding, a host-device synchronisation at every
    layer (``if has_pads``), goes. What it computes and returns is fairseq's."""

    def forward_scriptable(self, src_tokens, src_lengths=None, return_all_hiddens=False, token_embeddings=None):
        padding = src_tokens.eq(self.padding_idx)
        x, embedding = self.forward_embedding(src_tokens, token_embeddings)
        # B x T x C -> T x B x C, laid out as every layer returns it: compiled layers (--compile) share one graph
        x = (x * (1 - padding.unsqueeze(-1).type_as(x))).transpose(0, 1).contiguous()
        states = [x] if return_all_hiddens else []
        for layer in self.layers:
            x = layer(x, encoder_padding_mask=None)
            if return_all_hiddens:
                states.append(x)
        if self.layer_norm is not None:
            x = self.layer_norm(x)
        lengths = src_tokens.ne(self.padding_idx).sum(dim=1, dtype=torch.int32).reshape(-1, 1)
        return {"encoder_out": [x], "encoder_padding_mask": [padding], "encoder_embedding": [embedding],
                "encoder_states": states, "fc_results": [], "src_tokens": [], "src_lengths": [lengths]}


def attend_within_documents(model, bos):
    """Switches ``model`` (a fairseq RoBERTa or our ELECTRA, with --attention sdpa) to document-local positions and
    attention.

    ELECTRA places the documents itself, for each tower. In a RoBERTa, the encoder becomes a ``PackedRowsEncoder``
    and its pre-hook shares them before every forward, from its tokens and from the segments that the model's
    forward received with those same tokens (a batch's ``net_input``).
    """
    if hasattr(model, "attend_within_documents"):
        model.attend_within_documents(Documents(model, bos, model.padding_idx))
        return model
    encoders = [m for m in model.modules() if isinstance(m, TransformerEncoderBase)]
    if len(encoders) != 1:
        raise ValueError("--pack-documents needs a RoBERTa encoder (a bio_roberta_* preset)")
    positions = encoders[0].embed_positions
    if type(positions) not in (LearnedPositionalEmbedding, DocumentPositions):
        raise ValueError("--pack-documents needs learned positions; drop --no-token-positional-embeddings")
    if type(encoders[0]) not in (TransformerEncoder, PackedRowsEncoder):
        raise ValueError(f"--pack-documents: {type(encoders[0]).__name__} is not fairseq's TransformerEncoder; use a bio_roberta_* preset")
    encoder = encoders[0]
    encoder.__class__ = PackedRowsEncoder
    encoder.documents, encoder.given = Documents(model, bos, positions.padding_idx), {}
    positions.__class__ = DocumentPositions
    positions.bos = bos
    model.register_forward_pre_hook(_remember_segments, with_kwargs=True)
    encoder.register_forward_pre_hook(_share_documents, with_kwargs=True)
    return model


# The hooks keep nothing of their own: what they share lives on the encoder, so that a copy of the model
# (copy.deepcopy, as fairseq's --store-ema makes) tells its own attentions, not the original's.

def _remember_segments(model, args, kwargs):
    """The tokens and segments of the model's forward, for its encoder (fairseq's RoBERTa does not pass them on)."""
    given = dict(tokens=args[0] if args else kwargs.get("src_tokens"), segments=kwargs.get("segments"))
    for encoder in model.modules():
        if isinstance(encoder, PackedRowsEncoder):
            encoder.given = given


def _share_documents(encoder, args, kwargs):
    tokens = args[0] if args else kwargs["src_tokens"]
    encoder.documents.share(tokens, encoder.given["segments"] if encoder.given.get("tokens") is tokens else None)
