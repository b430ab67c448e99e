"""An NER data set's splits and file endings, named once: the recipes, the readers and the model card use them."""

from pathlib import Path

# a split's role: the names a folder or file may have for it, in the order they are looked for
ROLES = {"train": ("train",), "dev": ("valid", "dev", "devel"), "test": ("test",)}
NAMES = tuple(name for names in ROLES.values() for name in names)
CONLL_SUFFIXES = (".conll", ".tsv", ".bio")
JSON_SUFFIXES = (".jsonl", ".json")  # the annotation tools' exports, token lists (biofairseq.finetune.json_formats)
FILE_SUFFIXES = (*CONLL_SUFFIXES, *JSON_SUFFIXES)


def find(folder: str | Path, role: str) -> str | None:
    """The first of folder/NAME, folder/NAME.conll, .tsv, .bio, .jsonl, .json that exists for the role (as folder
    spells it), or None."""
    folder = str(folder)
    base = folder[:-1] if folder.endswith("/") and folder != "/" else folder
    for name in ROLES[role]:
        for suffix in ("", *FILE_SUFFIXES):
            if Path(f"{base}/{name}{suffix}").exists():
                return f"{base}/{name}{suffix}"
    return None
