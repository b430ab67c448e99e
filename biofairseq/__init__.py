"""biofairseq: biomedical language models on fairseq. Also a fairseq ``--user-dir``.

Importing registers the tasks, criterions, models, optimizers and the safe checkpoint loader with fairseq: at once when
fairseq is loaded (as it is when fairseq imports its --user-dir), otherwise as soon as fairseq is imported.
fairseq's ``--user-dir``/``user_dir=`` skips a package that is already imported, so code that imports
biofairseq first and fairseq later would otherwise find neither ``document_mlm`` nor a loader for our
checkpoints. The corpus scripts never import fairseq and start in a fraction of a second instead of the
4 s that importing fairseq takes. Importing stays cheap either way (no transformers, tokenizers or sklearn).
"""

import importlib.abc
import importlib.util
import sys

__version__ = "0.1.0"


def register():
    """Registers document_mlm and electra, their criterions, the bio_roberta_* and electra_* architectures,
    fused_adamw and the safe loader."""
    from . import criterions, models, optim, tasks  # noqa: F401


class _RegisterAfterFairseq(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the loader of ``fairseq`` so that ``register()`` runs once it has loaded."""

    def find_spec(self, name, path=None, target=None):
        if name != "fairseq":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            exec_module = spec.loader.exec_module

            def exec_then_register(module):
                exec_module(module)
                register()

            spec.loader.exec_module = exec_then_register
        return spec


if "fairseq" in sys.modules:
    register()
elif not any(isinstance(finder, _RegisterAfterFairseq) for finder in sys.meta_path):
    sys.meta_path.insert(0, _RegisterAfterFairseq())
