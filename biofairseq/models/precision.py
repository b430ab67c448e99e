"""bf16 mixed precision that fairseq 0.12.3's trainer can run on a GPU.

fairseq 0.12.3 reads ``--bf16`` as "on a TPU" (its parser turns on ``--tpu`` and the trainer asks torch_xla for the
device), so ``fairseq-train --bf16`` stops on a GPU; and where it runs, its checkpoints hold bf16 weights, the fp32
master copy being rebuilt from them on every resume. ``--amp-bf16`` runs the model's forward under
``torch.autocast(dtype=bfloat16)`` instead, with fairseq's trainer in fp32: the weights, the optimizer and the
checkpoints stay fp32 (a resume continues exactly), matmuls and attention run in bf16, softmax and layer norms in
fp32, and no loss scaling is needed (bf16 has fp32's range).
"""

import contextlib

import torch

AMP_BF16_HELP = ("bf16 mixed precision: the forward under torch.autocast(bfloat16), fp32 weights, optimizer and "
                 "checkpoints, no loss scaling. Use it instead of --bf16, which fairseq 0.12.3 reserves for TPUs, and "
                 "without --fp16/--amp")


class AmpBf16:
    """Mixin for a fairseq model whose forward runs under ``self.autocast()``."""

    amp_bf16 = False

    def autocast(self):
        """bf16 autocast on the model's device while ``amp_bf16`` is set; otherwise nothing."""
        if not self.amp_bf16:
            return contextlib.nullcontext()
        weight = next(self.parameters())
        if weight.dtype != torch.float32:
            raise ValueError(f"--amp-bf16 with {weight.dtype} weights: drop --fp16/--bf16 (--amp-bf16 keeps fp32 "
                             "weights and computes in bf16), or drop --amp-bf16")
        return torch.autocast(weight.device.type, dtype=torch.bfloat16)
