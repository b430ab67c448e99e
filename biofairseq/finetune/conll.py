"""CoNLL token files: ``token<TAB>tag`` per line (other columns in between are ignored), a blank line between sentences."""

from collections.abc import Iterable, Sequence
from pathlib import Path

from biofairseq.atomic import write_text
from biofairseq.finetune import NERFormatError, iob2


def read_file(path: str | Path) -> list[tuple[list[str], list[str] | None]]:
    """[(tokens, tags)] of each sentence; tags are None for a one-column file (text to predict)."""
    sentences, tokens, tags, columns = [], [], [], None
    try:
        lines = Path(path).read_text(encoding="utf-8").split("\n")
    except UnicodeDecodeError:
        raise NERFormatError(f"{path}: not UTF-8 text; give a CoNLL file (token<TAB>tag) or a BRAT folder") from None
    for n, raw in enumerate([*lines, ""], 1):
        line = raw.rstrip("\r\n")
        if line.startswith("-DOCSTART-") or not line.strip():
            if tokens:
                sentences.append((tokens, tags if columns > 1 else None))
            tokens, tags = [], []
            continue
        fields = line.split("\t") if "\t" in line else line.split()
        width = min(len(fields), 2)
        if columns is None:
            columns = width
        elif width != columns:
            raise NERFormatError(f"{path}:{n}: {len(fields)} column(s) where earlier lines have {columns}; use token<TAB>tag on every line")
        tag = fields[-1]
        if width > 1 and not iob2.is_tag(tag):
            raise NERFormatError(f"{path}:{n}: tag {tag!r} is not IOB2 (O, B-TYPE, I-TYPE); convert the file to BIO tags")
        tokens.append(fields[0])
        tags.append(tag)
    return sentences


def write_file(path: str | Path, sentences: Iterable[tuple[Sequence[str], Sequence[str]]]) -> None:
    """Writes [(tokens, tags)] atomically."""
    write_text(path, "".join("".join(f"{t}\t{g}\n" for t, g in zip(tokens, tags)) + "\n" for tokens, tags in sentences))
