"""Which transformers class holds which fairseq encoder, and how their parameters are named or computed.

A layout is data: the fairseq flags it stands for, the transformers classes, and the name pairs. Adding an
encoder family (BioMegatron's, ELECTRA's) means adding a layout here, not another converter: a layout renames
tensors and, where the two sides store them differently, computes them (``Transform``).
"""

from dataclasses import dataclass
from typing import Callable

FAIRSEQ_ENCODER = "encoder.sentence_encoder."
FAIRSEQ_LAYER = FAIRSEQ_ENCODER + "layers.{i}."

# fairseq activation_fn -> transformers hidden_act, where both compute the same function.
ACTIVATIONS = {"gelu": "gelu", "relu": "relu", "gelu_accurate": "gelu_new", "tanh": "tanh", "linear": "linear"}


PER_LAYER = (  # fairseq post- and pre-LN layers, BERT-family transformers layers
    ("self_attn.q_proj", "attention.self.query"),
    ("self_attn.k_proj", "attention.self.key"),
    ("self_attn.v_proj", "attention.self.value"),
    ("self_attn.out_proj", "attention.output.dense"),
    ("fc1", "intermediate.dense"),
    ("fc2", "output.dense"),
)

ROBERTA_FIXED = (
    (FAIRSEQ_ENCODER + "embed_tokens.weight", "{b}.embeddings.word_embeddings.weight"),
    (FAIRSEQ_ENCODER + "embed_positions.weight", "{b}.embeddings.position_embeddings.weight"),
    ("encoder.lm_head.weight", "lm_head.decoder.weight"),
    ("encoder.lm_head.bias", "lm_head.bias"),
    ("encoder.lm_head.dense.weight", "lm_head.dense.weight"),
    ("encoder.lm_head.dense.bias", "lm_head.dense.bias"),
    ("encoder.lm_head.layer_norm.weight", "lm_head.layer_norm.weight"),
    ("encoder.lm_head.layer_norm.bias", "lm_head.layer_norm.bias"),
)


@dataclass(frozen=True)
class Transform:
    """A transformers tensor computed from fairseq ones: ``function(*sources, pad=padding index)``."""

    hf: str
    sources: tuple
    function: Callable


@dataclass(frozen=True)
class Layout:
    name: str
    model_class: str  # transformers class written (to-hf) or read (from-hf)
    config_class: str
    base: str  # attribute of the transformers encoder inside that class
    normalize_before: bool  # fairseq --encoder-normalize-before
    layernorm_embedding: bool  # fairseq layernorm_embedding
    norms: tuple  # (fairseq name, transformers name) of the layer norms, "{i}" for the layer
    also_reads: tuple = ()  # further transformers MaskedLM classes with this layout (from-hf)
    layer: str = FAIRSEQ_LAYER  # fairseq prefix of layer {i}
    fixed: tuple = ROBERTA_FIXED  # (fairseq, transformers) names outside the layers, "{b}" for base
    transforms: tuple = ()  # Transforms: tensors computed, not renamed
    drops: tuple = ()  # prefixes of fairseq tensors this layout leaves out on purpose (another tower)
    tower: str = ""  # ELECTRA: "discriminator" or "generator"
    per_layer: tuple = PER_LAYER  # (fairseq, transformers) module names inside layer {i}
    hf_layer: str = "{b}.encoder.layer.{i}."  # transformers prefix of layer {i}
    biases: bool = True  # every module above has a bias beside its weight
    long_context: bool = False  # parity is checked on a sequence longer than a local attention window too

    def names(self, layers):
        """(fairseq, transformers) parameter name pairs, tied copies included."""
        b = self.base
        pairs = [(f, h.replace("{b}", b)) for f, h in self.fixed]
        modules = [(self.layer + f, self.hf_layer.replace("{b}", b) + h) for f, h in self.per_layer]
        modules += [(f, h.replace("{b}", b)) for f, h in self.norms]
        for f, h in modules:
            for suffix in (".weight", ".bias") if self.biases else (".weight",):
                if "{i}" in f:
                    pairs += [(f.format(i=i) + suffix, h.format(i=i) + suffix) for i in range(layers)]
                else:
                    pairs.append((f + suffix, h + suffix))
        return pairs

    def tensors(self, weights, layers, pad):
        """The transformers state dict from fairseq ``weights``: renamed, then computed. Pairs whose fairseq
        tensor is absent (an optional projection) are skipped; the caller's strict load catches a real gap."""
        out = {h: weights[f] for f, h in self.names(layers) if f in weights}
        for t in self.transforms:
            out[t.hf] = t.function(*(weights[s] for s in t.sources), pad=pad)
        return out

    def reads(self, layers):
        """Every fairseq name this layout renames or computes from (with ``drops``, the rest is unexpected)."""
        return {f for f, _ in self.names(layers)} | {s for t in self.transforms for s in t.sources}


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


# ModernBERT (biofairseq.models.modernbert): transformers' ModernBertForMaskedLM, whose modules have no biases but the
# decoder's. The first layer has no attention norm on either side; its pair is skipped as absent.
MODERNBERT = Layout(
    "ModernBERT", "ModernBertForMaskedLM", "ModernBertConfig", "model", True, True,
    norms=(("encoder.embed_norm", "{b}.embeddings.norm"), ("encoder.final_norm", "{b}.final_norm"),
           ("encoder.lm_head.dense", "head.dense"), ("encoder.lm_head.norm", "head.norm")),
    layer="encoder.layers.{i}.", hf_layer="{b}.layers.{i}.", biases=False, long_context=True,
    per_layer=(("attn_norm", "attn_norm"), ("qkv_proj", "attn.Wqkv"), ("out_proj", "attn.Wo"),
               ("mlp_norm", "mlp_norm"), ("ffn_in", "mlp.Wi"), ("ffn_out", "mlp.Wo")),
    fixed=(("encoder.embed_tokens.weight", "{b}.embeddings.tok_embeddings.weight"),
           ("encoder.lm_head.weight", "decoder.weight"), ("encoder.lm_head.bias", "decoder.bias")),
)


def _positions_from_zero(table, pad):
    """fairseq's learned positions start at padding_idx + 1; transformers' ELECTRA counts from 0."""
    return table[pad + 1:]


def _gdes(shared, delta, pad):
    """DeBERTa-v3's gradient-disentangled embedding, materialised: the generator's table + the delta."""
    return shared + delta


def _gdes_positions(shared, delta, pad):
    return _positions_from_zero(shared + delta, pad)


def electra_layouts(sharing):
    """(discriminator, generator) layouts of an ELECTRA checkpoint with this --embedding-sharing."""
    own = "discriminator_embeddings." if sharing == "none" else "embeddings."
    embedding_norm = "embeddings." if sharing == "tied" else "discriminator_embeddings."  # the others have their own
    if sharing == "gdes":
        embeddings = (
            Transform("electra.embeddings.word_embeddings.weight",
                      ("embeddings.embed_tokens.weight", "discriminator_embeddings.token_delta"), _gdes),
            Transform("electra.embeddings.position_embeddings.weight",
                      ("embeddings.embed_positions.weight", "discriminator_embeddings.position_delta"), _gdes_positions),
        )
        fixed = ()
    else:
        embeddings = (Transform("electra.embeddings.position_embeddings.weight", (own + "embed_positions.weight",),
                                _positions_from_zero),)
        fixed = ((own + "embed_tokens.weight", "electra.embeddings.word_embeddings.weight"),)
    tower_norms = lambda tower, embedding_prefix: (
        (embedding_prefix + "layernorm_embedding", "electra.embeddings.LayerNorm"),
        (tower + ".embed_proj", "electra.embeddings_project"),
        (tower + ".layers.{i}.self_attn_layer_norm", "electra.encoder.layer.{i}.attention.output.LayerNorm"),
        (tower + ".layers.{i}.final_layer_norm", "electra.encoder.layer.{i}.output.LayerNorm"),
    )
    discriminator = Layout(
        f"ELECTRA discriminator ({sharing} embeddings)", "ElectraForPreTraining", "ElectraConfig", "electra",
        False, True, norms=tower_norms("discriminator", embedding_norm) + (
            ("discriminator_head.dense", "discriminator_predictions.dense"),
            ("discriminator_head.dense_prediction", "discriminator_predictions.dense_prediction"),
        ),
        layer="discriminator.layers.{i}.", fixed=fixed, transforms=embeddings,
        drops=("generator.", "generator_head.") + {"tied": (), "gdes": ("embeddings.layernorm_embedding.",),
                                                    "detached": ("embeddings.layernorm_embedding.",),
                                                    "none": ("embeddings.",)}[sharing],
        tower="discriminator",
    )
    generator = Layout(
        "ELECTRA generator", "ElectraForMaskedLM", "ElectraConfig", "electra", False, True,
        norms=tower_norms("generator", "embeddings.") + (
            ("generator_head.dense", "generator_predictions.dense"),
            ("generator_head.layer_norm", "generator_predictions.LayerNorm"),
        ),
        layer="generator.layers.{i}.",
        fixed=(
            ("embeddings.embed_tokens.weight", "electra.embeddings.word_embeddings.weight"),
            ("generator_head.weight", "generator_lm_head.weight"),
            ("generator_head.bias", "generator_lm_head.bias"),
        ),
        transforms=(Transform("electra.embeddings.position_embeddings.weight", ("embeddings.embed_positions.weight",),
                              _positions_from_zero),),
        drops=("discriminator", "discriminator_head."), tower="generator",
    )
    return discriminator, generator


def layout_for_fairseq(args):
    for layout in LAYOUTS:
        if (layout.normalize_before, layout.layernorm_embedding) == (
            bool(args.encoder_normalize_before), bool(args.layernorm_embedding)
        ):
            return layout
    return None  # post-LN without an embedding LayerNorm: no transformers class computes it


def layout_for_hf(model_class):
    for layout in (*LAYOUTS, MODERNBERT):
        if model_class in (layout.model_class, *layout.also_reads):
            return layout
    return None

