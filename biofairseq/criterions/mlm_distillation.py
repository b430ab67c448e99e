"""Task-agnostic knowledge distillation of a masked LM into a student of any width (bio-lm, section 7.1)."""

import contextlib
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

import torch
import torch.nn.functional as F
from fairseq import utils
from fairseq.criterions import register_criterion
from fairseq.criterions.masked_lm import MaskedLmConfig
from fairseq.data import Dictionary
from fairseq.logging import metrics
from fairseq.models import BaseFairseqModel
from fairseq.tasks import FairseqTask
from omegaconf import DictConfig
from torch import nn
from torch.nn.modules.module import _IncompatibleKeys

from biofairseq.criterions.masked_lm_accuracy import MaskedLmAccuracy, log_accuracy
from biofairseq.data.host_counts import at_positions, real_positions, target_positions


@dataclass
class MlmDistillationConfig(MaskedLmConfig):
    teacher_path: str = field(
        default="", metadata={"help": "the teacher: a fairseq RoBERTa checkpoint (.pt) trained on the same dictionary"}
    )
    teacher_dict: Optional[str] = field(
        default=None, metadata={"help": "the teacher's dict.txt, when not in the data-bin its checkpoint names"}
    )
    alpha_mlm: float = field(default=5.0, metadata={"help": "weight of the MLM cross-entropy (bio-lm: 5.0)"})
    alpha_kl: float = field(
        default=2.0, metadata={"help": "weight of KL(teacher || student) on the masked tokens (bio-lm: 2.0)"}
    )
    temperature: float = field(
        default=2.0, metadata={"help": "softmax temperature of the KL term, which is scaled by its square (bio-lm: 2.0)"}
    )
    alpha_cos: float = field(
        default=1.0, metadata={"help": "weight of the cosine loss between the last hidden states of non-pad tokens, "
                               "through a learned projection when the widths differ (bio-lm: 1.0; 0 turns it off)"}
    )
    student_dim: int = field(
        default=0, metadata={"help": "the student's width; 0 (default): its --encoder-embed-dim, from the model's settings"}
    )


def _student_dim(cfg):
    """--encoder-embed-dim of the model fairseq-train builds beside this criterion (omegaconf cannot interpolate into
    the argparse Namespace that fairseq keeps for RoBERTa's settings, so it is read from the config's root)."""
    if cfg.student_dim:
        return cfg.student_dim
    model = getattr(cfg._get_root(), "model", None) if isinstance(cfg, DictConfig) else None
    dim = getattr(model, "encoder_embed_dim", None)
    if not dim:
        raise ValueError("--student-dim: the student's width is not in the model's settings; give it")
    return dim


@contextlib.contextmanager
def last_hidden_states(model: nn.Module) -> Iterator[list[torch.Tensor]]:
    """Catches the last hidden states (B x T x C, after any final LayerNorm: what the LM head reads) with a hook on
    fairseq's encoder, so that the model is still called through its one ``forward`` (and any DDP wrapper)."""
    captured = []
    handle = model.encoder.sentence_encoder.register_forward_hook(
        lambda module, args, output: captured.append(output["encoder_out"][0].transpose(0, 1)))
    try:
        yield captured
    finally:
        handle.remove()


def _projected_positions(masked):
    """The positions fairseq's masked_lm projects: the masked ones, or every one when none is (as its loss does)."""
    if masked.device.type == "cpu":
        return masked if masked.any() else None
    return torch.where(masked.any(), masked, masked.new([True]))


def softened_kl(student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """T² x KL(teacher_T || student_T), summed over the rows: Hinton et al.'s soft-target term, each distribution a
    softmax of the logits divided by T (DistilBERT's distiller computes the same), in fp32."""
    student = F.log_softmax(student_logits.float() / temperature, dim=-1)
    teacher = F.log_softmax(teacher_logits.float() / temperature, dim=-1)
    return F.kl_div(student, teacher, log_target=True, reduction="sum") * temperature**2


def load_teacher(path: str, dict_path: str | None, dictionary: Dictionary,
                 pack_documents: bool = False) -> BaseFairseqModel:
    """The teacher as an eval-mode model without gradients, read through the safe loader, built for the student's
    rows (each document of a packed row alone too); its dictionary must be the student's, entry for entry."""
    from biofairseq.checkpoints import CheckpointError, load

    if not path:
        raise ValueError("--teacher-path: missing; give the teacher's fairseq checkpoint (.pt)")
    try:
        teacher = load(path, dict_path, pack_documents)
    except CheckpointError as error:
        raise ValueError(f"--teacher-path: {error}") from None
    if teacher.electra:
        raise ValueError(f"{path}: an ELECTRA checkpoint; the teacher must be a masked LM (a RoBERTa checkpoint)")
    theirs, ours = teacher.dictionary.symbols, dictionary.symbols
    differ = [i for i in range(max(len(theirs), len(ours))) if theirs[i:i + 1] != ours[i:i + 1]]
    if differ:
        i = differ[0]
        entry = lambda symbols: repr(symbols[i]) if i < len(symbols) else "nothing"
        raise ValueError(
            f"{teacher.dictionary.path}: the teacher's dictionary ({len(theirs)} entries) differs from the student's "
            f"({len(ours)}) in {len(differ)} entries, first at index {i}: {entry(theirs)} (teacher) vs {entry(ours)} "
            "(student); binarize the student's data with the teacher's dict.txt (fairseq-preprocess --srcdict)"
        )
    return teacher.model.requires_grad_(False)


@register_criterion("mlm_distillation", dataclass=MlmDistillationConfig)
class MlmDistillation(MaskedLmAccuracy):
    """alpha_mlm x MLM cross-entropy + alpha_kl x T² x KL(teacher_T || student_T) on the masked tokens + alpha_cos
    x (1 - cosine) between the student's last hidden states (projected to the teacher's width when it differs)
    and the teacher's, on every non-pad token. The teacher reads the same masked input as the student.

    The teacher is held outside the criterion's modules: fairseq puts a criterion's parameters into the optimizer,
    casts and DDP-wraps them, and saves them in every checkpoint. It is moved and cast to the student's device and
    precision at the first batch, and runs in eval mode without gradients. The projection is a parameter of the
    criterion, so it is trained with the student and saved in its checkpoints (under ``criterion``), which
    conversion to transformers ignores.

    Normalised as fairseq's masked_lm: the cross-entropy and KL sums are divided by the masked-token count; the
    cosine term is the mean over the batch's non-pad tokens. KL and cosine are computed in fp32. Logged apart (bits
    per masked token, as fairseq logs losses): mlm_loss with its ppl and accuracy, kl_loss (with T²), cos_loss (mean
    1 - cosine) and teacher_mlm_loss with its teacher_ppl on the same batch.
    """

    def __init__(self, cfg: MlmDistillationConfig, task: FairseqTask) -> None:
        super().__init__(cfg, task)
        self.alpha_mlm, self.alpha_kl, self.alpha_cos, self.temperature = cfg.alpha_mlm, cfg.alpha_kl, cfg.alpha_cos, cfg.temperature
        if cfg.temperature <= 0:
            raise ValueError(f"--temperature {cfg.temperature}: must be above 0 (bio-lm: 2.0)")
        # a tuple, so that nn.Module does not register the teacher as a submodule
        self._teacher = (load_teacher(cfg.teacher_path, cfg.teacher_dict, task.source_dictionary,
                                      getattr(task.cfg, "pack_documents", False)),)
        teacher_dim = self.teacher.encoder.lm_head.dense.in_features
        self.projection = None
        if cfg.alpha_cos:
            student_dim = _student_dim(cfg)
            if student_dim != teacher_dim:
                self.projection = nn.Linear(student_dim, teacher_dim)

    @property
    def teacher(self) -> BaseFairseqModel:
        return self._teacher[0]

    def load_state_dict(self, state_dict: Mapping[str, Any] | None, strict: bool = True,
                        **kwargs: Any) -> _IncompatibleKeys | None:
        """A checkpoint of plain MLM training (the student's start, --finetune-from-model) saved no criterion: the
        projection keeps its fresh initialisation."""
        if state_dict is None:
            return None
        return super().load_state_dict(state_dict, strict, **kwargs)

    def _teacher_like(self, model):
        parameter = next(model.parameters())
        current = next(self.teacher.parameters())
        if (current.device, current.dtype) != (parameter.device, parameter.dtype):
            self.teacher.to(device=parameter.device, dtype=parameter.dtype)  # the trainer's precision, once
        return self.teacher

    def forward(self, model: nn.Module, sample: dict[str, Any],
                reduce: bool = True) -> tuple[torch.Tensor, int | torch.Tensor, dict[str, Any]]:
        with last_hidden_states(model) as student_hidden:
            mlm_loss, sample_size, log, logits = self.forward_with_logits(model, sample, reduce)
        teacher = self._teacher_like(model)
        tokens = sample["net_input"]["src_tokens"]
        targets = sample["target"]
        if getattr(teacher, "takes_target_positions", False):  # as the student's were (see MaskedLmAccuracy)
            predicted = target_positions(sample, self.padding_idx)
            gold = targets.view(-1)[predicted]
        else:
            predicted = _projected_positions(targets.ne(self.padding_idx))
            gold = targets.view(-1) if predicted is None else targets[predicted]
        with torch.no_grad(), last_hidden_states(teacher) as teacher_hidden:
            teacher_logits = teacher(tokens, masked_tokens=predicted, segments=sample["net_input"].get("segments"))[0]
        vocabulary = logits.shape[-1]
        logits, teacher_logits = logits.view(-1, vocabulary), teacher_logits.view(-1, vocabulary)
        kl_loss = softened_kl(logits, teacher_logits, self.temperature)
        loss = self.alpha_mlm * mlm_loss + self.alpha_kl * kl_loss
        if self.alpha_cos:
            real = real_positions(sample, self.padding_idx)
            student = at_positions(student_hidden[-1], real).float()
            if self.projection is not None:
                student = F.linear(student, self.projection.weight.float(), self.projection.bias.float())
            cosine = 1 - F.cosine_similarity(student, at_positions(teacher_hidden[-1], real).float(), dim=-1)
            cos_loss = cosine.mean() * sample_size  # a mean over tokens, once fairseq divides by sample_size
            loss = loss + self.alpha_cos * cos_loss
        else:
            cos_loss = torch.zeros((), device=loss.device)
        with torch.no_grad():
            teacher_mlm_loss = F.cross_entropy(teacher_logits.float(), gold, reduction="sum", ignore_index=self.padding_idx)
        log.update(loss=loss.detach(), mlm_loss=mlm_loss.detach(), kl_loss=kl_loss.detach(), cos_loss=cos_loss.detach(),
                   teacher_mlm_loss=teacher_mlm_loss)
        return loss, sample_size, log

    @staticmethod
    def reduce_metrics(logging_outputs: list[dict[str, Any]]) -> None:
        total = lambda key: sum(log.get(key, 0) for log in logging_outputs)  # tensors stay on the device
        sample_size = total("sample_size")
        for key in ("loss", "mlm_loss", "kl_loss", "teacher_mlm_loss"):
            metrics.log_scalar(key, total(key) / sample_size / math.log(2), sample_size, round=3)
        metrics.log_scalar("cos_loss", total("cos_loss") / sample_size, sample_size, round=4)
        metrics.log_derived("ppl", lambda meters: utils.get_perplexity(meters["mlm_loss"].avg))
        metrics.log_derived("teacher_ppl", lambda meters: utils.get_perplexity(meters["teacher_mlm_loss"].avg))
        log_accuracy(logging_outputs)
