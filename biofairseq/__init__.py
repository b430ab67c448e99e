"""biofairseq: biomedical language models on fairseq. Also a fairseq ``--user-dir``.

Importing registers the tasks, criterions and models; it stays cheap (no transformers, tokenizers
or sklearn of its own). The commands import ``corpus``, ``convert`` and ``finetune`` themselves.
"""

from . import criterions, models, tasks  # noqa: F401

__version__ = "0.1.0"
