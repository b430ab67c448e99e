"""fairseq optimizers registered by ``--user-dir biofairseq``."""

from . import fused_adamw  # noqa: F401
