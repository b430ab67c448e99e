"""Encoder self-attention through torch's fused ``scaled_dot_product_attention``, with fairseq's parameters.

fairseq 0.12's ``MultiheadAttention`` goes through ``F.multi_head_attention_forward``: three projections, the
biases concatenated on every call, and the padding mask merged into a float mask. ``SdpaSelfAttention`` keeps the
same modules (``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``), so state dicts, checkpoints, resuming and conversion
are unchanged; it projects q, k and v in one matmul and hands the padding mask to SDPA as a boolean, which lets torch
pick its fused kernels. Anything else an attention can be asked for (weights, incremental decoding, an extra mask,
bias_k/v, zero attention) goes to fairseq's own forward.

``SdpaEncoderLayer`` is fairseq's encoder layer built with it (through fairseq's ``build_self_attention``), which
also takes the documents of a packed row (``biofairseq.models.documents``) as an argument and hands them on.
"""

import torch
import torch.nn.functional as F
from fairseq.models.transformer import TransformerConfig
from fairseq.modules.multihead_attention import MultiheadAttention
from fairseq.modules.transformer_layer import TransformerEncoderLayerBase

ATTENTION_CHOICES = ("fairseq", "sdpa")
DEFAULT_ATTENTION = "fairseq"  # until benchmarks/pretrain_speed.py, run on a GPU, shows sdpa faster


class SdpaSelfAttention(MultiheadAttention):
    """fairseq's MultiheadAttention, computed by ``F.scaled_dot_product_attention`` for encoder self-attention.

    ``documents``: where the documents of rows holding several are (--pack-documents), a B x 1 x T x T boolean mask
    (True: same document, key not padding; it stands for the padding mask) or the batch's segments.
    """

    def forward(self, query: torch.Tensor, key: torch.Tensor | None, value: torch.Tensor | None,
                key_padding_mask: torch.Tensor | None = None,
                incremental_state: dict[str, dict[str, torch.Tensor | None]] | None = None, need_weights: bool = True,
                static_kv: bool = False, attn_mask: torch.Tensor | None = None, before_softmax: bool = False,
                need_head_weights: bool = False, documents: torch.Tensor | dict[str, torch.Tensor | int] | None = None,
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        if (need_weights or need_head_weights or before_softmax or incremental_state is not None or static_kv
                or attn_mask is not None or not self.self_attention or self.bias_k is not None or self.add_zero_attn
                or query.device.type == "xla" or self.skip_embed_dim_check):
            if documents is not None:  # fairseq's attention would attend across a packed row's documents
                asked = "need_weights=True" if need_weights or need_head_weights else "this call"
                raise ValueError(f"{asked}: fairseq's attention, which computes it, cannot keep the documents of rows of "
                                 "several documents (--pack-documents) apart; call the model without it, or on unpacked rows")
            return super().forward(query, key, value, key_padding_mask, incremental_state, need_weights, static_kv,
                                   attn_mask, before_softmax, need_head_weights)
        weight = torch.cat((self.q_proj.weight, self.k_proj.weight, self.v_proj.weight))
        bias = torch.cat((self.q_proj.bias, self.k_proj.bias, self.v_proj.bias))
        # the first layer gets fairseq's transposed view, which F.linear copies anyway; copied here, a compiled layer
        # (biofairseq-train --compile) is not tied to one batch length
        qkv = F.linear(query.contiguous(), weight, bias)
        dropout = self.dropout_module.p if (self.training or self.dropout_module.apply_during_inference) else 0.0
        if isinstance(documents, dict):
            return self.out_proj(over_segments(qkv, documents, self.num_heads, dropout)), None
        length, batch, width = query.shape
        # T x B x 3C -> 3 x B x H x T x D
        qkv = qkv.view(length, batch, 3, self.num_heads, self.head_dim).permute(2, 1, 3, 0, 4)
        mask = documents  # it leaves out padding keys too
        if mask is None and key_padding_mask is not None:  # True where a key is padding; SDPA's is True where it attends
            mask = ~key_padding_mask.to(torch.bool).view(batch, 1, 1, length)
        x = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], attn_mask=mask, dropout_p=dropout)
        return self.out_proj(x.permute(2, 0, 1, 3).reshape(length, batch, width)), None


def over_segments(qkv: torch.Tensor, segments: dict[str, torch.Tensor | int], heads: int,
                  dropout: float) -> torch.Tensor:
    """T x B x C attention of each segment (a document, or a row's padding) to itself alone, as jagged tensors, from
    the T x B x 3C projections."""
    length, batch, width = qkv.shape[0], qkv.shape[1], qkv.shape[2] // 3
    if segments["tokens"] != length * batch:
        raise ValueError(f"segments cover {segments['tokens']} tokens, the batch has {batch} x {length}: collate "
                         "them with the tokens (biofairseq.data.packing.DocumentSegmentsDataset)")
    # T x B x 3C -> 3 x BT x H x D, rows one after the other (one copy, which leaves q, k and v contiguous)
    qkv = qkv.view(length, batch, 3, heads, width // heads).permute(2, 1, 0, 3, 4).reshape(3, batch * length, heads, -1)
    q, k, v = (torch.nested.nested_tensor_from_jagged(
        x, segments["offsets"], min_seqlen=segments["shortest"], max_seqlen=segments["longest"]).transpose(1, 2)
        for x in qkv)
    x = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout).transpose(1, 2).values()
    return x.view(batch, length, width).transpose(0, 1)


class SdpaEncoderLayer(TransformerEncoderLayerBase):
    """fairseq's encoder layer with ``SdpaSelfAttention``; same parameters, same checkpoints."""

    def build_self_attention(self, embed_dim: int, cfg: TransformerConfig) -> SdpaSelfAttention:
        # fairseq's build_self_attention, with our class
        return SdpaSelfAttention(embed_dim, cfg.encoder.attention_heads, dropout=cfg.attention_dropout,
                                 self_attention=True, q_noise=self.quant_noise, qn_block_size=self.quant_noise_block_size,
                                 xformers_att_config=cfg.encoder.xformers_att_config)

    def forward(self, x: torch.Tensor, encoder_padding_mask: torch.Tensor | None = None,
                attn_mask: torch.Tensor | None = None,
                documents: torch.Tensor | dict[str, torch.Tensor | int] | None = None,
                ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """fairseq's forward; with ``documents`` (packed rows, no padding mask), the same computation with the
        documents handed to the attention, which fairseq's forward has no argument for."""
        if documents is None:
            return super().forward(x, encoder_padding_mask, attn_mask)
        if encoder_padding_mask is not None or attn_mask is not None or self.return_fc:
            raise ValueError("documents replace the padding and attention masks; give one or the other")
        residual = x
        if self.normalize_before:
            x = self.self_attn_layer_norm(x)
        x, _ = self.self_attn(query=x, key=x, value=x, need_weights=False, documents=documents)
        x = self.residual_connection(self.dropout_module(x), residual)
        if not self.normalize_before:
            x = self.self_attn_layer_norm(x)
        residual = x
        if self.normalize_before:
            x = self.final_layer_norm(x)
        x = self.fc2(self.activation_dropout_module(self.activation_fn(self.fc1(x))))
        x = self.residual_connection(self.dropout_module(x), residual)
        if not self.normalize_before:
            x = self.final_layer_norm(x)
        return x


def encoder_layer_class(attention: str) -> type[TransformerEncoderLayerBase]:
    """The encoder layer that computes self-attention with ``attention`` (``ATTENTION_CHOICES``)."""
    if attention not in ATTENTION_CHOICES:
        raise ValueError(f"--attention {attention}: unknown; use one of {', '.join(ATTENTION_CHOICES)}")
    return SdpaEncoderLayer if attention == "sdpa" else TransformerEncoderLayerBase
