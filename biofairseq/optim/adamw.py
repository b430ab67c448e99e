"""``--optimizer adamw``: fairseq's ``adam``, which is AdamW (decoupled weight decay), with ``--weight-decay-exclude``.

The update, its state and its flags are fairseq's own (a subclass that only groups the parameters): with
``--weight-decay-exclude none`` it trains exactly as ``--optimizer adam``. fairseq's ``adam`` cannot take a flag of
ours without patching fairseq, hence the second name; ``fused_adamw`` takes the same flag.
"""

from dataclasses import dataclass

from fairseq.optim import register_optimizer
from fairseq.optim.adam import FairseqAdam, FairseqAdamConfig

from biofairseq.optim.weight_decay import WeightDecayExcludeConfig, decay_groups


@dataclass
class AdamWConfig(WeightDecayExcludeConfig, FairseqAdamConfig):
    pass


@register_optimizer("adamw", dataclass=AdamWConfig)
class FairseqAdamW(FairseqAdam):
    """fairseq's Adam over parameter groups: LayerNorm weights and biases without weight decay when asked."""

    def __init__(self, cfg: AdamWConfig, params) -> None:
        super().__init__(cfg, decay_groups(params, cfg.weight_decay_exclude))

    @property
    def supports_flat_params(self) -> bool:
        """One flat copy of every parameter (--fp16) cannot be split into groups."""
        return self.cfg.weight_decay_exclude == "none"
