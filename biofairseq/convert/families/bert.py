"""BERT (``BertForMaskedLM``, ``BertForPreTraining``): BETO, PubMedBERT, BioBERT and most clinical models.

A post-LN encoder with an embedding LayerNorm, as fairseq's RoBERTa (``bio_roberta_*``), with three differences the
conversion carries: positions counted from 0 (fairseq's table has padding_idx + 1 rows before them), token type 0
added to every token (folded into the positions), LayerNorm epsilon 1e-12 (``--layer-norm-eps``). Its WordPiece
``vocab.txt`` puts [PAD] at 0 and [UNK] [CLS] [SEP] [MASK] at 100-103: the ids are renumbered for fairseq's
dictionary ([CLS] [PAD] [SEP] [UNK] as <s> <pad> </s> <unk> at 0-3, the others in their order), and to-hf gives the
model back with its own vocab.txt and ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Optional

from biofairseq.convert import ConvertError
from biofairseq.convert.families.base import Family, common_problems, encoder_config, encoder_settings
from biofairseq.convert.layouts import FAIRSEQ_ENCODER, FAIRSEQ_LAYER, Layout

if TYPE_CHECKING:
    from pathlib import Path

    from transformers import PretrainedConfig, PreTrainedModel

    from biofairseq.checkpoints import FairseqRoberta
    from biofairseq.convert.families import Source
    from biofairseq.convert.vocabulary import Vocabulary

FIXED = (
    (FAIRSEQ_ENCODER + "embed_tokens.weight", "{b}.embeddings.word_embeddings.weight"),
    (FAIRSEQ_ENCODER + "embed_positions.weight", "{b}.embeddings.position_embeddings.weight"),
    ("encoder.lm_head.weight", "cls.predictions.decoder.weight"),
    ("encoder.lm_head.bias", "cls.predictions.bias"),
)
HEAD = (("encoder.lm_head.dense", "cls.predictions.transform.dense"),
        ("encoder.lm_head.layer_norm", "cls.predictions.transform.LayerNorm"))
COPIES = (("cls.predictions.decoder.bias", "cls.predictions.bias"),)

LAYOUT = Layout(
    "BERT (post-LN)", "BertForMaskedLM", "BertConfig", "bert",
    norms=(
        (FAIRSEQ_ENCODER + "layernorm_embedding", "{b}.embeddings.LayerNorm"),
        (FAIRSEQ_LAYER + "self_attn_layer_norm", "{b}.encoder.layer.{i}.attention.output.LayerNorm"),
        (FAIRSEQ_LAYER + "final_layer_norm", "{b}.encoder.layer.{i}.output.LayerNorm"),
    ) + HEAD,
    fixed=FIXED, copies=COPIES, positions_from_zero=True, also_reads=("BertForPreTraining",),
)


class BERT(Family):
    name = "BERT"
    model_types = ("bert",)
    fairseq_model = "bio_roberta"
    presets = ("bio_roberta_tiny", "bio_roberta_small", "bio_roberta_base", "beto_base", "bio_roberta_large")
    renumber = True
    recipes = ("bsc_bio_es", "beto")
    published = "BETO, PubMedBERT, BioBERT, BlueBERT, Bio_ClinicalBERT, SciBERT"
    reads_doc = ("`BertForMaskedLM`, `BertForPreTraining` (next-sentence head and pooler left out, with a note); a "
                 "`BertModel` or a fine-tuned BERT with a fresh LM head, with a note")
    fairseq_doc = "`bio_roberta_*` post-LN, `--layer-norm-eps 1e-12`"
    writes_doc = "`BertForMaskedLM`"
    vocabulary_doc = "WordPiece `vocab.txt`, renumbered for fairseq, given back as published"
    _layout = LAYOUT  # its one layout (Megatron-BERT: its own)

    def all_layouts(self) -> tuple[Layout, ...]:
        return (self._layout,)

    def problems(self, config: PretrainedConfig, source: Optional[Source] = None) -> list[str]:
        return common_problems(config)

    def settings(self, config: PretrainedConfig, source: Optional[Source] = None,
                 models: Sequence[tuple[Layout, PreTrainedModel]] = ()) -> dict[str, Any]:
        return {**encoder_settings(config, config.max_position_embeddings),
                "encoder_normalize_before": self._layout.normalize_before,
                "layernorm_embedding": self._layout.layernorm_embedding,
                "untie_weights_roberta": not config.tie_word_embeddings}

    def read(self, hf_dir: str | Path, config: PretrainedConfig,
             options: Source) -> tuple[list[tuple[Layout, PreTrainedModel]], list[str]]:
        models, notes = super().read(hf_dir, config, options)
        if "BertForPreTraining" in (config.architectures or []):
            notes.append("BertForPreTraining: its next-sentence head and pooler are left out (masked LM only)")
        return models, notes

    def layout_for(self, model_class: str, config: PretrainedConfig) -> Optional[Layout]:
        return self._layout if model_class in (self._layout.model_class, *self._layout.also_reads) else None

    def writes(self, fairseq: FairseqRoberta, vocabulary: Vocabulary) -> bool:
        args = fairseq.args
        return (fairseq.model_name in ("roberta", "bio_roberta") and vocabulary.kind == "wordpiece"
                and (bool(args.encoder_normalize_before), bool(args.layernorm_embedding))
                == (self._layout.normalize_before, self._layout.layernorm_embedding))

    def layouts(self, fairseq: FairseqRoberta, generator: bool = False) -> list[tuple[Layout, str]]:
        from biofairseq.convert.families.roberta import unconvertible

        problems = unconvertible(fairseq.args)
        if problems:
            raise ConvertError(f"{', '.join(problems)}: no transformers class computes this encoder")
        return [(self._layout, "")]

    def hf_config(self, fairseq: FairseqRoberta, layout: Layout, positions: int, ids: dict[str, int]) -> dict[str, Any]:
        args = fairseq.args
        return dict(**encoder_config(args, fairseq.dictionary, layout, ids), hidden_size=args.encoder_embed_dim,
                    num_attention_heads=args.encoder_attention_heads, intermediate_size=args.encoder_ffn_embed_dim,
                    tie_word_embeddings=not args.untie_weights_roberta, type_vocab_size=2,
                    max_position_embeddings=positions - fairseq.dictionary.pad() - 1)

    def card(self, fairseq: FairseqRoberta) -> tuple[str, list[str], Optional[str], Optional[str]]:
        return ("masked language model", ["fill-mask", self.name.lower()], "fill-mask", None)
