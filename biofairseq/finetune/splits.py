"""An NER data set's splits and CoNLL file endings, named once: the recipes, the readers and the model card use them."""

from pathlib import Path

# a split's role: the names a folder or file may have for it, in the order they are looked for
ROLES = {"train": ("train",), "dev": ("valid", "dev", "devel"), "test": ("test",)}
NAMES = tuple(name for names in ROLES.values() for name in names)
CONLL_SUFFIXES = (".conll", ".tsv", ".bio")


def find(folder, role):
    """The first of folder/NAME, folder/NAME.conll, .tsv, .bio that exists for the role (as folder spells it), or None."""
    folder = str(folder)
    base = folder[:-1] if folder.endswith("/") and folder != "/" else folder
    for name in ROLES[role]:
        for suffix in ("", *CONLL_SUFFIXES):
            if Path(f"{base}/{name}{suffix}").exists():
                return f"{base}/{name}{suffix}"
    return None
