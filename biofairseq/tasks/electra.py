"""ELECTRA's replaced-token detection on document-level blocks, exactly as document_mlm builds them."""

from dataclasses import dataclass, field
from typing import Optional

import numpy as np
from fairseq.data import Dictionary
from fairseq.tasks import register_task

from biofairseq.criterions.electra import ElectraLoss
from biofairseq.tasks.document_mlm import DocumentMLMConfig, DocumentMLMTask


@dataclass
class ElectraTaskConfig(DocumentMLMConfig):
    leave_unmasked_prob: float = field(
        default=0.15, metadata={"help": "share of the selected tokens left as they are (ELECTRA: 15%; the other "
                                "85% become <mask>)"}
    )
    random_token_prob: float = field(
        default=0.0, metadata={"help": "must be 0: the generator, not chance, replaces tokens in ELECTRA"}
    )


@register_task("electra", dataclass=ElectraTaskConfig)
class ElectraTask(DocumentMLMTask):
    """Selects --mask-prob (15%; 25% for large) of the real tokens of each block, at least one; of those 85%
    become <mask> and 15% stay. The model's generator fills them in; ``--criterion electra`` trains both towers.
    """

    CRITERIA = (ElectraLoss,)
    CRITERION_ADVICE = "the model returns both towers' outputs, which only ELECTRA's loss reads; use --criterion electra"

    def __init__(self, cfg: ElectraTaskConfig, dictionary: Optional[Dictionary] = None) -> None:
        if cfg.random_token_prob != 0:
            raise ValueError("--random-token-prob: ELECTRA replaces tokens with generator samples, not random ones; drop the flag")
        if cfg.mask_special_tokens:
            raise ValueError("--mask-special-tokens: ELECTRA selects real tokens only (a sample at <s> or </s> would "
                             "change the structure of the block); drop the flag")
        super().__init__(cfg, dictionary)

    def masking_options(self) -> dict[str, np.ndarray | bool]:
        return {**super().masking_options(), "at_least_one": True}
