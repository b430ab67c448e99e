"""The gradient norm and its clipping with torch's multi-tensor kernels.

fairseq's ``clip_grad_norm_`` takes one norm per gradient tensor (about 200 kernel launches for a 12-layer encoder,
each small) unless NVIDIA apex's ``amp_C`` is installed; a GPU then waits on the host to launch them. torch's own
``get_total_norm(foreach=True)`` takes the same norms in a few multi-tensor launches. The result is fairseq's within
float error: the norm of the per-tensor fp32 norms, parameters marked ``expert`` left out of the norm but clipped,
the same clip coefficient."""

from typing import Iterable, Optional

import torch
from fairseq.optim.fairseq_optimizer import FairseqOptimizer


def plain(optimizer: FairseqOptimizer) -> bool:
    """Whether the optimizer clips as FairseqOptimizer does (fp32 gradients, no loss scale to take out first): the
    fp16, memory-efficient fp16 and --amp wrappers clip their own way and keep it."""
    return isinstance(optimizer, FairseqOptimizer) and type(optimizer).clip_grad_norm is FairseqOptimizer.clip_grad_norm


def clip_grad_norm_(params: Iterable[Optional[torch.Tensor]], max_norm: float) -> torch.Tensor:
    """fairseq.utils.clip_grad_norm_(params, max_norm), without the aggregation only FSDP uses."""
    params = list(params)
    with_grads = [p for p in params if p is not None and p.grad is not None]
    grads = [p.grad.float() for p in with_grads if not hasattr(p, "expert")]  # fp32 norms, as fairseq's; fp32 is kept
    if not grads:
        return params[0].new_tensor(0.0) if params else torch.tensor(0.0)
    total = torch.nn.utils.get_total_norm(grads, 2.0, foreach=True)  # runs without autograd
    if max_norm > 0:
        torch.nn.utils.clip_grads_with_norm_(with_grads, float(max_norm), total, foreach=True)
    return total
