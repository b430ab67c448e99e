"""ELECTRA's loss, with the diagnostics that show a generator or discriminator that stopped learning."""

import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from fairseq import utils
from fairseq.criterions import FairseqCriterion, register_criterion
from fairseq.dataclass import FairseqDataclass
from fairseq.logging import metrics
from fairseq.tasks import FairseqTask
from torch import nn

from biofairseq.criterions.ratios import log_ratio, ratio
from biofairseq.data.host_counts import at_positions, real_positions, target_positions

logger = logging.getLogger(__name__)

# Below this accuracy on replaced tokens (%), the discriminator is taken to be at the trivial solution.
TRIVIAL_ACCURACY = 1.0
_warned = [float("-inf")]  # when the warning was last given (under fairseq-train it is checked after every update)


@dataclass
class ElectraLossConfig(FairseqDataclass):
    generator_weight: float = field(
        default=1.0, metadata={"help": "weight of the generator's MLM loss (ELECTRA: 1). 0 leaves the generator "
                               "untrained, so its samples stay near-uniform random tokens: a diagnostic that shows "
                               "whether the discriminator learns at all when replacements are easy to find"}
    )
    discriminator_weight: float = field(
        default=50.0, metadata={"help": "λ: loss = generator MLM + λ x discriminator BCE (ELECTRA: 50)"}
    )


def _auc(scores, labels):
    """Area under the ROC curve from ranks (Mann-Whitney), on the device; 0 with its weight 0 when undefined."""
    positives = labels.sum()
    negatives = labels.numel() - positives
    ranks = scores.argsort().argsort().float() + 1
    auc = (torch.where(labels, ranks, 0).sum() - positives * (positives + 1) / 2) / (positives * negatives).clamp_min(1)
    defined = (positives > 0) & (negatives > 0)
    return torch.where(defined, auc, torch.zeros_like(auc)), defined.float()


def _mean_cosine(hidden):
    """Mean cosine between distinct token vectors: 1.0 means every token got the same vector (collapse)."""
    n = hidden.shape[0]
    total = F.normalize(hidden.float(), dim=-1).sum(0)
    return (total @ total - n) / max(n * (n - 1), 1)


def _replaced_accuracy(meters):
    """disc_acc_replaced, with the warning when the discriminator is at the trivial solution: computed when printed."""
    accuracy = ratio(meters, "disc_acc_replaced")
    if accuracy < TRIVIAL_ACCURACY and time.monotonic() - _warned[0] > 30:
        _warned[0] = time.monotonic()
        logger.warning(
            f"the discriminator is at the trivial solution: {accuracy:.2f}% of replaced tokens found "
            f"(disc_loss near disc_trivial); expect it to need more updates, or check the generator's gen_acc"
        )
    return accuracy


def _trivial_loss(rate):
    """Bits per token of always answering the replace rate: its binary entropy (0 at 0 and 1)."""
    rate = torch.as_tensor(rate, dtype=torch.float64)
    return (torch.special.entr(rate) + torch.special.entr(1 - rate)) / math.log(2)


@register_criterion("electra", dataclass=ElectraLossConfig)
class ElectraLoss(FairseqCriterion):
    """generator cross-entropy (mean over the selected tokens) + λ x discriminator binary cross-entropy (mean
    over every non-pad token, <s> and </s> included, as the reference does), both computed in fp32.

    ``sample_size`` is 1 per batch: each loss is already a mean, so fairseq's trainer, which divides the
    gradients summed over GPUs and accumulated batches by the summed sample_size, ends with the mean of the
    per-batch losses, as the reference's one-batch-per-step TPU training does (token counts then weigh each
    batch equally, not each token).

    Logged (losses in bits, fairseq's convention; the rest in %): gen_loss, gen_ppl, gen_acc; disc_loss and
    disc_trivial, the loss of always answering the replace rate; disc_acc_replaced (the discriminator's recall),
    disc_acc_original, disc_precision, replace_rate (share of tokens whose sample differs from the original),
    disc_auc (per batch, averaged) and disc_cosine, the mean cosine between the discriminator's last-layer token
    vectors. While disc_acc_replaced stays below 1% the discriminator is at the trivial solution: a warning says so.
    """

    def __init__(self, cfg: ElectraLossConfig, task: FairseqTask) -> None:
        super().__init__(task)
        self.generator_weight, self.weight = cfg.generator_weight, cfg.discriminator_weight

    def forward(self, model: nn.Module, sample: dict[str, Any],
                reduce: bool = True) -> tuple[torch.Tensor, int, dict[str, Any]]:
        # positions counted on the host (biofairseq.data.host_counts): nothing here synchronises host and device
        targets, selected, real = sample["target"], target_positions(sample, self.padding_idx), real_positions(sample, self.padding_idx)
        out = model(**sample["net_input"], targets=targets, target_positions=selected)
        gold = targets.view(-1)[selected]
        generator_logits = out["generator_logits"].float()
        generator_loss = F.cross_entropy(generator_logits, gold)
        logits = out["discriminator_logits"].float().view(-1)[real]
        replaced = out["replaced"].view(-1)[real]
        discriminator_loss = F.binary_cross_entropy_with_logits(logits, replaced.float())
        loss = self.generator_weight * generator_loss + self.weight * discriminator_loss

        with torch.no_grad():
            predicted = logits > 0
            auc, auc_defined = _auc(logits, replaced)
            log = {
                "loss": loss.detach(), "gen_loss": generator_loss.detach(), "disc_loss": discriminator_loss.detach(),
                "gen_correct": generator_logits.argmax(-1).eq(gold).sum(), "n_selected": selected.numel(),
                "n_real": real.numel(), "n_replaced": replaced.sum(), "disc_true_replaced": (predicted & replaced).sum(),
                "disc_true_original": (~predicted & ~replaced).sum(), "disc_said_replaced": predicted.sum(),
                "auc": auc, "auc_batches": auc_defined,
                "cosine": _mean_cosine(at_positions(out["discriminator_hidden"], real)), "batches": 1,
                "temperature": model.temperature,
                "ntokens": sample["ntokens"], "nsentences": sample["nsentences"], "sample_size": 1,
            }
        return loss, 1, log

    @staticmethod
    def reduce_metrics(logging_outputs: list[dict[str, Any]]) -> None:
        """Nothing here reads the device: sums stay where they are, ratios divide when printed (criterions.ratios)."""
        total = lambda key: sum(log.get(key, 0) for log in logging_outputs)
        batches = total("batches") or 1  # host ints, as are n_selected and n_real
        for key in ("loss", "gen_loss", "disc_loss"):
            metrics.log_scalar(key, total(key) / batches / math.log(2), batches, round=3)
        metrics.log_derived("gen_ppl", lambda meters: utils.get_perplexity(meters["gen_loss"].avg))
        real, selected, replaced = total("n_real"), total("n_selected"), total("n_replaced")
        if selected:
            metrics.log_scalar("gen_acc", 100 * total("gen_correct") / selected, selected, round=2)
        if real:
            metrics.log_scalar("replace_rate", 100 * replaced / real, real, round=2)
            metrics.log_scalar("disc_trivial", _trivial_loss(replaced / real), real, round=3)
        log_ratio("disc_acc_original", total("disc_true_original"), real - replaced)
        log_ratio("disc_acc_replaced", total("disc_true_replaced"), replaced, derive=_replaced_accuracy)
        log_ratio("disc_precision", total("disc_true_replaced"), total("disc_said_replaced"))
        log_ratio("disc_auc", total("auc"), total("auc_batches"), scale=1.0, ndigits=4)
        metrics.log_scalar("disc_cosine", total("cosine") / batches, batches, round=4)
        metrics.log_scalar("gen_temperature", total("temperature") / batches, batches, round=3)
        metrics.log_scalar("ntokens", total("ntokens"))
        metrics.log_scalar("nsentences", total("nsentences"))

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True
