"""Encoder self-attention through torch's fused ``scaled_dot_product_attention``, with fairseq's parameters.

fairseq 0.12's ``MultiheadAttention`` goes through ``F.multi_head_attention_forward``: three projections, the
biases concatenated on every call, and the padding mask merged into a float mask. ``SdpaSelfAttention`` keeps the
same modules (``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``), so state dicts, checkpoints, resuming and conversion
are unchanged; it projects q, k and v in one matmul and hands the padding mask to SDPA as a boolean, which lets torch
pick its fused kernels. Anything else an attention can be asked for (weights, incremental decoding, an extra mask,
bias_k/v, zero attention) goes to fairseq's own forward.
"""

import torch
import torch.nn.functional as F
from fairseq.modules.multihead_attention import MultiheadAttention

ATTENTION_CHOICES = ("fairseq", "sdpa")
DEFAULT_ATTENTION = "fairseq"  # until benchmarks/pretrain_speed.py, run on a GPU, shows sdpa faster


class SdpaSelfAttention(MultiheadAttention):
    """fairseq's MultiheadAttention, computed by ``F.scaled_dot_product_attention`` for encoder self-attention."""

    # B x 1 x T x T, True where a query and a key are in the same document and the key is a token, when rows hold
    # several documents (--pack-documents; set once per forward by models/documents.py for every layer)
    document_mask = None

    def forward(self, query, key, value, key_padding_mask=None, incremental_state=None, need_weights=True,
                static_kv=False, attn_mask=None, before_softmax=False, need_head_weights=False):
        if (need_weights or need_head_weights or before_softmax or incremental_state is not None or static_kv
                or attn_mask is not None or not self.self_attention or self.bias_k is not None or self.add_zero_attn
                or query.device.type == "xla" or self.skip_embed_dim_check):
            return super().forward(query, key, value, key_padding_mask, incremental_state, need_weights, static_kv,
                                   attn_mask, before_softmax, need_head_weights)
        length, batch, width = query.shape
        weight = torch.cat((self.q_proj.weight, self.k_proj.weight, self.v_proj.weight))
        bias = torch.cat((self.q_proj.bias, self.k_proj.bias, self.v_proj.bias))
        # T x B x 3C -> 3 x B x H x T x D
        qkv = F.linear(query, weight, bias).view(length, batch, 3, self.num_heads, self.head_dim).permute(2, 1, 3, 0, 4)
        mask = self.document_mask  # it leaves out padding keys too
        if mask is None and key_padding_mask is not None:  # True where a key is padding; SDPA's is True where it attends
            mask = ~key_padding_mask.to(torch.bool).view(batch, 1, 1, length)
        dropout = self.dropout_module.p if (self.training or self.dropout_module.apply_during_inference) else 0.0
        x = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], attn_mask=mask, dropout_p=dropout)
        return self.out_proj(x.permute(2, 0, 1, 3).reshape(length, batch, width)), None


def use_attention(model, attention):
    """Runs every self-attention of ``model`` through ``attention`` (``ATTENTION_CHOICES``); returns the model.

    The class of each built module is switched in place: fairseq builds them deep inside its encoders (RoBERTa's
    encoder -> TransformerEncoder -> layer), and the subclass adds no state, only another forward.
    """
    if attention not in ATTENTION_CHOICES:
        raise ValueError(f"--attention {attention}: unknown; use one of {', '.join(ATTENTION_CHOICES)}")
    for module in model.modules():
        if isinstance(module, MultiheadAttention) and module.self_attention:
            module.__class__ = SdpaSelfAttention if attention == "sdpa" else MultiheadAttention
    return model
