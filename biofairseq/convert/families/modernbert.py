"""ModernBERT (``ModernBertForMaskedLM``): ModernBERT, BioClinical ModernBERT.

``bio_modernbert`` (``biofairseq.models.modernbert``) is ModernBERT's block: rotary positions (no table), GeGLU, no
biases but the decoder's, every n-th layer global and the others a local window. Its tokenizer puts its special
tokens after the vocabulary: the ids are renumbered for fairseq's dictionary. Parity is checked past the window too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Optional

from biofairseq.convert.families.base import Family, fairseq_activation, layer_norm_eps
from biofairseq.convert.layouts import ACTIVATIONS, Layout

if TYPE_CHECKING:
    from transformers import PretrainedConfig, PreTrainedModel

    from biofairseq.checkpoints import FairseqRoberta
    from biofairseq.convert.families import Source
    from biofairseq.convert.vocabulary import Vocabulary

LAYOUT = Layout(
    "ModernBERT", "ModernBertForMaskedLM", "ModernBertConfig", "model",
    norms=(("encoder.embed_norm", "{b}.embeddings.norm"), ("encoder.final_norm", "{b}.final_norm"),
           ("encoder.lm_head.dense", "head.dense"), ("encoder.lm_head.norm", "head.norm")),
    layer="encoder.layers.{i}.", hf_layer="{b}.layers.{i}.", biases=False, long_context=True, normalize_before=True,
    per_layer=(("attn_norm", "attn_norm"), ("qkv_proj", "attn.Wqkv"), ("out_proj", "attn.Wo"),
               ("mlp_norm", "mlp_norm"), ("ffn_in", "mlp.Wi"), ("ffn_out", "mlp.Wo")),
    fixed=(("encoder.embed_tokens.weight", "{b}.embeddings.tok_embeddings.weight"),
           ("encoder.lm_head.weight", "decoder.weight"), ("encoder.lm_head.bias", "decoder.bias")),
)


def _layer_types(config):
    every = config.global_attn_every_n_layers if hasattr(config, "global_attn_every_n_layers") else 3
    return every, ["full_attention" if i % every == 0 else "sliding_attention" for i in range(config.num_hidden_layers)]


class ModernBERT(Family):
    name = "ModernBERT"
    model_types = ("modernbert",)
    fairseq_model = "bio_modernbert"
    presets = ("bio_modernbert_tiny", "bio_modernbert_base", "bio_modernbert_large")
    renumber = True
    recipes = ("modernbert",)
    published = "ModernBERT base and large, BioClinical ModernBERT"
    reads_doc = "`ModernBertForMaskedLM`"
    fairseq_doc = "`bio_modernbert_*`"
    writes_doc = "`ModernBertForMaskedLM`"
    vocabulary_doc = "byte-level BPE, renumbered ([below](#modernbert))"
    eps = "norm_eps"

    def all_layouts(self) -> tuple[Layout, ...]:
        return (LAYOUT,)

    def problems(self, config: PretrainedConfig, source: Optional[Source] = None) -> list[str]:
        rope = config.rope_parameters
        return [name for name, wrong in (
            (f"hidden_activation {config.hidden_activation}", fairseq_activation(config.hidden_activation) is None),
            (f"classifier_activation {config.classifier_activation} (fairseq's head uses hidden_activation's)",
             config.classifier_activation != config.hidden_activation),
            ("biases (norm_bias, attention_bias, mlp_bias or classifier_bias)",
             config.norm_bias or config.attention_bias or config.mlp_bias or config.classifier_bias),
            ("decoder_bias false", not config.decoder_bias),
            ("untied word embeddings", not config.tie_word_embeddings),
            (f"layer_types {config.layer_types} (not every n-th layer global from the first)",
             list(config.layer_types) != _layer_types(config)[1]),
            ("rope scaling", any(rope[t].get("rope_type", "default") != "default" for t in rope)),
        ) if wrong]

    def settings(self, config: PretrainedConfig, source: Optional[Source] = None,
                 models: Sequence[tuple[Layout, PreTrainedModel]] = ()) -> dict[str, Any]:
        rope = config.rope_parameters
        return {
            "encoder_layers": config.num_hidden_layers, "encoder_embed_dim": config.hidden_size,
            "encoder_ffn_embed_dim": config.intermediate_size, "encoder_attention_heads": config.num_attention_heads,
            "local_attention": config.local_attention, "global_attn_every_n_layers": _layer_types(config)[0],
            "global_rope_theta": float(rope["full_attention"]["rope_theta"]),
            "local_rope_theta": float(rope["sliding_attention"]["rope_theta"]),
            "activation_fn": fairseq_activation(config.hidden_activation), "max_positions": config.max_position_embeddings,
            "dropout": float(config.embedding_dropout), "activation_dropout": float(config.mlp_dropout),
            "attention_dropout": float(config.attention_dropout), "layer_norm_eps": float(config.norm_eps),
        }

    def layout_for(self, model_class: str, config: PretrainedConfig) -> Optional[Layout]:
        return LAYOUT if model_class == LAYOUT.model_class else None

    def writes(self, fairseq: FairseqRoberta, vocabulary: Vocabulary) -> bool:
        return fairseq.model_name == "bio_modernbert"

    def layouts(self, fairseq: FairseqRoberta, generator: bool = False) -> list[tuple[Layout, str]]:
        return [(LAYOUT, "")]

    def hf_config(self, fairseq: FairseqRoberta, layout: Layout, positions: int, ids: dict[str, int]) -> dict[str, Any]:
        args, dictionary = fairseq.args, fairseq.dictionary
        activation = ACTIVATIONS[args.activation_fn]
        return dict(
            vocab_size=len(dictionary), hidden_size=args.encoder_embed_dim, intermediate_size=args.encoder_ffn_embed_dim,
            num_hidden_layers=args.encoder_layers, num_attention_heads=args.encoder_attention_heads,
            hidden_activation=activation, classifier_activation=activation, max_position_embeddings=args.max_positions,
            global_attn_every_n_layers=args.global_attn_every_n_layers, local_attention=args.local_attention,
            global_rope_theta=args.global_rope_theta, local_rope_theta=args.local_rope_theta,
            embedding_dropout=args.dropout, mlp_dropout=args.activation_dropout, attention_dropout=args.attention_dropout,
            norm_eps=layer_norm_eps(args), norm_bias=False, attention_bias=False, mlp_bias=False, decoder_bias=True,
            classifier_bias=False, tie_word_embeddings=True, pad_token_id=ids["pad"], bos_token_id=ids["bos"],
            eos_token_id=ids["eos"], cls_token_id=ids["bos"], sep_token_id=ids["eos"], architectures=[layout.model_class],
        )

    def card(self, fairseq: FairseqRoberta) -> tuple[str, list[str], Optional[str], Optional[str]]:
        return ("masked language model", ["fill-mask", "modernbert"], "fill-mask", None)
