"""A cheap test of whether text may hold another language, so that fastText reads only the sentences that can matter.

fastText's lid.176 costs about as much as the rest of the cleaning together when it reads every sentence, and on
clinical text most of what it removes at the sentence level is the corpus language misread (lab values, headings in
capitals). A sentence in another language nearly always holds one of that language's function words or a letter
the corpus language does not write; a sentence of the corpus language rarely does. So the cleaning asks fastText
about a sentence only where this gate finds such a trace, and can then drop it at a lower confidence. Languages
outside the table get no gate: every sentence is read, as with --langid sentence.

The lists are the commonest short words of each language and the letters each writes beyond a-z, chosen on the
development half of benchmarks/langid_mixture.py; see docs/corpus.md.
"""

import bisect
import re
from typing import Self, Sequence

# The commonest function words of each language (lowercase). A word that the corpus language also uses is not a
# trace of another language (the corpus language's own list is taken away), so each list also holds the corpus
# language's words that the others use: "polo" (a pole), "per" (per os), "in" (in situ) are Spanish clinical words.
FUNCTION_WORDS = {
    "es": """de la que el en y a los se del las un por con no una su para es al lo como más pero sus le ya o e u este sí
        porque esta entre cuando muy sin sobre también me hasta hay donde quien desde todo nos durante todos uno les ni
        contra otros ese eso ante ellos esto antes algunos qué unos otro otras otra él tanto esa estos mucho nada si
        muchos cual poco ella estar estas algunas algo mi mis te tu tus os ser está están estaba fue fueron son ha han
        había tiene tras según sea da dar dos tres tipo polo in et al per vs ad ex situ vitro vivo""",
    "en": """the of and to in is was for that with as by on are from at be this were which or an have has had not it
        its but been their these than after we our they can may also between both during other into such who no one
        all there more most when would should could will patients patient""",
    "pt": """não uma com do da dos das os as em ao aos à às pela pelo pelos pelas são está estão foi ser seu sua seus suas
        você isso este esta isto ou mais quando também já pode nem num numa dum duma nos nas mas sem sobre entre até
        foram tem têm há ficheiro arquivo ainda então""",
    "ca": """amb els les per és una del dels als aquest aquesta aquests aquestes això però més pot heu hauríeu no com quan
        també seu seva seus seves ha han hi ho sense sobre entre fins està estan va van vostre vostra fitxer cap on
        perquè molt tots totes""",
    "gl": """unha non coa co cos coas dos das os as polo pola polos polas nun nunha dun dunha xa é está foi ser seu súa
        seus súas isto este esta ou máis cando tamén pode ao aos á ás mais sen sobre entre ata ficheiro hai fose poden
        iso aquí moi todos""",
    "it": """il di della delle dei degli del che per sono gli non una un è alla alle nel nella con questo questa può più
        anche essere stato lo la le ha hanno ci si come quando tutti tutte sua suo loro dalla dal file impossibile""",
    "fr": """le les des du et est pour une un dans avec pas sur ce cette qui être été peut plus au aux votre vous ne que
        il elle ils sont fichier impossible lors sans entre mais ou où leur leurs""",
}

# The letters beyond a-z that each language writes; another Latin letter is a trace of another language.
LETTERS = {
    "es": "ñáéíóúü", "en": "", "pt": "ãõçáéíóúâêôàü", "ca": "àèéíïòóúüç·", "gl": "ñáéíóúü",
    "it": "àèéìíîòóùú", "fr": "àâæçéèêëîïôœùûüÿ",
}
ELIDING = {"ca", "fr", "it"}  # l'arxiu, d'une, dell'oggetto: an apostrophe after a one-letter article or preposition

_LATIN_LETTERS = "".join(chr(c) for c in range(0xC0, 0x250) if chr(c).isalpha() and len(chr(c).lower()) == 1)
_WORD = re.compile(r"\w+")
_MIDDLE_DOT = r"\w·\w"  # col·lecció: Catalan's; alone, a bullet
_ELISION = r"(?<!\w)(?:[LDSNMTCldsnmtc]|[Qq]u|[DdAaNn]ell|[Dd]all|[Ss]ull)['’]\w"


class LanguageGate:
    """Whether a text holds a trace of a language other than ``lang``: a function word or letter of another language
    of the table."""

    def __init__(self, lang) -> None:
        own = set(FUNCTION_WORDS[lang].split())
        words = {w for other, words in FUNCTION_WORDS.items() if other != lang for w in words.split()
                 if len(w) > 1} - own  # "a", "e", "o", "y": a letter is too often a symbol or a label
        # as written in a sentence or at its start; not in capitals, which are acronyms ("IT e IM", "INSS-CAP")
        self.words = frozenset(words | {w.capitalize() for w in words})
        foreign_letters = [c for c in _LATIN_LETTERS if c.lower() not in LETTERS[lang]]
        self.letters = re.compile("[" + re.escape("".join(foreign_letters)) + "]")
        marks = ([_ELISION] if lang not in ELIDING else []) + ([_MIDDLE_DOT] if "·" not in LETTERS[lang] else [])
        self.marks = re.compile("|".join(marks)) if marks else None

    @classmethod
    def of(cls, lang: str) -> Self | None:
        """The gate of ``lang``, or None where the table has no lists for it (every sentence is then read)."""
        return cls(lang) if lang in FUNCTION_WORDS else None

    def flags(self, text: str) -> bool:
        # each a C-speed scan of the text: a regex of one character class, the words split at whitespace into a set
        # (a function word is seldom next to punctuation: a sentence's other words find it)
        return bool(
            self.letters.search(text)
            or not self.words.isdisjoint(text.split())
            or (self.marks and ("'" in text or "’" in text or "·" in text) and self.marks.search(text)))

    def flagged_spans(self, text: str, spans: Sequence[tuple[int, int]]) -> set[int] | None:
        """The indices of the (start, end) spans of ``text`` that hold a trace, or None where the text holds none (the
        usual case, found with the cheap whole-text test first)."""
        if not self.flags(text):
            return None
        at = [m.start() for m in _WORD.finditer(text) if m.group() in self.words]
        at += [m.start() for m in self.letters.finditer(text)]
        if self.marks:
            at += [m.start() for m in self.marks.finditer(text)]
        starts = [start for start, _ in spans]
        return {bisect.bisect_right(starts, a) - 1 for a in at}
