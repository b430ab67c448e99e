"""NER data sets, from a BRAT folder, a CoNLL file or JSON (the annotation tools' span exports, token lists:
``biofairseq.finetune.json_formats``), as sentences of tokens with IOB2 tags.

Documents with character offsets (BRAT's, and the span JSON's) are cut into sentences (``text.sentences``, per
line) and tokens (``\\w+|[^\\w\\s]``), keeping character offsets. A token break is forced at every entity edge, so
entity edges always fall on token edges ("Hb15,6"); a sentence break that would fall inside an entity is removed
("Ac. Toxoplasma"). Overlapping entities are flattened longest first (then earliest, then by type name); the
dropped ones are counted and listed.
"""

import bisect
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import regex

from biofairseq.finetune import NERFormatError, brat, conll, iob2, json_formats, splits
from biofairseq.text.sentences import sentence_spans

TOKEN = regex.compile(r"\w+|[^\w\s]")
_LINE = regex.compile(r"[^\n]+")


@dataclass
class Sentence:
    tokens: list
    tags: list  # None where the input has no gold annotation
    doc: str = None  # the document's id (BRAT, span JSON)
    offsets: list = None  # BRAT, span JSON: (start, end) of each token in the document


@dataclass
class NERData:
    path: str
    sentences: list
    documents: list = None  # BRAT and span JSON only
    problems: list = field(default_factory=list)  # (kind, message)
    counts: Counter = field(default_factory=Counter)
    ignored: list = field(default_factory=list)  # BRAT: files of the folder that are neither .txt nor .ann, and hidden ones
    format: str = "conll"  # brat, conll, or a kind of json_formats.NAMES

    @property
    def has_documents(self) -> bool:
        """Documents with character offsets (BRAT, span JSON): scored as the shared tasks score BRAT."""
        return self.documents is not None

    @property
    def format_name(self) -> str:
        """The format as the log names it."""
        return {"brat": "BRAT", "conll": "CoNLL"}.get(self.format, json_formats.NAMES.get(self.format, self.format))

    def annotated_only(self) -> "NERData":
        """The data set without the documents not annotated (yet): a tool's export of a project half done."""
        kept = {d.id for d in self.documents if d.annotated}
        counts = Counter(self.counts)
        counts["documents_not_annotated_left_out"] += len(self.documents) - len(kept)
        return replace(self, documents=[d for d in self.documents if d.id in kept], counts=counts,
                       sentences=[s for s in self.sentences if s.doc in kept])

    @property
    def annotated(self) -> bool:
        return all(s.tags is not None for s in self.sentences)

    def types(self) -> set[str]:
        """The entity types of the BIO tags: what training on this set teaches."""
        return {kind for s in self.sentences if s.tags for _, _, kind in iob2.spans(s.tags)}

    def gold_types(self) -> set[str]:
        """The entity types its scores count: of every gold mention of a BRAT set (nested ones too), of the tags of CoNLL."""
        if self.has_documents:
            return {e.type for d in self.documents if d.annotated for e in d.entities}
        return self.types()

    def statistics(self) -> dict[str, Any]:
        """What the conversion found and did, as printed by ``biofairseq-ner convert`` and saved beside its output."""
        entities = Counter(kind for s in self.sentences if s.tags for _, _, kind in iob2.spans(s.tags))
        problems = Counter(kind for kind, _ in self.problems)
        return {
            "input": self.path,
            "format": self.format,
            "documents": len(self.documents) if self.has_documents else None,
            "sentences": len(self.sentences),
            "tokens": sum(len(s.tokens) for s in self.sentences),
            "entities": sum(entities.values()),
            "entities_per_type": dict(sorted(entities.items())),
            **{k: self.counts[k] for k in sorted(self.counts)},
            "problems": dict(sorted(problems.items())),
            "problem_list": [message for _, message in self.problems],
        }

    def warnings(self, role: str, shown: int = 3) -> list[str]:
        """Lines for stderr about what reading changed: the entity problems by kind with the first ``shown``, and the
        files a BRAT folder skipped. ``convert`` lists every problem; training and prediction must not drop entities
        silently either."""
        lines = []
        if self.problems:
            kinds = Counter(kind for kind, _ in self.problems)
            lines.append(f"warning: {role} {self.path}: {len(self.problems)} entit{'y' if len(self.problems) == 1 else 'ies'} "
                         f"changed in reading ({', '.join(f'{n} {PROBLEMS.get(k, k)}' for k, n in sorted(kinds.items()))}), "
                         f"counted in metrics.json; the first: "
                         + "; ".join(m for _, m in self.problems[:shown])
                         + (f"; all of them: biofairseq-ner convert {self.path} OUT.conll" if len(self.problems) > shown else ""))
        if self.ignored:
            names = sorted({p.name for p in self.ignored})
            lines.append(f"note: {role} {self.path}: {len(self.ignored)} file(s) neither .txt nor .ann, or hidden, skipped: "
                         + ", ".join(names[:5]) + (", ..." if len(names) > 5 else ""))
        return lines

    def reading(self) -> dict[str, Any]:
        """{"format", count: n}: the format read and what reading counted (documents left out, tools' answers and
        annotations skipped, sentence breaks removed), for metrics.json."""
        return {"format": self.format, **{k: v for k, v in sorted(self.counts.items()) if v}}

    def problem_counts(self) -> dict[str, int]:
        """{"count", "dropped", kind: n}: what metrics.json records of the problems (dropped: entities not trained on or
        not scored as gold BIO: outside the text, covering no token, flattened)."""
        kinds = Counter(kind for kind, _ in self.problems)
        return {"count": len(self.problems), "dropped": sum(kinds[k] for k in DROPPED), **dict(sorted(kinds.items()))}


# What each kind of problem did to the entity, for the warnings.
PROBLEMS = {
    "outside": "outside the text (dropped)", "no_token": "covering no token (dropped)",
    "flattened": "overlapping a longer one (dropped from the BIO tags)", "duplicate": "duplicates (counted once)",
    "misaligned": "misaligned (kept by their offsets)", "trimmed": "trimmed of white space", "discontinuous": "discontinuous (outer span kept)",
    "repaired": "I- tags starting an entity (read as B-)",
}
DROPPED = ("outside", "no_token", "flattened")


CONLL_SUFFIXES = splits.CONLL_SUFFIXES
KINDS = ("a BRAT folder (X.txt + X.ann), a .txt file, a CoNLL file (.conll, .tsv, .bio: token<TAB>tag), or JSON "
         "(.jsonl, .json: an annotation tool's span export or token lists)")


def read(path: str | Path) -> NERData:
    """The sentences of a BRAT folder, a plain-text ``.txt`` file (one BRAT document: annotated when its ``.ann`` is
    beside it, raw text to tag otherwise), a CoNLL file (``.conll``, ``.tsv``, ``.bio``) or JSON (``.jsonl``,
    ``.json``: its kind found from its records). Anything else is refused in one line, before any model is loaded."""
    path = Path(path)
    if path.is_dir():
        return _read_brat(path)
    if not path.exists():
        raise NERFormatError(f"{path}: no such file or folder; give {KINDS}")
    suffix = path.suffix.lower()
    if suffix == ".txt":
        return _read_brat(path.parent, [path])
    if suffix in CONLL_SUFFIXES:
        return _tagged(NERData(str(path), []), conll.read_file(path), "a CoNLL file (token<TAB>tag, blank line between sentences)")
    if suffix in json_formats.SUFFIXES:
        return _read_json(path)
    if suffix == ".ann":
        raise NERFormatError(f"{path}: a BRAT annotation file alone; give its text {path.with_suffix('.txt').name} (read with its .ann) or the folder holding both")
    raise NERFormatError(f"{path}: not NER data ({path.suffix or 'no suffix'}); give {KINDS}")


def annotated_part(dataset: NERData, path: str | Path, role: str, note: Callable[[str], None]) -> NERData:
    """The annotated data set to train, score or convert: a tool's export of a project half done without the
    documents not annotated yet (said in a ``note``); a BRAT folder missing an .ann, or data without any annotation,
    refused in one line."""
    if dataset.has_documents and not dataset.annotated:
        bare = [d.id for d in dataset.documents if not d.annotated]
        listed = f"{', '.join(bare[:3])}{', ...' if len(bare) > 3 else ''}"
        if len(bare) < len(dataset.documents) and dataset.format != "brat":
            note(f"note: {role} {path}: {len(bare)} of {len(dataset.documents)} documents not annotated (yet), left "
                 f"out: {listed}")
            dataset = dataset.annotated_only()
        elif len(bare) < len(dataset.documents):
            raise NERFormatError(f"{path}: {len(bare)} of {len(dataset.documents)} .txt files have no .ann beside them "
                                 f"({listed}); the {role} set needs X.ann beside every X.txt: add them or move those out")
    if not dataset.annotated:
        conll_hint = " (a CoNLL file? name it .conll, .tsv or .bio)" if Path(path).suffix.lower() == ".txt" else ""
        raise NERFormatError(f"{path}: the {role} set has no annotations{conll_hint}; give annotated data (X.ann beside "
                             "each X.txt, a CoNLL file token<TAB>tag, or an annotation tool's export with annotations)")
    return dataset


def _tagged(data: NERData, sentences: Iterable[tuple[list[str], list[str] | None]], kind: str) -> NERData:
    """Token sentences (CoNLL, token lists) into ``data``, an I- tag that starts an entity read as B-."""
    for n, (tokens, tags) in enumerate(sentences):
        if tags is not None and iob2.repair(tags) != tags:
            data.problems.append(("repaired", f"{data.path}: sentence {n + 1}: an I- tag starts an entity; read as B- (conlleval's rule)"))
            tags = iob2.repair(tags)
        data.sentences.append(Sentence(tokens, tags))
    if not data.sentences:
        raise NERFormatError(f"{data.path}: no sentences; give {kind}")
    return data


def _with_sentences(data: NERData) -> NERData:
    """The sentences of ``data``'s documents, tagged with their entities."""
    for doc in data.documents:
        data.counts["entities_read"] += len(doc.entities)
        data.sentences += document_sentences(doc, data)
    return data


def _read_brat(folder: Path, texts: list[Path] | None = None) -> NERData:
    data = NERData(str(texts[0] if texts else folder), [], [], format="brat")
    data.documents = brat.read_folder(folder, data.problems, texts, data.ignored)
    return _with_sentences(data)


def _read_json(path: Path) -> NERData:
    data = NERData(str(path), [])
    data.format, documents, sentences = json_formats.read(path, data.problems, data.counts)
    if sentences is not None:
        return _tagged(data, sentences, "token lists with at least one token")
    data.documents = documents
    return _with_sentences(data)


def flatten(entities: Iterable[brat.Entity], problems: list[tuple[str, str]]) -> list[brat.Entity]:
    """The entities left when overlapping ones are removed, longest first; the others are reported."""
    kept = []
    for e in sorted(entities, key=lambda e: (-(e.end - e.start), e.start, e.type)):
        clash = next((k for k in kept if e.start < k.end and k.start < e.end), None)
        if clash is None:
            kept.append(e)
        elif (clash.start, clash.end, clash.type) == (e.start, e.end, e.type):
            problems.append(("duplicate", f"{e.where}: {e.type} {e.start}-{e.end} repeats {clash.where}; counted once"))
        else:
            problems.append(("flattened", f"{e.where}: {e.type} {e.start}-{e.end} overlaps {clash.type} {clash.start}-{clash.end} ({clash.where}); dropped (longest first)"))
    return sorted(kept, key=lambda e: e.start)


def document_sentences(doc: brat.Document, data: NERData) -> list[Sentence]:
    """Sentences of one BRAT document, tagged with its (flattened) entities."""
    entities = flatten(doc.entities, data.problems)
    spans = [(m.start() + s, m.start() + e) for m in _LINE.finditer(doc.text) for s, e in sentence_spans(m.group())]
    starts = [s for s, _ in spans]
    joined = set()  # i: sentence i + 1 continues sentence i
    for e in entities:
        first, last = bisect.bisect_right(starts, e.start) - 1, bisect.bisect_right(starts, e.end - 1) - 1
        joined.update(range(max(first, 0), last))
    data.counts["sentence_breaks_inside_entities_removed"] += len(joined)
    merged = []
    for i, span in enumerate(spans):
        if i - 1 in joined:
            merged[-1] = (merged[-1][0], span[1])
        else:
            merged.append(span)
    edges = sorted({x for e in entities for x in (e.start, e.end)})
    sentences = []
    for start, end in merged:
        offsets = []
        for m in TOKEN.finditer(doc.text, start, end):
            cuts = edges[bisect.bisect_right(edges, m.start()) : bisect.bisect_left(edges, m.end())]
            bounds = [m.start(), *cuts, m.end()]
            offsets += zip(bounds, bounds[1:])
        if offsets:
            sentences.append(Sentence([doc.text[s:e] for s, e in offsets], ["O"] * len(offsets) if doc.annotated else None, doc.id, offsets))
    firsts = [s.offsets[0][0] for s in sentences]
    for e in entities:
        _tag(e, sentences, firsts, data)
    return sentences


def _tag(entity: brat.Entity, sentences: list[Sentence], firsts: list[int], data: NERData) -> None:
    i = bisect.bisect_right(firsts, entity.start) - 1
    for sentence in sentences[max(i, 0) : i + 2]:
        starts = [s for s, _ in sentence.offsets]
        first = bisect.bisect_left(starts, entity.start)
        last = bisect.bisect_left(starts, entity.end) - 1
        if first <= last and sentence.offsets[last][1] <= entity.end:
            sentence.tags[first : last + 1] = iob2.tags(last + 1 - first, [(0, last + 1 - first, entity.type)])
            if (sentence.offsets[first][0], sentence.offsets[last][1]) != (entity.start, entity.end):
                data.problems.append(("trimmed", f"{entity.where}: {entity.type} {entity.start}-{entity.end} has white space at an edge; its tokens span {sentence.offsets[first][0]}-{sentence.offsets[last][1]}"))
            return
    data.problems.append(("no_token", f"{entity.where}: {entity.type} {entity.start}-{entity.end} covers no token; dropped"))


def entity_offsets(sentence: Sentence, tags: Sequence[str]) -> list[tuple[int, int, str]]:
    """(start, end, type) character spans of the entities that ``tags`` mark in a BRAT sentence."""
    return [(sentence.offsets[a][0], sentence.offsets[b - 1][1], kind) for a, b, kind in iob2.spans(tags)]


def by_document(dataset: NERData, path: str | Path) -> NERData:
    """The data set with each BRAT document's sentences joined into one sequence, in order (``--context document``:
    windows then run across sentences, up to the model's context). Offsets are the document's already, so
    predictions write back and score as before."""
    if not dataset.has_documents:
        raise NERFormatError(f"{path}: --context document needs BRAT documents (X.txt + X.ann); a CoNLL file does not "
                             "say where documents end: use --context sentence")
    groups = {}
    for sentence in dataset.sentences:
        groups.setdefault(sentence.doc, []).append(sentence)
    joined = lambda group, name: [x for s in group for x in getattr(s, name)]
    sentences = [Sentence(joined(group, "tokens"), None if any(s.tags is None for s in group) else joined(group, "tags"),
                          doc, joined(group, "offsets")) for doc, group in groups.items()]
    return replace(dataset, sentences=sentences)
