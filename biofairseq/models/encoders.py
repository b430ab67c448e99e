"""fairseq's transformer encoder, built with the self-attention a model asks for, and for packed rows.

``Encoder`` is fairseq's ``TransformerEncoder`` whose layers are built (through fairseq's ``build_encoder_layer``)
with ``--attention``'s layer class. ``PackedRowsEncoder`` reads rows of several documents
(``biofairseq.models.documents``): document positions, and the documents handed to every layer as an argument.
"""

from argparse import Namespace

import torch
from fairseq.distributed import fsdp_wrap
from fairseq.models.transformer import TransformerConfig, TransformerEncoder
from fairseq.modules import LearnedPositionalEmbedding
from fairseq.modules.checkpoint_activations import checkpoint_wrapper

from biofairseq.models.attention import encoder_layer_class
from biofairseq.models.documents import DocumentPositions, documents


class Encoder(TransformerEncoder):
    """fairseq's TransformerEncoder whose layers compute self-attention with ``attention`` (fairseq or sdpa)."""

    def __init__(self, args, dictionary, embed_tokens, attention) -> None:
        self.layer_class = encoder_layer_class(attention)  # fairseq's __init__ builds the layers
        super().__init__(args, dictionary, embed_tokens)

    def build_encoder_layer(self, cfg: TransformerConfig | Namespace) -> torch.nn.Module:
        # fairseq's TransformerEncoderBase.build_encoder_layer, with our layer class
        cfg = TransformerConfig.from_namespace(cfg)
        layer = self.layer_class(cfg, return_fc=self.return_fc)
        if cfg.checkpoint_activations:
            layer = checkpoint_wrapper(layer, offload_to_cpu=cfg.offload_activations)
        return fsdp_wrap(layer, min_num_params=0 if cfg.checkpoint_activations else cfg.min_params_to_wrap)

    def forward(self, src_tokens: torch.Tensor, src_lengths: torch.Tensor | None = None,
                return_all_hiddens: bool = False, token_embeddings: torch.Tensor | None = None,
                segments: dict[str, torch.Tensor | int] | None = None) -> dict[str, list[torch.Tensor]]:
        """fairseq's; ``segments`` (a batch's documents, from the collater) say nothing more than the padding mask
        about rows of one document."""
        return super().forward(src_tokens, src_lengths, return_all_hiddens, token_embeddings)


class PackedRowsEncoder(Encoder):
    """fairseq's encoder for packed rows. Their attentions leave out padding keys by the documents they are given,
    so the layers need no padding mask, and fairseq's test for padding, a host-device synchronisation at every
    layer (``if has_pads``), goes. What it computes and returns is fairseq's."""

    def __init__(self, args, dictionary, embed_tokens, attention, bos) -> None:
        if attention != "sdpa":
            raise ValueError("--pack-documents needs --attention sdpa; add --attention sdpa")
        super().__init__(args, dictionary, embed_tokens, attention)
        if type(self.embed_positions) is not LearnedPositionalEmbedding:
            raise ValueError("--pack-documents needs learned positions; drop --no-token-positional-embeddings")
        self.embed_positions = DocumentPositions(self.embed_positions, bos)
        self.bos = bos

    def forward(self, src_tokens: torch.Tensor, src_lengths: torch.Tensor | None = None,
                return_all_hiddens: bool = False, token_embeddings: torch.Tensor | None = None,
                segments: dict[str, torch.Tensor | int] | None = None) -> dict[str, list[torch.Tensor]]:
        return self.forward_scriptable(src_tokens, src_lengths, return_all_hiddens, token_embeddings, segments)

    def forward_scriptable(self, src_tokens: torch.Tensor, src_lengths: torch.Tensor | None = None,
                           return_all_hiddens: bool = False, token_embeddings: torch.Tensor | None = None,
                           segments: dict[str, torch.Tensor | int] | None = None) -> dict[str, list[torch.Tensor]]:
        padding = src_tokens.eq(self.padding_idx)
        where = documents(src_tokens, segments, self.bos, self.padding_idx)
        x, embedding = self.forward_embedding(src_tokens, token_embeddings)
        # B x T x C -> T x B x C, laid out as every layer returns it: compiled layers (--compile) share one graph
        x = (x * (1 - padding.unsqueeze(-1).type_as(x))).transpose(0, 1).contiguous()
        states = [x] if return_all_hiddens else []
        for layer in self.layers:
            x = layer(x, documents=where)
            if return_all_hiddens:
                states.append(x)
        if self.layer_norm is not None:
            x = self.layer_norm(x)
        lengths = src_tokens.ne(self.padding_idx).sum(dim=1, dtype=torch.int32).reshape(-1, 1)
        return {"encoder_out": [x], "encoder_padding_mask": [padding], "encoder_embedding": [embedding],
                "encoder_states": states, "fc_results": [], "src_tokens": [], "src_lengths": [lengths]}
