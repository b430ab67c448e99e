"""Rule-based sentence splitting for clinical Spanish and English.

pysbd, the usual PyPI choice, is much slower and splits "Ac. Toxoplasma", "ác. Fólico" and enumerations
("1. Hipertensión"); this splitter is one regex pass plus a few rules, and returns character spans so that
callers (NER conversion) can keep offsets.
"""

import regex

# A "." before one of these never ends a sentence, even before a capital: titles, references, "Ac. Fólico".
# Measurement units (mg., h., ml.) are not here: before a capital they usually do end the sentence.
NON_FINAL_ABBREVIATIONS = frozenset(
    """
    dr dra drs dres sr sra sres srta srs prof profa lic ing mr mrs ms st mt vd ud uds vds
    fig figs ref refs vol vols nº núm num nro pág pag págs pp ej vs cf ca ac ác hosp dpto dept
    serv av avda tel aprox approx sp spp var ed eds col cols cap caps art arts ap apdo cía
    """.split()
)

# End punctuation, closing quotes/brackets, whitespace, then something that can start a sentence.
_BOUNDARY = regex.compile(r"[.!?…]+[\"»”’)\]]*(\s+)(?=[¿¡\"«“‘(\[]*[\p{Lu}\d])")
_ENUMERATION = regex.compile(r"^(\d{1,3}|[\p{L}]|[ivxlIVXL]{1,4})$")
_INTERNAL_PERIODS = regex.compile(r"^(\p{L}{1,2}\.)+\p{L}{1,2}$")  # p.ej, i.e, EE.UU


def _ends_sentence(text, start, boundary):
    """Whether the punctuation match ``boundary`` ends the sentence that began at ``start``."""
    punct = boundary.group(0).rstrip()
    if not punct.startswith(".") or "..." in punct or "…" in punct:
        return True  # ! ? and ellipses always end a sentence here
    before = text[start : boundary.start()].rstrip()
    if not before:
        return False
    cut = max(before.rfind(" "), before.rfind("\t")) + 1
    preceding, token = before[:cut].rstrip(), before[cut:].lstrip("([¿¡\"«“'")
    lowered = token.lower()
    if lowered in NON_FINAL_ABBREVIATIONS or _INTERNAL_PERIODS.match(token):
        return False
    if lowered == "no" and text[boundary.end(1) : boundary.end(1) + 1].isdigit():
        return False  # No. 5
    if lowered == "al" and preceding.lower().endswith("et"):
        return False  # et al.
    if _ENUMERATION.match(token):
        # "1. Hipertensión" or "a) ... b." as a list marker: at the start of the sentence or after : or ;
        if not preceding or preceding.endswith((":", ";")):
            return False
    return True


def sentence_spans(text):
    """(start, end) of each sentence of one paragraph, stripped of surrounding whitespace."""
    spans, start = [], 0
    for boundary in _BOUNDARY.finditer(text):
        if _ends_sentence(text, start, boundary):
            spans.append((start, boundary.start(1)))
            start = boundary.end(1)
    spans.append((start, len(text)))
    stripped = []
    for s, e in spans:
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if e > s:
            stripped.append((s, e))
    return stripped


def split_sentences(text):
    """The sentences of a document: paragraphs are its lines, and no sentence crosses a line."""
    return [line[s:e] for line in text.splitlines() for s, e in sentence_spans(line)]
