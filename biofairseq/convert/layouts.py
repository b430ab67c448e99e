"""Which transformers class holds which fairseq RoBERTa encoder, and how their parameters are named.

A layout is data: the fairseq flags it stands for, the transformers classes, and the name pairs. Adding an
encoder family (BioMegatron's, ELECTRA's) means adding a layout here, not another converter.
"""

from dataclasses import dataclass

FAIRSEQ_ENCODER = "encoder.sentence_encoder."
FAIRSEQ_LAYER = FAIRSEQ_ENCODER + "layers.{i}."

# fairseq activation_fn -> transformers hidden_act, where both compute the same function.
ACTIVATIONS = {"gelu": "gelu", "relu": "relu", "gelu_accurate": "gelu_new", "tanh": "tanh", "linear": "linear"}


@dataclass(frozen=True)
class Layout:
    name: str
    model_class: str  # transformers *ForMaskedLM class
    config_class: str
    base: str  # attribute of the transformers encoder inside the MaskedLM model
    normalize_before: bool  # fairseq --encoder-normalize-before
    layernorm_embedding: bool  # fairseq layernorm_embedding
    norms: tuple  # (fairseq name, transformers name) of the layer norms, "{i}" for the layer
    also_reads: tuple = ()  # further transformers MaskedLM classes with this layout (from-hf)

    def names(self, layers):
        """(fairseq, transformers) parameter name pairs, tied copies included."""
        b = self.base
        pairs = [
            (FAIRSEQ_ENCODER + "embed_tokens.weight", f"{b}.embeddings.word_embeddings.weight"),
            (FAIRSEQ_ENCODER + "embed_positions.weight", f"{b}.embeddings.position_embeddings.weight"),
            ("encoder.lm_head.weight", "lm_head.decoder.weight"),
            ("encoder.lm_head.bias", "lm_head.bias"),
            ("encoder.lm_head.dense.weight", "lm_head.dense.weight"),
            ("encoder.lm_head.dense.bias", "lm_head.dense.bias"),
            ("encoder.lm_head.layer_norm.weight", "lm_head.layer_norm.weight"),
            ("encoder.lm_head.layer_norm.bias", "lm_head.layer_norm.bias"),
        ]
        per_layer = [
            ("self_attn.q_proj", "attention.self.query"),
            ("self_attn.k_proj", "attention.self.key"),
            ("self_attn.v_proj", "attention.self.value"),
            ("self_attn.out_proj", "attention.output.dense"),
            ("fc1", "intermediate.dense"),
            ("fc2", "output.dense"),
        ]
        modules = [(FAIRSEQ_LAYER + f, f"{b}.encoder.layer.{{i}}." + h) for f, h in per_layer]
        modules += [(f, h.replace("{b}", b)) for f, h in self.norms]
        for f, h in modules:
            for suffix in (".weight", ".bias"):
                if "{i}" in f:
                    pairs += [(f.format(i=i) + suffix, h.format(i=i) + suffix) for i in range(layers)]
                else:
                    pairs.append((f + suffix, h + suffix))
        return pairs


LAYOUTS = (
    Layout(
        "post-LN (RoBERTa)", "RobertaForMaskedLM", "RobertaConfig", "roberta", False, True,
        norms=(
            (FAIRSEQ_ENCODER + "layernorm_embedding", "{b}.embeddings.LayerNorm"),
            (FAIRSEQ_LAYER + "self_attn_layer_norm", "{b}.encoder.layer.{i}.attention.output.LayerNorm"),
            (FAIRSEQ_LAYER + "final_layer_norm", "{b}.encoder.layer.{i}.output.LayerNorm"),
        ),
        also_reads=("XLMRobertaForMaskedLM", "CamembertForMaskedLM"),
    ),
    Layout(
        "pre-LN with embedding LayerNorm (RoBERTa-PreLayerNorm)", "RobertaPreLayerNormForMaskedLM",
        "RobertaPreLayerNormConfig", "roberta_prelayernorm", True, True,
        norms=(
            (FAIRSEQ_ENCODER + "layernorm_embedding", "{b}.embeddings.LayerNorm"),
            (FAIRSEQ_LAYER + "self_attn_layer_norm", "{b}.encoder.layer.{i}.attention.LayerNorm"),
            (FAIRSEQ_LAYER + "final_layer_norm", "{b}.encoder.layer.{i}.intermediate.LayerNorm"),
            (FAIRSEQ_ENCODER + "layer_norm", "{b}.LayerNorm"),
        ),
    ),
    Layout(
        "pre-LN without embedding LayerNorm (XLM-RoBERTa-XL)", "XLMRobertaXLForMaskedLM", "XLMRobertaXLConfig",
        "roberta", True, False,
        norms=(
            (FAIRSEQ_LAYER + "self_attn_layer_norm", "{b}.encoder.layer.{i}.attention.self_attn_layer_norm"),
            (FAIRSEQ_LAYER + "final_layer_norm", "{b}.encoder.layer.{i}.LayerNorm"),
            (FAIRSEQ_ENCODER + "layer_norm", "{b}.encoder.LayerNorm"),
        ),
    ),
)


def layout_for_fairseq(args):
    for layout in LAYOUTS:
        if (layout.normalize_before, layout.layernorm_embedding) == (
            bool(args.encoder_normalize_before), bool(args.layernorm_embedding)
        ):
            return layout
    return None  # post-LN without an embedding LayerNorm: no transformers class computes it


def layout_for_hf(model_class):
    for layout in LAYOUTS:
        if model_class in (layout.model_class, *layout.also_reads):
            return layout
    return None

