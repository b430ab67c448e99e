"""How a fairseq encoder's tensors are laid out in a transformers class, both ways.

A layout is data: the transformers classes, the (fairseq, transformers) name pairs, and the few ways the two store a
tensor differently, applied by ``to_hf`` and ``from_hf``: a learned position table that transformers counts from 0
where fairseq starts at padding_idx + 1, rows per token id in another order (a vocabulary whose ids were renumbered
for fairseq's dictionary), a token type embedding that fairseq folds into its positions, a tensor transformers keeps
twice (a tied bias), and tensors computed from several (``Transform``). Each model family
(``biofairseq.convert.families``) builds its layouts from this.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Callable, Optional

import torch

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
# transformers tensors with a row per token id (name endings), reordered where the ids were renumbered
VOCABULARY_ROWS = ("word_embeddings.weight", "tok_embeddings.weight", "decoder.weight", "decoder.bias", "lm_head.bias",
                   "predictions.bias", "generator_lm_head.weight", "generator_lm_head.bias")
POSITIONS = "embed_positions.weight"  # fairseq's learned position table (name ending)
TOKEN_TYPES = "token_type_embeddings.weight"  # transformers' (name ending)


@dataclass(frozen=True)
class Transform:
    """A transformers tensor computed from fairseq ones (to-hf): ``function(*sources, pad=padding index)``."""

    hf: str
    sources: tuple
    function: Callable


@dataclass(frozen=True)
class Layout:
    name: str
    model_class: str  # transformers class written (to-hf) or read (from-hf)
    config_class: str
    base: str  # attribute of the transformers encoder inside that class
    norms: tuple  # (fairseq name, transformers name) of modules with a weight and a bias, "{i}" for the layer
    fixed: tuple  # (fairseq, transformers) tensor names outside the layers, "{b}" for base
    normalize_before: bool = False  # fairseq --encoder-normalize-before
    layernorm_embedding: bool = True  # fairseq layernorm_embedding
    also_reads: tuple = ()  # further transformers classes with this layout (from-hf)
    layer: str = FAIRSEQ_LAYER  # fairseq prefix of layer {i}
    per_layer: tuple = PER_LAYER  # (fairseq, transformers) module names inside layer {i}
    hf_layer: str = "{b}.encoder.layer.{i}."  # transformers prefix of layer {i}
    biases: bool = True  # every module above has a bias beside its weight
    transforms: tuple = ()  # Transforms (to-hf): tensors computed, not renamed
    drops: tuple = ()  # prefixes of fairseq tensors this layout leaves out on purpose (another tower)
    copies: tuple = ()  # (transformers name, the one it is a copy of): tied tensors its state dict holds twice
    positions_from_zero: bool = False  # transformers' position table starts at position 0 (BERT's, ELECTRA's)
    tower: str = ""  # ELECTRA: "discriminator" or "generator"
    long_context: bool = False  # parity is checked on a sequence longer than a local attention window too

    def names(self, layers: int) -> list[tuple[str, str]]:
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

    def reads(self, layers: int) -> set[str]:
        """Every fairseq name this layout renames or computes from (with ``drops``, the rest is unexpected)."""
        return {f for f, _ in self.names(layers)} | {s for t in self.transforms for s in t.sources}

    def to_hf(self, weights: Mapping[str, torch.Tensor], layers: int, pad: int, hf_state: Mapping[str, torch.Tensor],
              order: Optional[Sequence[int]] = None) -> dict[str, torch.Tensor]:
        """The transformers state dict (every key of ``hf_state``, the class's own) from fairseq ``weights``. ``order``:
        the transformers id of each fairseq index, where they differ. Pairs whose fairseq tensor is absent (an optional
        projection) are skipped; the caller's strict load catches a real gap. Token type embeddings are zero: fairseq
        has none, and what type 0 added went into the positions."""
        out = {}
        for f, h in self.names(layers):
            if f not in weights:
                continue
            tensor = weights[f]
            if self.positions_from_zero and f.endswith(POSITIONS):
                tensor = tensor[pad + 1:]
            out[h] = _rows(tensor, order, to_hf=True) if h.endswith(VOCABULARY_ROWS) else tensor
        for t in self.transforms:
            out[t.hf] = t.function(*(weights[s] for s in t.sources), pad=pad)
        for copy, original in self.copies:
            out[copy] = out[original]
        for key, value in hf_state.items():
            if key.endswith(TOKEN_TYPES):
                out[key] = torch.zeros_like(value)
        return out

    def from_hf(self, hf_weights: Mapping[str, torch.Tensor], layers: int, pad: int,
                order: Optional[Sequence[int]] = None) -> dict[str, torch.Tensor]:
        """fairseq tensors from a transformers state dict: renamed, rows in fairseq's order, a position table from 0
        given fairseq's padding_idx + 1 leading rows (zero: never read), and token type 0, which transformers adds to
        every token when given no types, added to the positions."""
        out = {}
        for f, h in self.names(layers):
            if h not in hf_weights:  # ModernBERT's first layer has no attention norm
                continue
            tensor = hf_weights[h]
            out[f] = _rows(tensor, order, to_hf=False) if h.endswith(VOCABULARY_ROWS) else tensor
            if f.endswith(POSITIONS) and self.positions_from_zero:
                out[f] = torch.cat([tensor.new_zeros(pad + 1, tensor.shape[1]), tensor])
        types = next((v for k, v in hf_weights.items() if k.endswith(TOKEN_TYPES)), None)
        table = next((f for f in out if f.endswith(POSITIONS)), None)
        if types is not None and table is not None:
            out[table] = out[table] + types[0]
        return out


def _rows(tensor: torch.Tensor, order: Optional[Sequence[int]], to_hf: bool) -> torch.Tensor:
    """A tensor with a row per token id, its rows from fairseq's order to transformers' ids or back."""
    if order is None:
        return tensor
    index = torch.as_tensor(order)
    if not to_hf:
        return tensor[index]
    out = tensor.new_empty((len(order), *tensor.shape[1:]))
    out[index] = tensor[: len(order)]
    return out
