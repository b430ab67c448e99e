"""Named encoder shapes of the papers: RoBERTa (post-LN), BETO's BERT-base, BioMegatron's pre-LN encoders.

They are registered on ``bio_roberta``, fairseq's own RoBERTa model with the two activation-memory flags that
fairseq's transformer encoder implements but RoBERTa's command line does not expose, ``--attention`` and
``--amp-bf16``, and built for packed rows when its task packs them (``--pack-documents``). The weights,
checkpoints and conversions are RoBERTa's.
"""

from argparse import ArgumentParser, Namespace
from typing import Any, Self

import torch
from fairseq.data import Dictionary
from fairseq.models import register_model, register_model_architecture
from fairseq.models.roberta.model import RobertaEncoder, RobertaModel, base_architecture
from fairseq.modules.transformer_sentence_encoder import init_bert_params
from fairseq.tasks import FairseqTask
from fairseq.utils import safe_getattr, safe_hasattr
from omegaconf import DictConfig, OmegaConf

from biofairseq.data.host_counts import at_positions
from biofairseq.models.attention import ATTENTION_CHOICES, DEFAULT_ATTENTION
from biofairseq.models.documents import packed_bos
from biofairseq.models.encoders import Encoder, PackedRowsEncoder
from biofairseq.models.layer_norms import DEFAULT as DEFAULT_LAYER_NORM_EPS
from biofairseq.models.layer_norms import HELP as LAYER_NORM_EPS_HELP
from biofairseq.models.layer_norms import set_layer_norm_eps
from biofairseq.models.precision import AMP_BF16_HELP, AmpBf16, amp_bf16_flag
from biofairseq.model_shapes import BIO_ROBERTA


class BioRobertaEncoder(RobertaEncoder):
    """RoBERTa's encoder (embeddings, layers, LM head) whose transformer is ours: built with the chosen attention,
    for packed rows when ``bos`` (where documents start) is given; the batch's ``segments`` go down to it."""

    def __init__(self, args: Namespace | DictConfig, dictionary: Dictionary, attention: str,
                 bos: int | None = None) -> None:
        self.attention, self.bos = attention, bos  # RobertaEncoder's __init__ calls build_encoder
        super().__init__(args, dictionary)

    def build_encoder(self, args: Namespace | DictConfig, dictionary: Dictionary,
                      embed_tokens: torch.nn.Embedding) -> Encoder:
        if self.bos is None:
            encoder = Encoder(args, dictionary, embed_tokens, self.attention)
        else:
            encoder = PackedRowsEncoder(args, dictionary, embed_tokens, self.attention, self.bos)
        encoder.apply(init_bert_params)
        return encoder

    def forward(self, src_tokens: torch.Tensor, features_only: bool = False, return_all_hiddens: bool = False,
                masked_tokens: torch.Tensor | None = None, segments: dict[str, torch.Tensor | int] | None = None,
                **unused: Any) -> tuple[torch.Tensor, dict[str, list[torch.Tensor] | None]]:
        x, extra = self.extract_features(src_tokens, return_all_hiddens=return_all_hiddens, segments=segments)
        if not features_only:
            x = self.output_layer(x, masked_tokens=masked_tokens)
        return x, extra

    def extract_features(self, src_tokens: torch.Tensor, return_all_hiddens: bool = False,
                         segments: dict[str, torch.Tensor | int] | None = None,
                         **kwargs: Any) -> tuple[torch.Tensor, dict[str, list[torch.Tensor] | None]]:
        # RobertaEncoder's, which has no argument for the segments
        encoder_out = self.sentence_encoder(src_tokens, return_all_hiddens=return_all_hiddens,
                                            token_embeddings=kwargs.get("token_embeddings"), segments=segments)
        features = encoder_out["encoder_out"][0].transpose(0, 1)  # T x B x C -> B x T x C
        return features, {"inner_states": encoder_out["encoder_states"] if return_all_hiddens else None}


@register_model("bio_roberta")
class BioRobertaModel(AmpBf16, RobertaModel):
    """RoBERTa, with --checkpoint-activations, --offload-activations, --attention, --amp-bf16 and --layer-norm-eps on
    the command line."""

    takes_target_positions = True  # masked_tokens may be flat positions (see forward)

    @staticmethod
    def add_args(parser: ArgumentParser) -> None:
        RobertaModel.add_args(parser)
        parser.add_argument("--checkpoint-activations", action="store_true",
                            help="recompute each layer's activations in the backward pass instead of keeping them: "
                            "less memory (BioMegatron-size encoders), about a third more compute")
        parser.add_argument("--offload-activations", action="store_true",
                            help="with --checkpoint-activations, keep the checkpointed activations in CPU memory")
        parser.add_argument("--attention", choices=ATTENTION_CHOICES, default=DEFAULT_ATTENTION,
                            help="self-attention: sdpa, torch's fused scaled_dot_product_attention; fairseq, fairseq's "
                            "MultiheadAttention (default: %(default)s); same weights and checkpoints either way")
        parser.add_argument("--amp-bf16", action="store_true", help=AMP_BF16_HELP)
        parser.add_argument("--layer-norm-eps", type=float, help=LAYER_NORM_EPS_HELP)

    def forward(self, src_tokens: torch.Tensor, features_only: bool = False, return_all_hiddens: bool = False,
                classification_head_name: str | None = None, masked_tokens: torch.Tensor | None = None,
                **kwargs: Any) -> tuple[torch.Tensor, dict[str, list[torch.Tensor] | None]]:
        """fairseq's, where ``masked_tokens`` may also be the positions to predict in the flattened B x T batch
        (``biofairseq.data.host_counts``): a boolean mask selects them by a host-device synchronisation."""
        with self.autocast():
            if masked_tokens is None or masked_tokens.dtype == torch.bool or features_only or classification_head_name:
                return super().forward(src_tokens, features_only, return_all_hiddens, classification_head_name,
                                       masked_tokens=masked_tokens, **kwargs)
            x, extra = super().forward(src_tokens, features_only=True, return_all_hiddens=return_all_hiddens, **kwargs)
            return self.encoder.output_layer(at_positions(x, masked_tokens)), extra

    @property
    def reads_packed_rows(self) -> bool:
        return isinstance(self.encoder.sentence_encoder, PackedRowsEncoder)

    @classmethod
    def build_model(cls, args: Namespace | DictConfig, task: FairseqTask) -> Self:
        # RobertaModel.build_model, with our encoder
        if OmegaConf.is_config(args):
            OmegaConf.set_struct(args, False)
        base_architecture(args)
        if not safe_hasattr(args, "max_positions"):
            if not safe_hasattr(args, "tokens_per_sample"):
                args.tokens_per_sample = task.max_positions()
            args.max_positions = args.tokens_per_sample
        # a checkpoint saved before --attention existed gets the default
        attention = safe_getattr(args, "attention", DEFAULT_ATTENTION)
        encoder = BioRobertaEncoder(args, task.source_dictionary, attention, packed_bos(task))
        if OmegaConf.is_config(args):
            OmegaConf.set_struct(args, True)
        model = cls(args, encoder)
        model.amp_bf16 = amp_bf16_flag(args)
        # a checkpoint saved before --layer-norm-eps existed gets fairseq's
        return set_layer_norm_eps(model, safe_getattr(args, "layer_norm_eps", DEFAULT_LAYER_NORM_EPS))


def _preset(name, layers, embed_dim, ffn_dim, heads, pre_ln=False):
    def architecture(args: Namespace | DictConfig) -> None:
        args.encoder_layers = safe_getattr(args, "encoder_layers", layers)
        args.encoder_embed_dim = safe_getattr(args, "encoder_embed_dim", embed_dim)
        args.encoder_ffn_embed_dim = safe_getattr(args, "encoder_ffn_embed_dim", ffn_dim)
        args.encoder_attention_heads = safe_getattr(args, "encoder_attention_heads", heads)
        # 512 positions + padding_idx + 1 = the 514 position embeddings of the released models.
        args.max_positions = safe_getattr(args, "max_positions", 512)
        if pre_ln:  # Megatron's "rearranged" layer norm: before each sublayer, one after the last layer, none on the embeddings
            args.encoder_normalize_before = safe_getattr(args, "encoder_normalize_before", True)
            args.layernorm_embedding = safe_getattr(args, "layernorm_embedding", False)
        args.checkpoint_activations = safe_getattr(args, "checkpoint_activations", False)
        args.offload_activations = safe_getattr(args, "offload_activations", False)
        args.layer_norm_eps = safe_getattr(args, "layer_norm_eps", DEFAULT_LAYER_NORM_EPS)
        base_architecture(args)  # dropout 0.1, attention dropout 0.1, GELU, tied output (and post-LN unless pre_ln)

    norm = "pre-LN" if pre_ln else "post-LN"
    architecture.__name__ = f"{name}_architecture"
    architecture.__doc__ = f"{name}: {layers} layers, {embed_dim} hidden, {ffn_dim} FFN, {heads} heads, {norm}."
    return register_model_architecture("bio_roberta", name)(architecture)


for _name, _shape in BIO_ROBERTA.items():
    _preset(_name, **_shape)
