"""biofairseq: biomedical language models on fairseq. Also a fairseq ``--user-dir``.

Importing registers the tasks, criterions, models, optimizers and the safe checkpoint loader with fairseq: at once when
fairseq is loaded (as it is when fairseq imports its --user-dir), otherwise as soon as fairseq has been imported and
no biofairseq import is under way. fairseq's ``--user-dir``/``user_dir=`` skips a package that is already imported,
so code that imports biofairseq first and fairseq later would otherwise find neither ``document_mlm`` nor a loader
for our checkpoints. Registration waits for the biofairseq imports in progress because one of our modules may be what
imported fairseq (``import biofairseq.data.packing`` in a fresh process): registering then would import the
criterions, which need that module while it is half-initialised. The corpus scripts never import fairseq and start
in a fraction of a second instead of the 4 s that importing fairseq takes. Importing stays cheap either way (no
transformers, tokenizers or sklearn).
"""

import importlib.abc
import importlib.util
import sys
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Optional, Sequence

__version__ = "0.1.0"


def register() -> None:
    """Registers document_mlm and electra, their criterions, the bio_roberta_* and electra_* architectures,
    fused_adamw and the safe loader."""
    from . import criterions, models, optim, tasks  # noqa: F401


class _RegisterAfterFairseq(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the loaders of ``fairseq`` and of our own modules so that ``register()`` runs once
    fairseq has loaded and the outermost biofairseq import in progress has finished."""

    def __init__(self) -> None:
        self.importing = 0  # biofairseq modules being executed, nested
        self.fairseq_loaded = False

    def find_spec(self, name: str, path: Optional[Sequence[str]] = None,
                  target: Optional[ModuleType] = None) -> Optional[ModuleSpec]:
        if name != "fairseq" and not name.startswith(__name__ + "."):
            return None
        for finder in sys.meta_path:  # the spec the other finders would give
            spec = None if finder is self else getattr(finder, "find_spec", lambda *a: None)(name, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_register(module: ModuleType) -> None:
            self.importing += name != "fairseq"
            try:
                exec_module(module)
            finally:
                self.importing -= name != "fairseq"
            self.fairseq_loaded |= name == "fairseq"
            if self.fairseq_loaded and not self.importing and self in sys.meta_path:
                sys.meta_path.remove(self)
                register()

        spec.loader.exec_module = exec_then_register
        return spec


if "fairseq" in sys.modules:
    register()
elif not any(isinstance(finder, _RegisterAfterFairseq) for finder in sys.meta_path):
    sys.meta_path.insert(0, _RegisterAfterFairseq())
