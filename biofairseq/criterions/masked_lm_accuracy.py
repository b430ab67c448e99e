"""Masked LM loss that also logs masked-token accuracy over real tokens."""

import torch
from fairseq import utils
from fairseq.criterions import register_criterion
from fairseq.criterions.masked_lm import MaskedLmConfig, MaskedLmLoss
from fairseq.logging import metrics

from biofairseq.data import special_symbols


@register_criterion("masked_lm_accuracy", dataclass=MaskedLmConfig)
class MaskedLmAccuracy(MaskedLmLoss):
    """fairseq's masked_lm loss (loss and perplexity) plus ``accuracy``, in % of the masked real tokens.

    Targets that are special symbols (``<s>``, ``</s>``, which only ``--mask-special-tokens`` selects) are
    left out of the accuracy, as BERT and ELECTRA count it; the loss is fairseq's, unchanged. The logits
    are captured with a forward hook.
    """

    def __init__(self, cfg, task):
        super().__init__(cfg, task)
        self.special = torch.from_numpy(special_symbols(task.source_dictionary))

    def forward(self, model, sample, reduce=True):
        loss, sample_size, logging_output, _ = self.forward_with_logits(model, sample, reduce)
        return loss, sample_size, logging_output

    def forward_with_logits(self, model, sample, reduce=True):
        """fairseq's loss, sample size and log with the accuracy added, and the logits the loss was computed on
        (of the masked tokens; of every token when none is masked, as fairseq does)."""
        captured = []
        handle = model.register_forward_hook(lambda module, args, output: captured.append(output[0]))
        try:
            loss, sample_size, logging_output = super().forward(model, sample, reduce)
        finally:
            handle.remove()
        logits = captured[-1]
        with torch.no_grad():  # without host-device synchronisation: shapes are known on the host
            targets = sample["target"].view(-1)
            predictions = logits.argmax(-1).view(-1)
            if predictions.numel() == targets.numel():  # fairseq projected every position (none was masked)
                gold = targets
            else:  # the masked positions, in order, as many as fairseq projected
                gold = targets[torch.nonzero_static(targets.ne(self.padding_idx), size=predictions.numel()).squeeze(1)]
            real = ~self.special.to(gold.device)[gold]
            logging_output["n_correct"] = (predictions.eq(gold) & real).sum().data
            logging_output["n_real"] = real.sum().data
        return loss, sample_size, logging_output, logits

    @staticmethod
    def reduce_metrics(logging_outputs) -> None:
        MaskedLmLoss.reduce_metrics(logging_outputs)
        log_accuracy(logging_outputs)


def log_accuracy(logging_outputs):
    """Sums the counts as tensors and divides only when a log line is printed: no synchronisation per step."""
    metrics.log_scalar_sum("_n_correct", sum(log.get("n_correct", 0) for log in logging_outputs))
    metrics.log_scalar_sum("_n_real", sum(log.get("n_real", 0) for log in logging_outputs))
    metrics.log_derived("accuracy", _accuracy)


def _accuracy(meters):
    total = utils.item(meters["_n_real"].sum)
    return round(100.0 * utils.item(meters["_n_correct"].sum) / total, 2) if total > 0 else float("nan")
