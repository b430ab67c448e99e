"""fairseq model architectures registered by ``--user-dir biofairseq``, and safe checkpoint loading."""

from . import bio_roberta, electra, modernbert, safe_checkpoints  # noqa: F401
