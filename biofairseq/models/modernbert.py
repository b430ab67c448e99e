"""ModernBERT's encoder (Warner et al. 2024) as a fairseq model, ``bio_modernbert``, trained by ``document_mlm``.

The block is ModernBERT's: pre-norm LayerNorms without biases (none before the first layer's attention), one
bias-free q/k/v projection, rotary positions (theta 160k in the global layers, 10k in the local ones), GeGLU
feed-forward layers, every ``--global-attn-every-n-layers``-th layer (from the first) global and the others
attending within a window of ``--local-attention`` tokens (``local_attention / 2`` either side), a final norm,
and a masked-LM head (dense, GELU, norm, the token embeddings with a bias). Tensor for tensor it is transformers'
``ModernBertForMaskedLM`` (``biofairseq.convert.layouts``), so checkpoints convert both ways with parity.

ModernBERT trains on unpadded sequences; here, as for our other encoders, rows packed with several documents
(``--pack-documents``) play that part: rotary positions restart at each document's ``<s>`` and attention stays
within the document (``biofairseq.models.documents``), so each document computes what it would alone. Attention is
torch's ``scaled_dot_product_attention`` with a boolean mask per layer type (document, window), on CPU and GPU.
"""

import math
from argparse import Namespace
from dataclasses import dataclass, field
from typing import Any, Self

import torch
import torch.nn.functional as F
from fairseq import utils
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.models import FairseqEncoder, FairseqEncoderModel, register_model, register_model_architecture
from fairseq.modules.rotary_positional_embedding import rotate_half
from fairseq.tasks import FairseqTask
from fairseq.utils import safe_getattr
from omegaconf import DictConfig
from torch import nn

from biofairseq.data.host_counts import at_positions
from biofairseq.models.documents import document_mask, document_positions, packed_bos
from biofairseq.models.layer_norms import DEFAULT as DEFAULT_LAYER_NORM_EPS
from biofairseq.models.layer_norms import HELP as LAYER_NORM_EPS_HELP
from biofairseq.models.layer_norms import set_layer_norm_eps
from biofairseq.models.precision import AMP_BF16_HELP, AmpBf16, amp_bf16_flag
from biofairseq.model_shapes import BIO_MODERNBERT

INIT_RANGE, INIT_CUTOFF = 0.02, 2.0  # ModernBERT's initializer_range and initializer_cutoff_factor


@dataclass
class ModernBertModelConfig(FairseqDataclass):
    encoder_layers: int = field(default=22, metadata={"help": "layers"})
    encoder_embed_dim: int = field(default=768, metadata={"help": "width"})
    encoder_ffn_embed_dim: int = field(
        default=1152, metadata={"help": "GeGLU's inner width (its input projection is twice as wide: value and gate)"})
    encoder_attention_heads: int = field(default=12, metadata={"help": "attention heads"})
    local_attention: int = field(
        default=128, metadata={"help": "the local layers' window: each token attends to the keys at most half of it "
                               "away on either side (ModernBERT: 128)"})
    global_attn_every_n_layers: int = field(
        default=3, metadata={"help": "layers 0, n, 2n, ... attend globally, the others locally (ModernBERT: 3)"})
    global_rope_theta: float = field(default=160_000.0, metadata={"help": "rotary base of the global layers"})
    local_rope_theta: float = field(default=10_000.0, metadata={"help": "rotary base of the local layers"})
    activation_fn: ChoiceEnum(utils.get_available_activation_fns()) = field(
        default="gelu", metadata={"help": "GeGLU's activation and the head's (ModernBERT: exact GELU)"})
    dropout: float = field(default=0.0, metadata={"help": "dropout on the embeddings (ModernBERT: 0)"})
    activation_dropout: float = field(default=0.0, metadata={"help": "dropout inside GeGLU (ModernBERT: 0)"})
    attention_dropout: float = field(
        default=0.0, metadata={"help": "dropout on attention weights and after the output projection (ModernBERT: 0)"})
    max_positions: int = field(
        default=8192, metadata={"help": "the longest sequence the model takes (rotary positions have no table)"})
    amp_bf16: bool = field(default=False, metadata={"help": AMP_BF16_HELP})
    layer_norm_eps: float = field(default=DEFAULT_LAYER_NORM_EPS, metadata={"help": LAYER_NORM_EPS_HELP + " (ModernBERT's norm_eps)"})


def layer_is_global(layer: int, every: int) -> bool:
    return layer % every == 0


def _trunc_normal(weight, std) -> None:
    nn.init.trunc_normal_(weight, mean=0.0, std=std, a=-INIT_CUTOFF * std, b=INIT_CUTOFF * std)


class Rotary(nn.Module):
    """cos and sin of rotary positions (RoFormer) at given positions, in fp32: ModernBERT rotates q and k in fp32.
    The frequencies are computed at each call, not kept in a buffer, which fairseq's --fp16 would cast to fp16 (the
    global layers' lowest frequencies, about 1e-5, would lose most of their digits)."""

    def __init__(self, head_dim, theta) -> None:
        super().__init__()
        self.head_dim, self.theta = head_dim, theta

    def forward(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """B x T positions -> (cos, sin), each B x 1 x T x head_dim."""
        steps = torch.arange(0, self.head_dim, 2, dtype=torch.float, device=positions.device)
        freqs = positions.unsqueeze(-1).float() * (1.0 / (self.theta ** (steps / self.head_dim)))
        angles = torch.cat((freqs, freqs), dim=-1).unsqueeze(1)
        return angles.cos(), angles.sin()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return ((x.float() * cos) + (rotate_half(x.float()) * sin)).to(x.dtype)


class ModernBertLayer(nn.Module):
    compiled_layer = True  # what biofairseq.models.compiled_layers compiles (fairseq's layers are found as they are)

    def __init__(self, cfg, index) -> None:
        super().__init__()
        width, self.heads = cfg.encoder_embed_dim, cfg.encoder_attention_heads
        if width % self.heads:
            raise ValueError(f"--encoder-embed-dim {width} is not a multiple of --encoder-attention-heads {self.heads}")
        self.is_global = layer_is_global(index, cfg.global_attn_every_n_layers)
        # the first layer reads the normalised embeddings: no norm of its own (ModernBERT's Identity)
        self.attn_norm = nn.LayerNorm(width, bias=False) if index > 0 else None
        self.qkv_proj = nn.Linear(width, 3 * width, bias=False)
        self.out_proj = nn.Linear(width, width, bias=False)
        self.mlp_norm = nn.LayerNorm(width, bias=False)
        self.ffn_in = nn.Linear(width, 2 * cfg.encoder_ffn_embed_dim, bias=False)  # value and gate
        self.ffn_out = nn.Linear(cfg.encoder_ffn_embed_dim, width, bias=False)
        self.activation_fn = utils.get_activation_fn(cfg.activation_fn)
        self.attention_dropout, self.activation_dropout = cfg.attention_dropout, cfg.activation_dropout

    def forward(self, x: torch.Tensor, rotary: tuple[torch.Tensor, torch.Tensor], mask: torch.Tensor) -> torch.Tensor:
        """x: B x T x C; rotary: (cos, sin) of this layer's type; mask: B x 1 x T x T, True where a query attends."""
        batch, length, width = x.shape
        h = x if self.attn_norm is None else self.attn_norm(x)
        q, k, v = self.qkv_proj(h).view(batch, length, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        q, k = rotate(q, *rotary), rotate(k, *rotary)
        dropout = self.attention_dropout if self.training else 0.0
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout)
        a = self.out_proj(a.transpose(1, 2).reshape(batch, length, width))
        x = x + F.dropout(a, self.attention_dropout, self.training)
        value, gate = self.ffn_in(self.mlp_norm(x)).chunk(2, dim=-1)
        glu = F.dropout(self.activation_fn(value) * gate, self.activation_dropout, self.training)
        return x + self.ffn_out(glu)


class ModernBertLMHead(nn.Module):
    """dense + activation + norm, then the token embeddings (tied) with a bias of its own."""

    def __init__(self, width, activation_fn, weight) -> None:
        super().__init__()
        self.dense = nn.Linear(width, width, bias=False)
        self.activation_fn = utils.get_activation_fn(activation_fn)
        self.norm = nn.LayerNorm(width, bias=False)
        self.weight = weight
        self.bias = nn.Parameter(torch.zeros(weight.shape[0]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(self.norm(self.activation_fn(self.dense(x))), self.weight) + self.bias


class ModernBertEncoder(FairseqEncoder):
    """Token embeddings and their norm, the layers, the final norm and the LM head. ``bos``: where each document
    of a packed row starts (--pack-documents); None for rows of one document, left-aligned and right-padded."""

    def __init__(self, cfg, dictionary, bos=None) -> None:
        super().__init__(dictionary)
        width, self.padding_idx, self.bos = cfg.encoder_embed_dim, dictionary.pad(), bos
        if cfg.local_attention < 2 or cfg.local_attention % 2:
            raise ValueError(f"--local-attention {cfg.local_attention}: must be an even number of tokens (ModernBERT: 128)")
        if cfg.global_attn_every_n_layers < 1:
            raise ValueError(f"--global-attn-every-n-layers {cfg.global_attn_every_n_layers}: must be 1 or more")
        self.half_window, self.context = cfg.local_attention // 2, cfg.max_positions
        self.embed_tokens = nn.Embedding(len(dictionary), width, self.padding_idx)
        self.embed_norm = nn.LayerNorm(width, bias=False)
        self.dropout = cfg.dropout
        self.layers = nn.ModuleList([ModernBertLayer(cfg, i) for i in range(cfg.encoder_layers)])
        self.final_norm = nn.LayerNorm(width, bias=False)
        head_dim = width // cfg.encoder_attention_heads
        self.rotary = nn.ModuleDict({"global": Rotary(head_dim, cfg.global_rope_theta),
                                     "local": Rotary(head_dim, cfg.local_rope_theta)})
        self.lm_head = ModernBertLMHead(width, cfg.activation_fn, self.embed_tokens.weight)
        self._init_weights(cfg.encoder_layers)

    def _init_weights(self, layers) -> None:
        """ModernBERT's: truncated normals, std 0.02 in, 0.02 / sqrt(2 x layers) for what writes to the residual."""
        out = INIT_RANGE / math.sqrt(2.0 * layers)
        _trunc_normal(self.embed_tokens.weight, INIT_RANGE)
        for layer in self.layers:
            for linear, std in ((layer.qkv_proj, INIT_RANGE), (layer.ffn_in, INIT_RANGE), (layer.out_proj, out),
                                (layer.ffn_out, out)):
                _trunc_normal(linear.weight, std)
        _trunc_normal(self.lm_head.dense.weight, out)

    def positions_and_masks(self, tokens: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Rotary positions (from each document's <s> in packed rows, from the row's start otherwise) and the
        attention masks of global and local layers. Every query also attends to itself, so that a padding query
        whose window holds only padding gets a number (it is never read) rather than NaN."""
        length = tokens.shape[1]
        index = torch.arange(length, device=tokens.device)
        if self.bos is None:
            positions = index.expand_as(tokens)
            attends = tokens.ne(self.padding_idx)[:, None, None, :]
        else:
            # fairseq's learned-position indices count from padding_idx + 1; rotary positions from 0
            positions = (document_positions(tokens, self.bos, self.padding_idx) - self.padding_idx - 1).clamp(min=0)
            attends = document_mask(tokens, self.bos, self.padding_idx)
        itself = torch.eye(length, dtype=torch.bool, device=tokens.device)
        window = (index[:, None] - index[None, :]).abs() <= self.half_window
        return positions, {"global": attends | itself, "local": (attends & window) | itself}

    def extract_features(self, src_tokens: torch.Tensor,
                         return_all_hiddens: bool = False) -> tuple[torch.Tensor, dict[str, list[torch.Tensor] | None]]:
        if src_tokens.shape[1] > self.context:
            raise ValueError(f"a batch of {src_tokens.shape[1]} tokens per row: the model takes at most "
                             f"{self.context} (--max-positions)")
        positions, masks = self.positions_and_masks(src_tokens)
        rotary = {kind: self.rotary[kind](positions) for kind in ("global", "local")}
        x = F.dropout(self.embed_norm(self.embed_tokens(src_tokens)), self.dropout, self.training)
        states = [x] if return_all_hiddens else []
        for layer in self.layers:
            kind = "global" if layer.is_global else "local"
            x = layer(x, rotary[kind], masks[kind])
            if return_all_hiddens:
                states.append(x)
        return self.final_norm(x), {"inner_states": states if return_all_hiddens else None}

    def output_layer(self, features: torch.Tensor) -> torch.Tensor:
        return self.lm_head(features)

    def forward(self, src_tokens: torch.Tensor, features_only: bool = False, return_all_hiddens: bool = False,
                masked_tokens: torch.Tensor | None = None,
                **unused: Any) -> tuple[torch.Tensor, dict[str, list[torch.Tensor] | None]]:
        x, extra = self.extract_features(src_tokens, return_all_hiddens)
        if masked_tokens is not None:
            x = x[masked_tokens] if masked_tokens.dtype == torch.bool else at_positions(x, masked_tokens)
        return (x if features_only else self.output_layer(x)), extra

    def max_positions(self) -> int:
        return self.context


@register_model("bio_modernbert", dataclass=ModernBertModelConfig)
class BioModernBertModel(AmpBf16, FairseqEncoderModel):
    """ModernBERT's encoder and masked-LM head, called as fairseq's RoBERTa is: ``model(tokens)`` -> (logits, extra),
    ``features_only=True`` -> the final norm's output, ``masked_tokens`` (a boolean mask, or flat positions of the
    B x T batch, ``biofairseq.data.host_counts``) -> the logits there only."""

    masked_lm_encoder = True  # biofairseq.checkpoints loads it, biofairseq-convert converts it

    takes_target_positions = True

    def __init__(self, cfg, encoder) -> None:
        super().__init__(encoder)
        self.cfg = cfg

    @classmethod
    def build_model(cls, cfg: ModernBertModelConfig | DictConfig, task: FairseqTask) -> Self:
        model = cls(cfg, ModernBertEncoder(cfg, task.source_dictionary, packed_bos(task)))
        model.amp_bf16 = amp_bf16_flag(cfg)
        return set_layer_norm_eps(model, safe_getattr(cfg, "layer_norm_eps", DEFAULT_LAYER_NORM_EPS))

    def forward(self, src_tokens: torch.Tensor, features_only: bool = False, return_all_hiddens: bool = False,
                masked_tokens: torch.Tensor | None = None, segments: dict[str, torch.Tensor | int] | None = None,
                **kwargs: Any) -> tuple[torch.Tensor, dict[str, list[torch.Tensor] | None]]:
        """``segments``: what the collater gives packed batches; the documents are found from the tokens instead."""
        with self.autocast():
            return self.encoder(src_tokens, features_only, return_all_hiddens, masked_tokens)

    def max_positions(self) -> int:
        return self.cfg.max_positions

    @property
    def reads_packed_rows(self) -> bool:
        return self.encoder.bos is not None


def _preset(name, layers, width, ffn, heads):
    def architecture(args: Namespace | DictConfig) -> None:
        args.encoder_layers = safe_getattr(args, "encoder_layers", layers)
        args.encoder_embed_dim = safe_getattr(args, "encoder_embed_dim", width)
        args.encoder_ffn_embed_dim = safe_getattr(args, "encoder_ffn_embed_dim", ffn)
        args.encoder_attention_heads = safe_getattr(args, "encoder_attention_heads", heads)

    architecture.__name__ = f"{name}_architecture"
    architecture.__doc__ = f"{name}: {layers} layers, {width} wide, GeGLU {ffn}, {heads} heads."
    return register_model_architecture("bio_modernbert", name)(architecture)


for _name, _shape in BIO_MODERNBERT.items():
    _preset(_name, **_shape)
