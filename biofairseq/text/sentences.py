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


def _ends_sentence(text, start, boundary) -> bool:
    """Whether the punctuation match ``boundary`` ends the sentence that began at ``start``."""
    at = boundary.start()
    if text[at] != ".":
        return True  # ! ? and ellipses always end a sentence here
    punct = text[at : boundary.start(1)]  # the match without its whitespace
    if "..." in punct or "…" in punct:
        return True
    end = at
    while end > start and text[end - 1].isspace():
        end -= 1
    if end == start:
        return False
    space = max(text.rfind(" ", start, end), text.rfind("\t", start, end))
    cut = space + 1 if space >= 0 else start  # the last word: after the last space or tab
    token = text[cut:end].lstrip("([¿¡\"«“'")
    lowered = token.lower()
    if lowered in NON_FINAL_ABBREVIATIONS or ("." in token and _INTERNAL_PERIODS.match(token)):
        return False
    if lowered == "no" and text[boundary.end(1) : boundary.end(1) + 1].isdigit():
        return False  # No. 5
    if lowered == "al" and text[start:cut].rstrip().lower().endswith("et"):
        return False  # et al.
    if len(token) <= 4 and _ENUMERATION.match(token):
        # "1. Hipertensión" or "a) ... b." as a list marker: at the start of the sentence or after : or ;
        preceding = text[start:cut].rstrip()
        if not preceding or preceding.endswith((":", ";")):
            return False
    return True


def _stripped(text, spans, out) -> None:
    """Appends the spans to ``out``, without the whitespace around them, and not those left empty."""
    for s, e in spans:
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if e > s:
            out.append((s, e))


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence of one paragraph, stripped of surrounding whitespace."""
    spans, start = [], 0
    for boundary in _BOUNDARY.finditer(text):
        if _ends_sentence(text, start, boundary):
            spans.append((start, boundary.start(1)))
            start = boundary.end(1)
    spans.append((start, len(text)))
    stripped = []
    _stripped(text, spans, stripped)
    return stripped


def split_sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) in ``text`` of each of split_sentences(text): sentence_spans of each line, shifted to where the line
    starts, with one regex pass over the whole text instead of one per line. A match whose whitespace runs over a
    line's end is left out (the line alone has no such match); from where it starts, the rest of its line is
    punctuation, quotes and whitespace, so it hides no match of that line, and the matches within a line are the
    line's own."""
    spans, line_start = [], 0
    boundaries = _BOUNDARY.finditer(text)
    boundary = next(boundaries, None)
    for line, whole in zip(text.splitlines(), text.splitlines(True)):
        line_end = line_start + len(line)
        start, cuts = line_start, []
        while boundary is not None and boundary.start() < line_end:
            if boundary.end(1) <= line_end and _ends_sentence(text, start, boundary):
                cuts.append((start, boundary.start(1)))
                start = boundary.end(1)
            boundary = next(boundaries, None)
        cuts.append((start, line_end))
        _stripped(text, cuts, spans)
        line_start += len(whole)
    return spans


def split_sentences(text: str) -> list[str]:
    """The sentences of a document: paragraphs are its lines, and no sentence crosses a line."""
    return [text[s:e] for s, e in split_sentence_spans(text)]
