"""fairseq tasks registered by ``--user-dir biofairseq``."""

from . import document_mlm, electra  # noqa: F401
