"""biofairseq: biomedical language models on fairseq. Also a fairseq ``--user-dir``.

Importing registers the tasks, criterions and models with fairseq when fairseq is already loaded, as it is
when fairseq imports its --user-dir. The corpus scripts, which never need fairseq, then start in a fraction
of a second instead of the 4 s that importing fairseq takes; code that imports biofairseq before fairseq
and then uses the registered names calls ``register()``. Importing stays cheap either way (no transformers,
tokenizers or sklearn of its own).
"""

import sys

__version__ = "0.1.0"


def register():
    """Registers document_mlm, masked_lm_accuracy and the bio_roberta_* architectures with fairseq."""
    from . import criterions, models, tasks  # noqa: F401


if "fairseq" in sys.modules:
    register()
