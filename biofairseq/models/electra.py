"""ELECTRA (Clark et al. 2020) as one fairseq model: a small masked-LM generator and a discriminator that
finds the tokens the generator replaced, trained together by fairseq's trainer (fp16, DDP, resume).

Everything a step needs happens in ``forward``, so that the whole step goes through fairseq's DDP wrapper
once: the generator's logits at the selected positions only, Gumbel-max sampling from them (fp32, no
gradient), and the discriminator on the corrupted sequence. The layers are fairseq's own post-LN
``TransformerEncoderLayerBase`` (the same parameter names as RoBERTa's), so conversion reuses RoBERTa's map.
"""

import logging
from argparse import Namespace
from dataclasses import dataclass, field
from typing import Any, Optional, Self

import torch
import torch.nn.functional as F
from fairseq import utils
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.models import BaseFairseqModel, register_model, register_model_architecture
from fairseq.models.transformer import TransformerConfig
from fairseq.modules import LayerNorm, PositionalEmbedding
from fairseq.modules.fairseq_dropout import FairseqDropout
from fairseq.modules.transformer_sentence_encoder import init_bert_params
from fairseq.tasks import FairseqTask
from fairseq.utils import safe_getattr
from omegaconf import DictConfig
from torch import nn

from biofairseq.data import special_symbols
from biofairseq.data.host_counts import at_positions, flat_positions
from biofairseq.models.attention import ATTENTION_CHOICES, DEFAULT_ATTENTION, encoder_layer_class
from biofairseq.models.documents import document_positions, documents, packed_bos
from biofairseq.models.layer_norms import DEFAULT as DEFAULT_LAYER_NORM_EPS
from biofairseq.models.layer_norms import HELP as LAYER_NORM_EPS_HELP
from biofairseq.models.layer_norms import set_layer_norm_eps
from biofairseq.models.precision import AMP_BF16_HELP, AmpBf16, amp_bf16_flag
from biofairseq.model_shapes import ELECTRA, ELECTRA_SHARING, electra_generator

logger = logging.getLogger(__name__)

SHARING = ELECTRA_SHARING


@dataclass
class ElectraModelConfig(FairseqDataclass):
    encoder_layers: int = field(default=12, metadata={"help": "layers of each tower (generator and discriminator)"})
    encoder_embed_dim: int = field(default=768, metadata={"help": "discriminator width"})
    encoder_ffn_embed_dim: int = field(default=3072, metadata={"help": "discriminator FFN width"})
    encoder_attention_heads: int = field(default=12, metadata={"help": "discriminator attention heads"})
    embedding_dim: int = field(
        default=768, metadata={"help": "width of the shared token and position embeddings; a tower of another "
                               "width projects them (ELECTRA-small: 128)"}
    )
    generator_width_fraction: float = field(
        default=1 / 3, metadata={"help": "generator width / discriminator width (1/3 base, 1/4 small and large); "
                                 "the generator's heads are its width / 64, its FFN 4 x its width"}
    )
    embedding_sharing: ChoiceEnum(SHARING) = field(
        default="tied", metadata={"help": "tied: one embedding module for both towers (ELECTRA); gdes: the "
                                  "discriminator's = stop-gradient(generator's) + its own zero-initialised delta "
                                  "(DeBERTa-v3); detached: the generator's without their gradient, and no delta (the tables the "
                                  "generator alone trains); none: each tower its own"}
    )
    sampling_temperature: float = field(
        default=1.0, metadata={"help": "the generator's samples are drawn from softmax(logits / T) (ELECTRA: 1); above 1 "
                               "they are more random, so replaced tokens are easier to find"}
    )
    sampling_temperature_final: Optional[float] = field(
        default=None, metadata={"help": "anneal the temperature linearly from --sampling-temperature to this over "
                                "--sampling-temperature-updates updates, then hold it (none: constant)"}
    )
    sampling_temperature_updates: int = field(
        default=0, metadata={"help": "updates over which the temperature anneals (with --sampling-temperature-final)"}
    )
    activation_fn: ChoiceEnum(utils.get_available_activation_fns()) = field(default="gelu")
    attention: ChoiceEnum(ATTENTION_CHOICES) = field(
        default=DEFAULT_ATTENTION, metadata={"help": "self-attention of both towers: sdpa, torch's fused "
                                             "scaled_dot_product_attention; fairseq, fairseq's MultiheadAttention; "
                                             "same weights and checkpoints either way"}
    )
    amp_bf16: bool = field(default=False, metadata={"help": AMP_BF16_HELP})
    layer_norm_eps: float = field(default=DEFAULT_LAYER_NORM_EPS, metadata={"help": LAYER_NORM_EPS_HELP})
    dropout: float = 0.1
    attention_dropout: float = 0.1
    activation_dropout: float = 0.0
    max_positions: int = field(
        default=512, metadata={"help": "position table size, independent of --tokens-per-sample so that a second "
                               "length phase at 512 continues from a first at 128"}
    )


def generator_shape(cfg: ElectraModelConfig | DictConfig | Namespace) -> tuple[int, int, int]:
    """(width, FFN width, heads) of the generator (``model_shapes.electra_generator``)."""
    return electra_generator(cfg.encoder_embed_dim, cfg.generator_width_fraction)


def _embed(tokens, positions, token_weight, position_weight, padding_idx, layer_norm, dropout):
    """fairseq's learned token + position embeddings (positions from padding_idx + 1), LayerNorm, dropout."""
    x = F.embedding(tokens, token_weight, padding_idx) + F.embedding(positions, position_weight, padding_idx)
    return dropout(layer_norm(x))


class Embeddings(nn.Module):
    """Token and position embeddings and their LayerNorm: the module both towers share."""

    def __init__(self, vocab_size, dim, max_positions, padding_idx, dropout) -> None:
        super().__init__()
        self.padding_idx = padding_idx
        self.embed_tokens = nn.Embedding(vocab_size, dim, padding_idx)
        self.embed_positions = PositionalEmbedding(max_positions, dim, padding_idx, learned=True)
        self.layernorm_embedding = LayerNorm(dim)
        self.dropout_module = FairseqDropout(dropout, module_name=self.__class__.__name__)

    def weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.embed_tokens.weight, self.embed_positions.weight

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return _embed(tokens, positions, *self.weights(), self.padding_idx, self.layernorm_embedding, self.dropout_module)


class DisentangledEmbeddings(nn.Module):
    """DeBERTa-v3's gradient-disentangled sharing: the generator's token and position tables without their
    gradient, plus zero-initialised deltas of the discriminator's own; its own LayerNorm. Without deltas
    (``residual=False``, --embedding-sharing detached) the discriminator reads the tables the generator alone trains."""

    def __init__(self, shared: Embeddings, dropout, residual=True) -> None:
        super().__init__()
        tokens, positions = shared.weights()
        self.padding_idx = shared.padding_idx
        self.token_delta = nn.Parameter(torch.zeros_like(tokens)) if residual else None
        self.position_delta = nn.Parameter(torch.zeros_like(positions)) if residual else None
        self.layernorm_embedding = LayerNorm(tokens.shape[1])
        self.dropout_module = FairseqDropout(dropout, module_name=self.__class__.__name__)

    def weights(self, shared: Embeddings) -> tuple[torch.Tensor, torch.Tensor]:
        tokens, positions = (table.detach() for table in shared.weights())
        if self.token_delta is None:
            return tokens, positions
        return tokens + self.token_delta, positions + self.position_delta

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor, shared: Embeddings) -> torch.Tensor:
        return _embed(tokens, positions, *self.weights(shared), self.padding_idx, self.layernorm_embedding,
                      self.dropout_module)


class Tower(nn.Module):
    """A post-LN encoder of fairseq layers (of the class computing --attention's self-attention), with a projection
    from the embedding width where it differs."""

    def __init__(self, cfg, embedding_dim, width, ffn, heads) -> None:
        super().__init__()
        layer_cfg = TransformerConfig(
            dropout=cfg.dropout, attention_dropout=cfg.attention_dropout,
            activation_dropout=cfg.activation_dropout, activation_fn=cfg.activation_fn,
        )
        layer_cfg.encoder.embed_dim, layer_cfg.encoder.ffn_embed_dim = width, ffn
        layer_cfg.encoder.attention_heads, layer_cfg.encoder.normalize_before = heads, False
        self.embed_proj = nn.Linear(embedding_dim, width) if embedding_dim != width else None
        layer = encoder_layer_class(cfg.attention)
        self.layers = nn.ModuleList([layer(layer_cfg) for _ in range(cfg.encoder_layers)])

    def forward(self, x: torch.Tensor, padding_mask: torch.Tensor | None,
                documents: torch.Tensor | dict[str, torch.Tensor | int] | None = None) -> torch.Tensor:
        """documents (packed rows; ``biofairseq.models.documents``): where they are, padding one of them, for the
        attentions instead of the padding mask."""
        if self.embed_proj is not None:
            x = self.embed_proj(x)
        if documents is None:
            x = x * (1 - padding_mask.unsqueeze(-1).type_as(x))
            padding_mask = padding_mask if padding_mask.any() else None
        x = x.transpose(0, 1).contiguous()  # as every layer returns it: compiled layers share one graph
        for layer in self.layers:
            x = layer(x, encoder_padding_mask=padding_mask) if documents is None else layer(x, documents=documents)
        return x.transpose(0, 1)


class GeneratorHead(nn.Module):
    """dense(width -> embedding width) + activation + LayerNorm, then the token embeddings with its own bias.

    The vocabulary projection runs in the weights' precision even under --amp-bf16 (fp32 there): its logits are
    sampled by Gumbel-max and scored in fp32, and bf16's 8-bit mantissa would round them first. It covers the selected
    tokens only (15%), so the fp32 matmul costs little beside the towers'.
    """

    def __init__(self, width, embedding_dim, weight, activation_fn) -> None:
        super().__init__()
        self.dense = nn.Linear(width, embedding_dim)
        self.activation_fn = utils.get_activation_fn(activation_fn)
        self.layer_norm = LayerNorm(embedding_dim)
        self.weight = weight
        self.bias = nn.Parameter(torch.zeros(weight.shape[0]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.layer_norm(self.activation_fn(self.dense(x)))  # autocast's: fp32 on CUDA, bf16 on a CPU
        with torch.autocast(hidden.device.type, enabled=False):
            return F.linear(hidden.to(self.weight.dtype), self.weight) + self.bias


class DiscriminatorHead(nn.Module):
    """dense + activation + dense to one logit per token (> 0: replaced)."""

    def __init__(self, width, activation_fn) -> None:
        super().__init__()
        self.dense = nn.Linear(width, width)
        self.activation_fn = utils.get_activation_fn(activation_fn)
        self.dense_prediction = nn.Linear(width, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dense_prediction(self.activation_fn(self.dense(x))).squeeze(-1)


@dataclass(frozen=True)
class TemperatureSchedule:
    """The generator's sampling temperature by update: from ``start``, linearly to ``final`` over ``updates``, then
    ``final``; constant without a final one. A high temperature early makes replacements easy to find while the
    discriminator is weak; towards 1 they become the generator's own, as ELECTRA samples them."""

    start: float = 1.0
    final: Optional[float] = None
    updates: int = 0

    @classmethod
    def from_cfg(cls, cfg: ElectraModelConfig | DictConfig | Namespace) -> Self:
        # checkpoints from before the flags: constant, 1.0 before --sampling-temperature
        schedule = cls(safe_getattr(cfg, "sampling_temperature", 1.0), safe_getattr(cfg, "sampling_temperature_final", None),
                       safe_getattr(cfg, "sampling_temperature_updates", 0))
        if not schedule.start > 0:
            raise ValueError(f"--sampling-temperature {schedule.start}: must be above 0 (ELECTRA's is 1)")
        if schedule.final is not None and not schedule.final > 0:
            raise ValueError(f"--sampling-temperature-final {schedule.final}: must be above 0 (ELECTRA's is 1)")
        if schedule.final is not None and not schedule.updates > 0:
            raise ValueError(f"--sampling-temperature-final {schedule.final} needs --sampling-temperature-updates: "
                             "the updates to anneal over, e.g. --max-update's")
        return schedule

    def at(self, update: int) -> float:
        if self.final is None:
            return self.start
        return self.start + (self.final - self.start) * min(update / self.updates, 1.0)


def gumbel_max(logits: torch.Tensor, disallowed: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """One sample per row of softmax(fp32 logits / temperature): argmax(logits / temperature + Gumbel noise), never a
    disallowed symbol."""
    logits = (logits.float() / temperature).masked_fill(disallowed, float("-inf"))
    uniform = torch.rand_like(logits)
    return (logits - torch.log(-torch.log(uniform + 1e-9) + 1e-9)).argmax(-1)


@register_model("electra", dataclass=ElectraModelConfig)
class ElectraModel(AmpBf16, BaseFairseqModel):
    """The generator, the discriminator and the embeddings they share, trained together by one forward."""

    masked_lm_encoder = True  # biofairseq.checkpoints loads it, biofairseq-convert converts it

    def __init__(self, cfg, dictionary, bos=None) -> None:
        """bos: where each document starts, for rows of several (--pack-documents); None for rows of one."""
        super().__init__()
        self.cfg = cfg
        self.padding_idx = dictionary.pad()
        if bos is not None and cfg.attention != "sdpa":
            raise ValueError("--pack-documents needs --attention sdpa; add --attention sdpa")
        self.bos = bos
        width, ffn, heads = generator_shape(cfg)
        e = cfg.embedding_dim
        self.embeddings = Embeddings(len(dictionary), e, cfg.max_positions, self.padding_idx, cfg.dropout)
        self.generator = Tower(cfg, e, width, ffn, heads)
        self.generator_head = GeneratorHead(width, e, self.embeddings.embed_tokens.weight, cfg.activation_fn)
        if cfg.embedding_sharing in ("gdes", "detached"):
            self.discriminator_embeddings = DisentangledEmbeddings(self.embeddings, cfg.dropout,
                                                                   residual=cfg.embedding_sharing == "gdes")
        elif cfg.embedding_sharing == "none":
            self.discriminator_embeddings = Embeddings(len(dictionary), e, cfg.max_positions, self.padding_idx, cfg.dropout)
        else:  # tied: the generator's module is the discriminator's
            self.discriminator_embeddings = None
        self.discriminator = Tower(
            cfg, e, cfg.encoder_embed_dim, cfg.encoder_ffn_embed_dim, cfg.encoder_attention_heads
        )
        self.discriminator_head = DiscriminatorHead(cfg.encoder_embed_dim, cfg.activation_fn)
        # symbols never sampled: a sampled <pad> would read as padding, <mask> or <s> as structure
        self.register_buffer("special", torch.from_numpy(special_symbols(dictionary)), persistent=False)
        self.temperatures = TemperatureSchedule.from_cfg(cfg)
        self.temperature = self.temperatures.at(0)
        self.apply(init_bert_params)
        # a checkpoint saved before --layer-norm-eps existed gets fairseq's
        set_layer_norm_eps(self, safe_getattr(cfg, "layer_norm_eps", DEFAULT_LAYER_NORM_EPS))

    def set_num_updates(self, num_updates: int) -> None:
        """fairseq's task calls this before every training step, and a resumed run with its update count."""
        self.temperature = self.temperatures.at(num_updates)
        super().set_num_updates(num_updates)

    @classmethod
    def build_model(cls, cfg: ElectraModelConfig | DictConfig, task: FairseqTask) -> Self:
        model = cls(cfg, task.source_dictionary, packed_bos(task))
        model.amp_bf16 = amp_bf16_flag(cfg)  # False for checkpoints from before the flag
        return model

    def max_positions(self) -> int:
        return self.cfg.max_positions

    @property
    def reads_packed_rows(self) -> bool:
        return self.bos is not None

    def _padding(self, tokens, where):
        """The padding mask of rows of one document; packed rows need none (padding is one of their documents)."""
        return tokens.eq(self.padding_idx) if where is None else None

    def _positions_and_documents(self, tokens, segments):
        """Positions (packed rows: from each <s>) and where the documents are (None: rows of one)."""
        if self.bos is None:
            return utils.make_positions(tokens, self.padding_idx), None
        return (document_positions(tokens, self.bos, self.padding_idx),
                documents(tokens, segments, self.bos, self.padding_idx))

    # ---- the towers one at a time (conversion, parity, diagnostics); segments: a packed batch's

    def generator_features(self, tokens: torch.Tensor,
                           segments: dict[str, torch.Tensor | int] | None = None) -> torch.Tensor:
        positions, where = self._positions_and_documents(tokens, segments)
        return self.generator(self.embeddings(tokens, positions), self._padding(tokens, where), where)

    def discriminator_features(self, tokens: torch.Tensor,
                               segments: dict[str, torch.Tensor | int] | None = None) -> torch.Tensor:
        positions, where = self._positions_and_documents(tokens, segments)
        if self.discriminator_embeddings is None:
            x = self.embeddings(tokens, positions)
        elif isinstance(self.discriminator_embeddings, DisentangledEmbeddings):
            x = self.discriminator_embeddings(tokens, positions, self.embeddings)
        else:
            x = self.discriminator_embeddings(tokens, positions)
        return self.discriminator(x, self._padding(tokens, where), where)

    def discriminator_embedding_weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(token, position) tables the discriminator computes with; GDES's sum materialised."""
        if isinstance(self.discriminator_embeddings, DisentangledEmbeddings):
            return self.discriminator_embeddings.weights(self.embeddings)
        return (self.discriminator_embeddings or self.embeddings).weights()

    # ---- one training step's forward

    def forward(self, src_tokens: torch.Tensor, targets: torch.Tensor,
                segments: dict[str, torch.Tensor | int] | None = None, target_positions: torch.Tensor | None = None,
                **kwargs: Any) -> dict[str, torch.Tensor]:
        """src_tokens: the masked input; targets: the originals at the selected positions, padding elsewhere;
        target_positions: those positions in the flattened B x T batch (``biofairseq.data.host_counts``; without
        them they are found from the targets, by a host-device synchronisation).

        Returns the generator's logits at the selected positions (in row-major order), its samples there, the
        discriminator's logit per token, which tokens were replaced (sample != original) and the
        discriminator's last hidden states.
        """
        if target_positions is None:
            target_positions = flat_positions(targets.ne(self.padding_idx))
        with self.autocast():  # --amp-bf16: the towers in bf16; the generator's logits and their sampling in fp32
            features = self.generator_features(src_tokens, segments)
            generator_logits = self.generator_head(at_positions(features, target_positions))
            with torch.no_grad():
                samples = gumbel_max(generator_logits.detach(), self.special, self.temperature)
                corrupted = src_tokens.flatten().index_copy(0, target_positions, samples).view_as(src_tokens)
                replaced = corrupted.ne(torch.where(targets.ne(self.padding_idx), targets, src_tokens))
            hidden = self.discriminator_features(corrupted, segments)  # <s> and padding where they were
            return {
                "generator_logits": generator_logits,
                "samples": samples,
                "discriminator_logits": self.discriminator_head(hidden),
                "replaced": replaced,
                "discriminator_hidden": hidden,
            }


def _preset(name, layers, width, heads, embedding_dim, fraction):
    def architecture(args: Namespace | DictConfig) -> None:
        args.encoder_layers = safe_getattr(args, "encoder_layers", layers)
        args.encoder_embed_dim = safe_getattr(args, "encoder_embed_dim", width)
        args.encoder_ffn_embed_dim = safe_getattr(args, "encoder_ffn_embed_dim", 4 * width)
        args.encoder_attention_heads = safe_getattr(args, "encoder_attention_heads", heads)
        args.embedding_dim = safe_getattr(args, "embedding_dim", embedding_dim)
        args.generator_width_fraction = safe_getattr(args, "generator_width_fraction", fraction)

    architecture.__name__ = f"{name}_architecture"
    architecture.__doc__ = (f"{name}: discriminator {layers} x {width} ({heads} heads), embeddings {embedding_dim}, "
                            f"generator {fraction:.3g} of the width.")
    return register_model_architecture("electra", name)(architecture)


for _name, _shape in ELECTRA.items():
    _preset(_name, **_shape)
