"""BIO (IOB2) tags <-> entity spans over a token sequence.

Decoding follows conlleval: an ``I-X`` that does not continue an ``X`` entity starts one. ``repair`` applies the
same rule to the tags themselves, so seqeval's strict IOB2 mode, the BRAT files we write and any scorer agree.
"""

from collections.abc import Iterable, Sequence


def is_tag(tag: object) -> bool:
    """An IOB2 tag: O, B-TYPE or I-TYPE."""
    return tag == "O" or (isinstance(tag, str) and tag[:2] in ("B-", "I-") and len(tag) > 2)


def spans(tags: Sequence[str]) -> list[tuple[int, int, str]]:
    """[(first token, last token + 1, type)] of the entities in ``tags``."""
    found, start, kind = [], None, None
    for i, tag in enumerate([*tags, "O"]):
        prefix, _, label = tag.partition("-")
        continues = prefix == "I" and start is not None and label == kind
        if start is not None and not continues:
            found.append((start, i, kind))
            start = kind = None
        if prefix in ("B", "I") and not continues:
            start, kind = i, label
    return found


def tags(length: int, entity_spans: Iterable[tuple[int, int, str]]) -> list[str]:
    """IOB2 tags of ``length`` tokens holding these non-overlapping (first, last + 1, type) spans."""
    out = ["O"] * length
    for start, end, kind in entity_spans:
        out[start] = f"B-{kind}"
        for i in range(start + 1, end):
            out[i] = f"I-{kind}"
    return out


def repair(sequence: Sequence[str]) -> list[str]:
    """The IOB2 tags whose entities are those conlleval reads in ``sequence``."""
    return tags(len(sequence), spans(sequence))


def label_list(types: Iterable[str]) -> list[str]:
    """Label names of these entity types, O first: what the classification head predicts."""
    return ["O", *(f"{p}-{t}" for t in sorted(types) for p in "BI")]
