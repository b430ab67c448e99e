"""fairseq criterions registered by ``--user-dir biofairseq``."""

from . import masked_lm_accuracy  # noqa: F401
