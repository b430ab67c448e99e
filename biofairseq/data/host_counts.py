"""Counts that the collater makes on the host, so that a training step never asks the GPU for a size.

A boolean index (``x[mask]``), ``nonzero()`` or ``if tensor:`` makes the host wait until the GPU has finished all
the work queued before it (a host-device synchronisation), and then the GPU idles while the host queues more. The
batches of ``document_mlm`` and ``electra`` carry ``ntargets``, the number of tokens the loss predicts, as a Python
int beside fairseq's ``ntokens`` (the real, non-pad tokens); with either count the positions are found by
``torch.nonzero_static``, which needs none.
"""

from typing import Any

import torch
from fairseq.data import BaseWrapperDataset, FairseqDataset


class TargetCountDataset(BaseWrapperDataset):
    """How many tokens of each target (padding where nothing is predicted) are predicted; a batch's sum."""

    def __init__(self, targets: FairseqDataset, pad: int) -> None:
        super().__init__(targets)
        self.pad = pad

    def __getitem__(self, index: int) -> int:
        return int(self.dataset[index].ne(self.pad).sum())

    def collater(self, samples: list[int]) -> int:
        return sum(samples)


def flat_positions(mask: torch.Tensor, count: int | None = None) -> torch.Tensor:
    """Where ``mask`` is True, as indices into its flattened (row-major) form; ``count``: how many, a host int.
    Without it (a batch collated elsewhere) they are found by ``nonzero``, which synchronises.

    ``nonzero_static`` pads or cuts its result to ``count``, so a count that disagrees with the mask would give
    wrong positions silently: the device checks it without the host waiting (an asynchronous assertion, which on a
    GPU stops the process at the next synchronisation; on a CPU it raises here)."""
    flat = mask.reshape(-1)
    if count is None:
        return flat.nonzero().squeeze(1)
    torch._assert_async(flat.sum() == count, f"the batch counts {count} tokens on the host and another number in its "
                        "mask: collate ntargets and ntokens with the tokens (biofairseq.data.host_counts)")
    return torch.nonzero_static(flat, size=count).squeeze(1)


def at_positions(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """The rows of a B x T x ... tensor at flat B x T ``positions`` (no copy of ``x``, which may be a transposed view)."""
    length = x.shape[1]
    return x[positions // length, positions % length]


def target_positions(sample: dict[str, Any], pad: int) -> torch.Tensor:
    """The predicted tokens of a batch, as positions in its flattened B x T targets."""
    return flat_positions(sample["target"].ne(pad), sample.get("ntargets"))


def real_positions(sample: dict[str, Any], pad: int) -> torch.Tensor:
    """The real (non-pad) tokens of a batch, as positions in its flattened B x T ``src_tokens``."""
    return flat_positions(sample["net_input"]["src_tokens"].ne(pad), sample.get("ntokens"))
