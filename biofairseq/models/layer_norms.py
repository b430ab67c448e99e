"""``--layer-norm-eps``: the epsilon of every LayerNorm of a model, as a setting of its architecture.

fairseq builds its LayerNorms with torch's 1e-5 and has no flag for another. BERT, ELECTRA and Megatron-BERT train
theirs with 1e-12, so a model continued from one of them computes the published function only with 1e-12: with
1e-5, a LayerNorm over small activations (an embedding LayerNorm of a small model) moves outputs past any parity
tolerance. The models set the value on each of their LayerNorms once built (parameters, names and checkpoints stay
fairseq's), and the checkpoint records it with the other model settings; one saved before the flag gets 1e-5.
"""

from typing import TypeVar

import torch

DEFAULT = 1e-5  # torch's and fairseq's; ModernBERT's norm_eps
HELP = ("epsilon of every LayerNorm (default: fairseq's 1e-5; BERT, ELECTRA and Megatron-BERT use 1e-12, which their "
        "conversions set)")
ModuleT = TypeVar("ModuleT", bound=torch.nn.Module)


def set_layer_norm_eps(model: ModuleT, eps: float | None) -> ModuleT:
    """Every LayerNorm of ``model`` (torch's, and apex's fused one that fairseq takes on GPUs) computes with ``eps``."""
    eps = DEFAULT if eps is None else float(eps)
    for module in model.modules():
        if isinstance(module, torch.nn.LayerNorm) or type(module).__name__ == "FusedLayerNorm":
            module.eps = eps
    return model
