"""Masked LM loss that also logs masked-token accuracy over real tokens."""

from typing import Any

import torch
from fairseq import modules
from fairseq.criterions import register_criterion
from fairseq.criterions.masked_lm import MaskedLmConfig, MaskedLmLoss
from fairseq.tasks import FairseqTask
from torch import nn

from biofairseq.criterions.ratios import log_ratio
from biofairseq.data import special_symbols
from biofairseq.data.host_counts import target_positions


@register_criterion("masked_lm_accuracy", dataclass=MaskedLmConfig)
class MaskedLmAccuracy(MaskedLmLoss):
    """fairseq's masked_lm loss (loss and perplexity) plus ``accuracy``, in % of the masked real tokens.

    Targets that are special symbols (``<s>``, ``</s>``, which only ``--mask-special-tokens`` selects) are
    left out of the accuracy, as BERT and ELECTRA count it; the loss is fairseq's.
    """

    def __init__(self, cfg: MaskedLmConfig, task: FairseqTask) -> None:
        super().__init__(cfg, task)
        self.special = torch.from_numpy(special_symbols(task.source_dictionary))

    def forward(self, model: nn.Module, sample: dict[str, Any],
                reduce: bool = True) -> tuple[torch.Tensor, int | torch.Tensor, dict[str, Any]]:
        loss, sample_size, logging_output, _ = self.forward_with_logits(model, sample, reduce)
        return loss, sample_size, logging_output

    def forward_with_logits(self, model: nn.Module, sample: dict[str, Any], reduce: bool = True,
                            ) -> tuple[torch.Tensor, int | torch.Tensor, dict[str, Any], torch.Tensor]:
        """fairseq's masked_lm loss, sample size and log with the accuracy added, and the logits the loss was computed
        on, those of the predicted tokens. A model that takes their positions (a bio_roberta_*) gets them, counted on
        the host (biofairseq.data.host_counts): then nothing here synchronises host and device; fairseq's loss selects
        them by a boolean mask, which does."""
        if not getattr(model, "takes_target_positions", False):
            return self._forward_with_mask(model, sample, reduce)
        positions = target_positions(sample, self.padding_idx)
        logits = model(**sample["net_input"], masked_tokens=positions)[0]
        targets = sample["target"].view(-1)[positions]
        loss = modules.cross_entropy(logits.view(-1, logits.size(-1)), targets, reduction="sum",
                                     ignore_index=self.padding_idx)
        sample_size = positions.numel()  # a host int: fairseq's trainer divides by it without asking the device
        log = {"loss": loss.data, "ntokens": sample["ntokens"], "nsentences": sample["nsentences"], "sample_size": sample_size}
        return loss, sample_size, self._log_accuracy(log, logits, targets), logits

    def _forward_with_mask(self, model, sample, reduce):
        """fairseq's own loss (stock models), the logits captured with a forward hook."""
        captured = []
        handle = model.register_forward_hook(lambda module, args, output: captured.append(output[0]))
        try:
            loss, sample_size, log = super().forward(model, sample, reduce)
        finally:
            handle.remove()
        logits, targets = captured[-1], sample["target"].view(-1)
        if logits.shape[0] != targets.numel():  # fairseq projected the masked positions only, in order
            targets = targets[targets.ne(self.padding_idx)]
        return loss, sample_size, self._log_accuracy(log, logits, targets), logits

    def _log_accuracy(self, log, logits, targets):
        with torch.no_grad():
            real = ~self.special.to(targets.device)[targets]
            log["n_correct"] = (logits.argmax(-1).view(-1).eq(targets) & real).sum().data
            log["n_real"] = real.sum().data
        return log

    @staticmethod
    def reduce_metrics(logging_outputs: list[dict[str, Any]]) -> None:
        MaskedLmLoss.reduce_metrics(logging_outputs)
        log_accuracy(logging_outputs)


def log_accuracy(logging_outputs: list[dict[str, Any]]) -> None:
    """accuracy: the masked real tokens predicted right, in %, pooled over the logged updates (biofairseq.criterions.ratios)."""
    log_ratio("accuracy", sum(log.get("n_correct", 0) for log in logging_outputs),
              sum(log.get("n_real", 0) for log in logging_outputs))
