"""``--weight-decay-exclude norm_and_bias``: no weight decay on LayerNorm weights and biases, as BERT, ELECTRA and
Megatron-LM train (google-research/electra: ``exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"]``).

fairseq's optimizers decay every parameter they are given, and are given a flat list, without names. In every
encoder of fairseq and of this package the parameters to leave alone are exactly those of fewer than two dimensions
(LayerNorm weights and biases, every bias); matrices and embedding tables have two. So the optimizer splits what it
is given by dimension, names unneeded.

fairseq's ``--fp16`` hands the optimizer one flat fp32 copy of all the parameters, in which they cannot be told
apart: that is refused in one line (``--fp16-no-flatten-grads`` keeps them apart; ``--memory-efficient-fp16`` and
``--amp-bf16`` never flatten).
"""

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

from fairseq.dataclass import ChoiceEnum, FairseqDataclass

if TYPE_CHECKING:
    import torch

WEIGHT_DECAY_EXCLUDES = ("none", "norm_and_bias")


@dataclass
class WeightDecayExcludeConfig(FairseqDataclass):
    weight_decay_exclude: ChoiceEnum(WEIGHT_DECAY_EXCLUDES) = field(
        default="none",
        metadata={"help": "norm_and_bias: no weight decay on LayerNorm weights and biases (every parameter of fewer "
                  "than 2 dimensions), as BERT, ELECTRA and Megatron-LM train; none: decay every parameter, as fairseq's "
                  "RoBERTa does (default)"},
    )


def decay_groups(params: "Iterable[torch.Tensor]", exclude: str) -> "list[torch.Tensor] | list[dict[str, Any]]":
    """``params`` as the optimizer's parameter groups: one, or with ``norm_and_bias`` the matrices (decayed at the
    optimizer's --weight-decay) and the rest (weight decay 0)."""
    params = list(params)
    if exclude == "none":
        return params
    if len(params) == 1 and params[0].dim() == 1:
        raise ValueError(f"--weight-decay-exclude {exclude}: the optimizer was given one flat copy of every parameter "
                         "(--fp16), in which LayerNorms and biases cannot be told apart; add --fp16-no-flatten-grads")
    groups = [{"params": [p for p in params if p.dim() >= 2]}, {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return [group for group in groups if group["params"]]
