"""BRAT standoff folders (``X.txt`` + ``X.ann``, as PharmaCoNER, CANTEMIST, MEDDOCAN): read entities, write predictions."""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from biofairseq.atomic import write_text
from biofairseq.finetune import NERFormatError
from biofairseq.finetune import splits as split_names


@dataclass
class Entity:
    start: int
    end: int
    type: str
    where: str  # "file:line" of its .ann line, for reports


@dataclass
class Document:
    id: str  # path of the .txt relative to the folder, without the suffix
    text: str
    entities: list = field(default_factory=list)
    annotated: bool = True  # False when the .txt has no .ann beside it (text to predict)




def read_folder(folder: str | Path, problems: list[tuple[str, str]], texts: Sequence[Path] | None = None,
                ignored: list[Path] | None = None) -> list[Document]:
    """The documents of a BRAT folder (searched recursively), in file order, or of the ``texts`` given in it.

    Entity lines are ``T<n>\\tTYPE START END[;START END]\\tMENTION``; notes (``#``), relations, events and
    attributes are skipped. Problems that do not stop the reading are appended to ``problems`` as
    (kind, message): a mention that disagrees with its offsets is kept by its offsets ("misaligned"); a
    discontinuous entity is joined into its outer span ("discontinuous"); one outside the text is dropped
    ("outside"). Files other than .txt and .ann (README.md, .DS_Store, metadata) and hidden ones (macOS's ``._X.txt``,
    ``.ipynb_checkpoints/``) are skipped and, when ``ignored`` is a list, appended to it.
    """
    folder = Path(folder)
    if texts is None:
        files = [p for p in sorted(folder.rglob("*")) if p.is_file()]
        texts = [p for p in files if p.suffix == ".txt" and not hidden(p, folder)]
        if ignored is not None:
            ignored += [p for p in files if hidden(p, folder) or p.suffix not in (".txt", ".ann")]
        for ann in (p for p in files if p.suffix == ".ann" and not hidden(p, folder)):
            if not ann.with_suffix(".txt").is_file():
                raise NERFormatError(f"{ann}: BRAT file without its .txt; add it or remove the .ann")
        splits = [name for name in split_names.NAMES if any(p.relative_to(folder).parts[0] == name for p in texts if len(p.relative_to(folder).parts) > 1)]
        if len(splits) > 1:
            raise NERFormatError(f"{folder}: holds the splits {', '.join(s + '/' for s in splits)} of a data set; give one of them (e.g. {folder / splits[0]}), not their parent")
        if not texts:
            found = sorted({p.suffix for p in files if not hidden(p, folder)} - {""})
            has = f" (it has {', '.join(found)} files)" if found else " (it is empty)" if not files else ""
            raise NERFormatError(f"{folder}: no .txt files{has}; give a BRAT folder (X.txt + X.ann) or a CoNLL file (.conll, .tsv, .bio)")
    documents = []
    for txt in texts:
        ann = txt.with_suffix(".ann")
        doc = Document(str(txt.relative_to(folder).with_suffix("")), read_text(txt), [], ann.is_file())
        if doc.annotated:
            doc.entities = _entities(ann, doc.text, problems)
        documents.append(doc)
    return documents


def hidden(path: Path, folder: Path) -> bool:
    """A file or folder that tools and systems leave (macOS's ``._X.txt``, ``.ipynb_checkpoints/``), not data."""
    return any(part.startswith(".") for part in path.relative_to(folder).parts)


def read_text(path: str | Path) -> str:
    """A file's text exactly as it is: BRAT offsets count its characters, "\\r\\n" as two."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            return f.read()
    except UnicodeDecodeError as error:
        raise NERFormatError(f"{path}: not UTF-8 text (byte {error.start}); convert it to UTF-8 (iconv -f latin1 -t utf-8) or move it out") from None


def mentions(documents: Iterable[Document]) -> set[tuple[str, int, int, str]]:
    """Every entity of annotated BRAT documents as a set of (document, start, end, type): nested, overlapping
    and discontinuous ones (by their outer span) included, each distinct mention once, as the PharmaCoNER and
    CANTEMIST scorers count them."""
    return {(doc.id, e.start, e.end, e.type) for doc in documents if doc.annotated for e in doc.entities}


def _entities(ann: Path, text: str, problems: list[tuple[str, str]]) -> list[Entity]:
    entities = []
    for n, line in enumerate(read_text(ann).splitlines(), 1):
        if not line.startswith("T"):
            continue
        where = f"{ann}:{n}"
        try:
            _, span, mention = line.split("\t", 2)
            kind, offsets = span.split(" ", 1)
            parts = [tuple(map(int, p.split())) for p in offsets.split(";")]
            if any(len(p) != 2 or p[0] > p[1] for p in parts):
                raise ValueError
        except ValueError:
            raise NERFormatError(f"{where}: not a BRAT entity line (T<n>\\tTYPE START END\\tMENTION); fix or remove it") from None
        start, end = parts[0][0], parts[-1][1]
        if end > len(text) or start >= end:
            problems.append(("outside", f"{where}: {kind} {start}-{end} is outside the text or empty; dropped"))
            continue
        if len(parts) > 1:
            problems.append(("discontinuous", f"{where}: discontinuous {kind} {offsets}; kept as its outer span {start}-{end}"))
        elif text[start:end] != mention:
            problems.append(("misaligned", f"{where}: offsets {start}-{end} give {text[start:end]!r}, the mention says {mention!r}; kept by its offsets"))
        entities.append(Entity(start, end, kind, where))
    return entities


def write_folder(folder: str | Path, documents: Iterable[Document],
                 entities_by_doc: Mapping[str, Iterable[tuple[int, int, str]]]) -> None:
    """``X.txt`` and ``X.ann`` for each document, the entities as ``(start, end, type)`` character spans."""
    folder = Path(folder)
    for doc in documents:
        txt = folder / f"{doc.id}.txt"
        txt.parent.mkdir(parents=True, exist_ok=True)
        write_text(txt, doc.text)
        lines = [
            f"T{i}\t{kind} {start} {end}\t{doc.text[start:end].replace(chr(13), ' ').replace(chr(10), ' ')}"
            for i, (start, end, kind) in enumerate(sorted(entities_by_doc.get(doc.id, [])), 1)
        ]
        write_text(txt.with_suffix(".ann"), "".join(f"{line}\n" for line in lines))
