"""``--optimizer fused_adamw``: torch's fused AdamW, for what apex's FusedAdam gave fairseq, with nothing to compile.

fairseq's ``adam`` falls back to its own Python loop over the parameters (several kernels each) unless apex is
installed. This is the same decoupled weight decay ("AdamW") and takes the same flags (``--adam-betas``,
``--adam-eps``, ``--weight-decay``, and ``--weight-decay-exclude`` as ``adamw``), so a recipe switches by the optimizer's
name alone. One difference: fairseq's
``adam`` adds eps to sqrt(v) before the bias correction, torch after it, so early updates differ slightly (eps is
1e-6 against gradients far larger). Checkpoints of one optimizer do not resume with the other (fairseq refuses
unless ``--reset-optimizer``).
"""

from dataclasses import dataclass, field
from typing import Any, List

import torch
from fairseq.optim import FairseqOptimizer, register_optimizer
from fairseq.optim.adam import FairseqAdam
from omegaconf import II

from biofairseq.optim.weight_decay import WeightDecayExcludeConfig, decay_groups


@dataclass
class FusedAdamWConfig(WeightDecayExcludeConfig):
    adam_betas: Any = field(default=(0.9, 0.999), metadata={"help": "betas for AdamW"})
    adam_eps: float = field(default=1e-8, metadata={"help": "epsilon for AdamW"})
    weight_decay: float = field(default=0.0, metadata={"help": "decoupled weight decay"})
    lr: List[float] = II("optimization.lr")


@register_optimizer("fused_adamw", dataclass=FusedAdamWConfig)
class FusedAdamW(FairseqOptimizer):
    """``torch.optim.AdamW(fused=True)``: one fused kernel per step on GPUs (and on CPUs) for all parameters."""

    def __init__(self, cfg: FusedAdamWConfig, params) -> None:
        super().__init__(cfg)
        self._optimizer = torch.optim.AdamW(decay_groups(params, cfg.weight_decay_exclude), fused=True, **self.optimizer_config)

    # lr, betas, eps and weight decay from the command line, read as fairseq's adam reads its same-named flags
    optimizer_config = FairseqAdam.optimizer_config

    @property
    def supports_flat_params(self) -> bool:
        """--fp16 steps one flat fp32 copy of all parameters (fairseq's FP16Optimizer); AdamW is elementwise, but
        the copy cannot be split into groups."""
        return self.cfg.weight_decay_exclude == "none"
