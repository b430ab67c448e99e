"""RoBERTa and its kin (XLM-R, CamemBERT; RoBERTa-PreLayerNorm and XLM-R-XL, pre-LN): fairseq's own layout.

fairseq's RoBERTa (``bio_roberta_*``, ``roberta_*``) in three transformers classes by where its LayerNorms are.
transformers counts RoBERTa's positions from padding_idx + 1, as fairseq does, and its tokenizers put <s> <pad> </s>
<unk> at 0-3, fairseq's order: weights and ids convert as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Optional

from biofairseq.convert import ConvertError
from biofairseq.convert.families.base import Family, common_problems, encoder_config, encoder_settings
from biofairseq.convert.layouts import FAIRSEQ_ENCODER, FAIRSEQ_LAYER, Layout

if TYPE_CHECKING:
    from argparse import Namespace

    from omegaconf import DictConfig
    from transformers import PretrainedConfig, PreTrainedModel

    from biofairseq.checkpoints import FairseqRoberta
    from biofairseq.convert.families import Source
    from biofairseq.convert.vocabulary import Vocabulary

FIXED = (
    (FAIRSEQ_ENCODER + "embed_tokens.weight", "{b}.embeddings.word_embeddings.weight"),
    (FAIRSEQ_ENCODER + "embed_positions.weight", "{b}.embeddings.position_embeddings.weight"),
    ("encoder.lm_head.weight", "lm_head.decoder.weight"),
    ("encoder.lm_head.bias", "lm_head.bias"),
)
HEAD = (("encoder.lm_head.dense", "lm_head.dense"), ("encoder.lm_head.layer_norm", "lm_head.layer_norm"))
COPIES = (("lm_head.decoder.bias", "lm_head.bias"),)

POST_LN = Layout(
    "post-LN (RoBERTa)", "RobertaForMaskedLM", "RobertaConfig", "roberta",
    norms=(
        (FAIRSEQ_ENCODER + "layernorm_embedding", "{b}.embeddings.LayerNorm"),
        (FAIRSEQ_LAYER + "self_attn_layer_norm", "{b}.encoder.layer.{i}.attention.output.LayerNorm"),
        (FAIRSEQ_LAYER + "final_layer_norm", "{b}.encoder.layer.{i}.output.LayerNorm"),
    ) + HEAD,
    fixed=FIXED, copies=COPIES, also_reads=("XLMRobertaForMaskedLM", "CamembertForMaskedLM"),
)
PRE_LN = Layout(
    "pre-LN with embedding LayerNorm (RoBERTa-PreLayerNorm)", "RobertaPreLayerNormForMaskedLM",
    "RobertaPreLayerNormConfig", "roberta_prelayernorm", normalize_before=True,
    norms=(
        (FAIRSEQ_ENCODER + "layernorm_embedding", "{b}.embeddings.LayerNorm"),
        (FAIRSEQ_LAYER + "self_attn_layer_norm", "{b}.encoder.layer.{i}.attention.LayerNorm"),
        (FAIRSEQ_LAYER + "final_layer_norm", "{b}.encoder.layer.{i}.intermediate.LayerNorm"),
        (FAIRSEQ_ENCODER + "layer_norm", "{b}.LayerNorm"),
    ) + HEAD,
    fixed=FIXED, copies=COPIES,
)
PRE_LN_NO_EMBEDDING_LN = Layout(
    "pre-LN without embedding LayerNorm (XLM-RoBERTa-XL)", "XLMRobertaXLForMaskedLM", "XLMRobertaXLConfig", "roberta",
    normalize_before=True, layernorm_embedding=False,
    norms=(
        (FAIRSEQ_LAYER + "self_attn_layer_norm", "{b}.encoder.layer.{i}.attention.self_attn_layer_norm"),
        (FAIRSEQ_LAYER + "final_layer_norm", "{b}.encoder.layer.{i}.LayerNorm"),
        (FAIRSEQ_ENCODER + "layer_norm", "{b}.encoder.LayerNorm"),
    ) + HEAD,
    fixed=FIXED, copies=COPIES,
)
LAYOUTS = (POST_LN, PRE_LN, PRE_LN_NO_EMBEDDING_LN)


def layout_for_fairseq(args: Namespace | DictConfig) -> Optional[Layout]:
    """The layout of a fairseq RoBERTa's LayerNorms; None for post-LN without an embedding LayerNorm, which no
    transformers class computes."""
    for layout in LAYOUTS:
        if (layout.normalize_before, layout.layernorm_embedding) == (bool(args.encoder_normalize_before),
                                                                     bool(args.layernorm_embedding)):
            return layout
    return None


def unconvertible(args: Namespace | DictConfig) -> list[str]:
    """fairseq options of a RoBERTa-like encoder that no transformers class computes, named."""
    from fairseq.utils import safe_getattr

    problems = []
    if not safe_getattr(args, "no_scale_embedding", True):
        problems.append("scaled embeddings")
    if not safe_getattr(args, "encoder_learned_pos", True) or safe_getattr(args, "no_token_positional_embeddings", False):
        problems.append("non-learned positions")
    if safe_getattr(args, "adaptive_input", False):
        problems.append("adaptive input")
    return problems


class RoBERTa(Family):
    name = "RoBERTa"
    model_types = ("roberta", "xlm-roberta", "camembert", "roberta-prelayernorm", "xlm-roberta-xl")
    fairseq_model = "bio_roberta"
    presets = ("bio_roberta_tiny", "bio_roberta_base", "bio_roberta_large", "bio_megatron_tiny", "bio_megatron_345m",
               "roberta_prenorm", "roberta")
    recipes = ("bsc_bio_es", "beto", "biomegatron")
    published = "RoBERTa, XLM-R, CamemBERT, bsc-bio-es, RoBERTa-PreLayerNorm, XLM-R-XL"
    reads_doc = ("`RobertaForMaskedLM`, `XLMRobertaForMaskedLM`, `CamembertForMaskedLM`; pre-LN: "
                 "`RobertaPreLayerNormForMaskedLM`, `XLMRobertaXLForMaskedLM`")
    fairseq_doc = ("`bio_roberta_*` post-LN (also fairseq's `roberta_*`); pre-LN: `--encoder-normalize-before`, "
                   "`bio_megatron_*` on a learned vocabulary")
    writes_doc = "`RobertaForMaskedLM`, or the pre-LN class of its LayerNorms ([`to-hf`](#to-hf))"
    vocabulary_doc = "byte-level BPE or SentencePiece, ids as they are"

    def all_layouts(self) -> tuple[Layout, ...]:
        return LAYOUTS

    def problems(self, config: PretrainedConfig, source: Optional[Source] = None) -> list[str]:
        pad, rows = config.pad_token_id, config.max_position_embeddings
        return common_problems(config) + [name for name, wrong in (
            (f"pad_token_id {pad} (RoBERTa's learned positions start at pad_token_id + 1, fairseq's at 2: it needs 1)",
             pad != 1),
            (f"max_position_embeddings {rows} (positions start at pad_token_id + 1 = 2: it leaves none)",
             pad == 1 and rows <= 2),
        ) if wrong]

    def max_length(self, config: PretrainedConfig) -> int:
        return config.max_position_embeddings - config.pad_token_id - 1

    def settings(self, config: PretrainedConfig, source: Optional[Source] = None,
                 models: Sequence[tuple[Layout, PreTrainedModel]] = ()) -> dict[str, Any]:
        layout = {"roberta-prelayernorm": PRE_LN, "xlm-roberta-xl": PRE_LN_NO_EMBEDDING_LN}.get(config.model_type, POST_LN)
        return {**encoder_settings(config, config.max_position_embeddings - config.pad_token_id - 1),
                "encoder_normalize_before": layout.normalize_before, "layernorm_embedding": layout.layernorm_embedding,
                "untie_weights_roberta": not config.tie_word_embeddings}

    def layout_for(self, model_class: str, config: PretrainedConfig) -> Optional[Layout]:
        return next((l for l in LAYOUTS if model_class in (l.model_class, *l.also_reads)), None)

    def writes(self, fairseq: FairseqRoberta, vocabulary: Vocabulary) -> bool:
        return fairseq.model_name in ("roberta", "bio_roberta") and vocabulary.kind != "wordpiece"

    def layouts(self, fairseq: FairseqRoberta, generator: bool = False) -> list[tuple[Layout, str]]:
        problems = unconvertible(fairseq.args)
        layout = layout_for_fairseq(fairseq.args)
        if layout is None:
            problems.append("post-LN without an embedding LayerNorm")
        if problems:
            raise ConvertError(f"{', '.join(problems)}: no transformers class computes this encoder")
        return [(layout, "")]

    def hf_config(self, fairseq: FairseqRoberta, layout: Layout, positions: int, ids: dict[str, int]) -> dict[str, Any]:
        args = fairseq.args
        return dict(**encoder_config(args, fairseq.dictionary, layout, ids), hidden_size=args.encoder_embed_dim,
                    num_attention_heads=args.encoder_attention_heads, intermediate_size=args.encoder_ffn_embed_dim,
                    tie_word_embeddings=not args.untie_weights_roberta, type_vocab_size=1,
                    max_position_embeddings=positions)
