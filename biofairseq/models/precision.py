"""bf16 mixed precision that fairseq 0.12.3's trainer can run on a GPU.

fairseq 0.12.3 reads ``--bf16`` as "on a TPU" (its parser turns on ``--tpu`` and the trainer asks torch_xla for the
device), so ``fairseq-train --bf16`` stops on a GPU; and where it runs, its checkpoints hold bf16 weights, the fp32
master copy being rebuilt from them on every resume. ``--amp-bf16`` runs the model's forward under
``torch.autocast(dtype=bfloat16)`` instead, with fairseq's trainer in fp32: the weights, the optimizer and the
checkpoints stay fp32 (a resume continues exactly), matmuls and attention run in bf16, softmax and layer norms in
fp32, and no loss scaling is needed (bf16 has fp32's range).
"""

import contextlib
from argparse import Namespace

import torch
from fairseq.dataclass import FairseqDataclass
from fairseq.utils import safe_getattr
from omegaconf import DictConfig

AMP_BF16_HELP = ("bf16 mixed precision: the forward under torch.autocast(bfloat16), fp32 weights, optimizer and "
                 "checkpoints, no loss scaling. Use it instead of --bf16, which fairseq 0.12.3 reserves for TPUs, and "
                 "without --fp16/--amp")


# fairseq's own mixed precisions, each of which --amp-bf16 replaces (the first given is named)
FAIRSEQ_PRECISIONS = (("amp", "--amp"), ("memory_efficient_fp16", "--memory-efficient-fp16"),
                      ("memory_efficient_bf16", "--memory-efficient-bf16"), ("fp16", "--fp16"), ("bf16", "--bf16"))


def amp_bf16_flag(cfg: Namespace | DictConfig | FairseqDataclass) -> bool:
    """--amp-bf16 from a model's settings (fairseq's argparse Namespace, or a dataclass config inside fairseq's
    whole configuration), refused beside any of fairseq's own mixed precisions, which the help forbids: under
    --amp fairseq's fp16 autocast and loss scaler would wrap ours, and the others cast the weights."""
    if not safe_getattr(cfg, "amp_bf16", False):
        return False
    common = cfg._get_root().get("common", cfg) if isinstance(cfg, DictConfig) else cfg
    for key, flag in FAIRSEQ_PRECISIONS:
        if safe_getattr(common, key, False):
            raise ValueError(f"--amp-bf16 with {flag}: two mixed precisions; drop one (--amp-bf16 computes in bf16 "
                             "with fp32 weights and no loss scaling)")
    return True


class AmpBf16:
    """Mixin for a fairseq model whose forward runs under ``self.autocast()``."""

    amp_bf16 = False

    def autocast(self) -> contextlib.AbstractContextManager[None]:
        """bf16 autocast on the model's device while ``amp_bf16`` is set; otherwise nothing."""
        if not self.amp_bf16:
            return contextlib.nullcontext()
        weight = next(self.parameters())
        if weight.dtype != torch.float32:
            raise ValueError(f"--amp-bf16 with {weight.dtype} weights: drop --fp16/--bf16 (--amp-bf16 keeps fp32 "
                             "weights and computes in bf16), or drop --amp-bf16")
        return torch.autocast(weight.device.type, dtype=torch.bfloat16)
