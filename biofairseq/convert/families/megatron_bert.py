"""Megatron-BERT (``MegatronBertForMaskedLM``): BioMegatron.

BERT's embeddings, positions, token types, WordPiece vocabulary and head, with Megatron-LM's "rearranged" LayerNorms:
one before each sub-layer (``attention.ln``, ``ln``), one after the last layer (``encoder.ln``), none on the
embeddings. That is fairseq's pre-LN encoder without an embedding LayerNorm (``bio_megatron_*``).
"""

from biofairseq.convert.families.bert import BERT, FIXED, HEAD
from biofairseq.convert.layouts import FAIRSEQ_ENCODER, FAIRSEQ_LAYER, Layout

LAYOUT = Layout(
    "Megatron-BERT (pre-LN, no embedding LayerNorm)", "MegatronBertForMaskedLM", "MegatronBertConfig", "bert",
    normalize_before=True, layernorm_embedding=False,
    norms=(
        (FAIRSEQ_LAYER + "self_attn_layer_norm", "{b}.encoder.layer.{i}.attention.ln"),
        (FAIRSEQ_LAYER + "final_layer_norm", "{b}.encoder.layer.{i}.ln"),
        (FAIRSEQ_ENCODER + "layer_norm", "{b}.encoder.ln"),
    ) + HEAD,
    fixed=FIXED, copies=(("cls.predictions.decoder.bias", "cls.predictions.bias"),), positions_from_zero=True,
)


class MegatronBERT(BERT):
    name = "Megatron-BERT"
    model_types = ("megatron-bert",)
    presets = ("bio_megatron_tiny", "bio_megatron_345m", "bio_megatron_800m", "bio_megatron_1_2b")
    recipes = ("biomegatron",)
    published = "BioMegatron (345m, cased and uncased, 30k and 50k vocabularies), Megatron-BERT"
    reads_doc = "`MegatronBertForMaskedLM`"
    fairseq_doc = "`bio_megatron_*` (pre-LN, no embedding LayerNorm), `--layer-norm-eps 1e-12`"
    writes_doc = "`MegatronBertForMaskedLM`"
    vocabulary_doc = "WordPiece, as BERT's"
    _layout = LAYOUT  # its one layout (Megatron-BERT: its own)
