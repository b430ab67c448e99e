"""Model cards: the ``README.md`` of a model folder, Hugging Face Hub metadata (YAML) above a Markdown body.

The Hub reads the metadata (``language``, ``license``, ``tags``, ``base_model``, ``datasets``, ``model-index``) to
index and display a model; ``huggingface_hub.ModelCard.load(folder / "README.md")`` reads the file back. Written
atomically, as every other output, so a folder never holds half a card.
"""

from pathlib import Path
from typing import Any

from biofairseq.atomic import write_text

CARD = "README.md"


def _clean(value: Any) -> Any:
    """The metadata without empty entries (unknown fields are left out, not written as null) and with plain Python
    numbers (numpy's would not dump as YAML)."""
    if isinstance(value, dict):
        cleaned = {str(k): _clean(v) for k, v in value.items()}
        return {k: v for k, v in cleaned.items() if v not in (None, [], {}, "")}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value if v is not None]
    if hasattr(value, "item"):  # numpy and torch scalars
        return value.item()
    return value


def card_text(metadata: dict[str, Any], body: str) -> str:
    """The card as text: ``---``, the metadata as YAML, ``---``, a blank line, the body."""
    import yaml

    head = yaml.safe_dump(_clean(metadata), sort_keys=False, allow_unicode=True, width=1000)
    return f"---\n{head}---\n\n{body.strip()}\n"


def write_model_card(folder: str | Path, metadata: dict[str, Any], body: str) -> Path:
    """Writes ``folder/README.md``: ``metadata`` (a dict, as the Hub's model card metadata; None and empty values are
    left out) as YAML front matter, then ``body`` (Markdown). Returns its path."""
    path = Path(folder) / CARD
    write_text(path, card_text(metadata, body))
    return path


def read_metadata(folder: str | Path) -> dict[str, Any]:
    """The metadata of ``folder/README.md`` as a dict ({} without a card or without front matter): what a model
    derived from this one can inherit (language, license)."""
    import yaml

    path = Path(folder) / CARD
    if not path.is_file():
        return {}
    text = path.read_text(encoding="utf-8-sig")
    if not text.startswith("---"):
        return {}
    head, sep, _ = text[3:].partition("\n---")
    try:
        found = yaml.safe_load(head) if sep else None
    except yaml.YAMLError:
        return {}
    return found if isinstance(found, dict) else {}
