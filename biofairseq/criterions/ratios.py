"""Ratios logged as two sums and divided when printed: a criterion's reduce_metrics then reads nothing from the device.

fairseq's usual ``metrics.log_scalar(name, part / whole, weight=whole)`` asks the device whether the weight is above
zero on every update when the weight is a device tensor (a count of masked or replaced tokens). Here both sums stay
where they are; the derived value reads them only when a log line or a validation prints it (and under stock
fairseq-train, whose trainer evaluates its meters after every update, once per update). The value is the one
fairseq's mean weighted by the whole gives: sum of parts over sum of wholes, over the logged updates.
"""

import functools
from collections.abc import Callable

import torch
from fairseq import utils
from fairseq.logging import metrics
from fairseq.logging.meters import MetersDict


def log_ratio(name: str, part: float | torch.Tensor, whole: float | torch.Tensor, scale: float = 100.0,
              ndigits: int = 2, derive: Callable[[MetersDict], float] | None = None) -> None:
    """Logs ``name`` = scale x sum(part) / sum(whole) over the logged updates; NaN while sum(whole) is 0. ``derive``,
    if given, replaces the division (it gets the meters and returns the value; ``ratio`` computes the default)."""
    metrics.log_scalar_sum(f"_{name}:part", part)
    metrics.log_scalar_sum(f"_{name}:whole", whole)
    metrics.log_derived(name, derive or functools.partial(ratio, name=name, scale=scale, ndigits=ndigits))


def ratio(meters: MetersDict, name: str, scale: float = 100.0, ndigits: int = 2) -> float:
    """The value of a ratio that ``log_ratio`` logged, from its two sums: the only place they reach the host."""
    whole = utils.item(meters[f"_{name}:whole"].sum)
    return round(scale * utils.item(meters[f"_{name}:part"].sum) / whole, ndigits) if whole > 0 else float("nan")
