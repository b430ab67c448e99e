"""fairseq optimizers registered by ``--user-dir biofairseq``."""

from . import adamw, fused_adamw  # noqa: F401
