"""The check every conversion ends with: the same ids, logits and hidden states from both models.

A padded batch of Spanish and English biomedical sentences of different lengths (one token masked) goes through
both models in fp32 and eval mode; differences are taken over the real tokens only, since what a model puts at
padding positions is never used (fairseq zeroes their embeddings, transformers does not).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Optional

import torch

from biofairseq.convert import ConvertError

if TYPE_CHECKING:
    from fairseq.data import Dictionary
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

TOLERANCE = 1e-4

SENTENCES = (
    "Paciente de 67 años con hipertensión arterial y diabetes mellitus tipo 2 que acude a urgencias por dolor "
    "torácico opresivo de 2 horas de evolución, irradiado al brazo izquierdo.",
    "Se pautó amoxicilina-ácido clavulánico 875/125 mg cada 8 horas.",
    "La biopsia mostró un carcinoma ductal infiltrante (grado histológico II, receptores de estrógenos positivos).",
    "No refiere alergias medicamentosas conocidas.",
    "Mutations in BRCA1 and BRCA2 increase the lifetime risk of breast and ovarian cancer.",
    "The patient was treated with 5 mg/kg of intravenous methylprednisolone for three days.",
    "Fever.",
)


@dataclass
class Parity:
    sentences: int
    batch_shape: list
    ids_identical: bool
    max_abs_diff_logits: float
    max_abs_diff_hidden: float
    first_id_mismatch: str = ""

    def passed(self, tolerance: float = TOLERANCE) -> bool:
        return self.ids_identical and max(self.max_abs_diff_logits, self.max_abs_diff_hidden) <= tolerance

    def summary(self) -> str:
        ids = "token ids identical" if self.ids_identical else f"token ids differ ({self.first_id_mismatch})"
        return (
            f"parity on {self.sentences} sentences (padded batch {self.batch_shape[0]}x{self.batch_shape[1]}, fp32): "
            f"{ids}; max |logits diff| {self.max_abs_diff_logits:.2e}, "
            f"max |last hidden state diff| {self.max_abs_diff_hidden:.2e} (tolerance {TOLERANCE:.0e})"
        )

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "tolerance": TOLERANCE}


# for models with local attention (ModernBERT's 128-token window): one sequence longer than a window, by far
LONG = " ".join(SENTENCES[:4] * 2)


def check(fairseq_model: torch.nn.Module, fairseq_encode: Callable[[str], list[int]], hf_model: PreTrainedModel,
          hf_tokenizer: PreTrainedTokenizerBase, pad: int, mask: int, long: bool = False,
          hf_ids: Optional[Sequence[int]] = None) -> Parity:
    """Compares a fairseq RobertaModel and a transformers *ForMaskedLM on SENTENCES (and LONG). ``hf_ids``: the
    transformers id of each fairseq index, where the dictionary renumbered them (``vocabulary.fairseq_order``)."""
    sentences = SENTENCES + ((LONG,) if long else ())
    to_hf = torch.tensor(hf_ids) if hf_ids is not None else None
    fairseq_ids = [fairseq_encode(s) for s in sentences]
    as_hf = fairseq_ids if to_hf is None else [to_hf[ids].tolist() for ids in fairseq_ids]
    hf_ids = hf_tokenizer(list(sentences))["input_ids"]
    mismatch = next(
        (f"sentence {i + 1}: fairseq {a[:12]}... transformers {b[:12]}..." for i, (a, b) in
         enumerate(zip(as_hf, hf_ids)) if a != b), ""
    )
    ids = [list(x) for x in fairseq_ids]
    ids[1][len(ids[1]) // 2] = mask  # the masked-LM case the models are made for
    width = max(map(len, ids))
    tokens = torch.full((len(ids), width), pad, dtype=torch.long)
    for row, seq in zip(tokens, ids):
        row[: len(seq)] = torch.tensor(seq)
    real = tokens.ne(pad)
    with torch.no_grad():
        fairseq_logits = fairseq_model(tokens)[0]
        fairseq_hidden = fairseq_model(tokens, features_only=True)[0]
        hf_tokens = tokens if to_hf is None else to_hf[tokens]
        hf_logits = hf_model(input_ids=hf_tokens, attention_mask=real.long()).logits
        hf_hidden = hf_model.base_model(input_ids=hf_tokens, attention_mask=real.long()).last_hidden_state
        if to_hf is not None and hf_logits.dim() == 3:  # a vocabulary's logits (not a discriminator's, one a token)
            hf_logits = hf_logits[..., to_hf]
    diff = lambda a, b: (a.float() - b.float()).abs()[real].max().item()
    return Parity(
        len(ids), list(tokens.shape), not mismatch, diff(fairseq_logits, hf_logits), diff(fairseq_hidden, hf_hidden),
        mismatch,
    )


def verify(fairseq_model: torch.nn.Module, fairseq_encode: Callable[[str], list[int]], hf_model: PreTrainedModel,
           hf_tokenizer: PreTrainedTokenizerBase, dictionary: Dictionary, report: dict[str, Any],
           log: Callable[[str], None], what: str, long: bool = False, hf_ids: Optional[Sequence[int]] = None,
           differs: Sequence[str] = ()) -> None:
    """Runs the check, prints it and records it in the report; fails the conversion above the tolerance, naming
    ``differs``: the settings of the transformers model that the fairseq model computes otherwise."""
    result = check(fairseq_model, fairseq_encode, hf_model, hf_tokenizer, dictionary.pad(), dictionary.index("<mask>"),
                   long, hf_ids)
    log(result.summary())
    report["parity"] = result.as_dict()
    if not result.passed():
        where = f"; the transformers config differs from the fairseq model in: {'; '.join(differs)}" if differs else ""
        raise ConvertError(f"{what} fails the parity check: {result.summary()}{where}")
