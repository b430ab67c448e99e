"""fairseq criterions registered by ``--user-dir biofairseq``."""

from . import electra, masked_lm_accuracy, mlm_distillation  # noqa: F401
