"""fairseq criterions registered by ``--user-dir biofairseq``."""

from . import electra, masked_lm_accuracy  # noqa: F401
