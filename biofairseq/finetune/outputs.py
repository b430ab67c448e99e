"""What ``biofairseq-ner predict`` writes: each entity with its confidence, in the formats a team's tools read.

- ``brat``: ``X.txt`` + ``X.ann`` per note (character offsets, as the shared tasks score them) and brat's
  ``annotation.conf`` naming the model's types, so that the folder opens in brat as it is;
- ``jsonl``: ``entities.jsonl``, one record an entity: the file, its start and end, type, text and score (for notes,
  character offsets; for a CoNLL file, the sentence and token positions); pandas and datasets read it;
- ``conll``: ``predictions.conll``, token and tag per line, with each token's character offsets between them and a
  ``-DOCSTART-`` line naming each note (CoNLL readers take the first and the last column);
- ``doccano``, ``labelstudio``, ``prodigy``: pre-annotations the tools import as suggestions
  (``biofairseq.finetune.json_formats``); a CoNLL file's sentences become documents of their tokens joined by spaces.

An entity's score is the mean, over its words, of the probability the model gives the label it predicted there.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from biofairseq.atomic import write_text
from biofairseq.finetune import brat, iob2, json_formats

if TYPE_CHECKING:
    from biofairseq.finetune.data import NERData

FORMATS = ("brat", "jsonl", "conll", *json_formats.WRITTEN)
DEFAULT_FORMATS = ("brat", "jsonl", "conll")


def entities(dataset: NERData, tags: Sequence[Sequence[str]],
             scores: Sequence[Sequence[float]]) -> list[dict[str, Any]]:
    """One dict an entity, in input order: notes give character offsets in their document, a CoNLL file token
    positions in its sentence."""
    found, texts = [], {d.id: d.text for d in dataset.documents} if dataset.has_documents else {}
    for index, (sentence, predicted, score) in enumerate(zip(dataset.sentences, tags, scores)):
        for a, b, kind in iob2.spans(predicted):
            confidence = round(sum(score[a:b]) / (b - a), 4)
            if dataset.has_documents:
                start, end = sentence.offsets[a][0], sentence.offsets[b - 1][1]
                found.append({"file": f"{sentence.doc}.txt", "start": start, "end": end, "type": kind,
                              "text": texts[sentence.doc][start:end], "score": confidence})
            else:
                found.append({"file": Path(dataset.path).name, "sentence": index, "start": a, "end": b, "type": kind,
                              "text": " ".join(sentence.tokens[a:b]), "score": confidence})
    return found


def tool_documents(dataset: NERData, found: Sequence[dict[str, Any]] | None = None) -> list[tuple[str, str, list]]:
    """[(name, text, [(start, end, type, score)])] as the annotation tools take them: the entities ``found``
    (``entities``), or without them the gold mentions as read (nested and overlapping ones too). Notes are documents
    as they are; a sentence of a CoNLL file or token lists is one, its tokens joined by spaces."""
    if dataset.has_documents:
        if found is None:
            return [(d.id, d.text, [(e.start, e.end, e.type, None) for e in d.entities]) for d in dataset.documents]
        by_doc = {}
        for e in found:
            by_doc.setdefault(e["file"][:-4], []).append((e["start"], e["end"], e["type"], e["score"]))
        return [(d.id, d.text, by_doc.get(d.id, [])) for d in dataset.documents]
    by_sentence = {}
    for e in found or []:
        by_sentence.setdefault(e["sentence"], []).append((e["start"], e["end"], e["type"], e["score"]))
    documents, stem = [], Path(dataset.path).stem
    for index, sentence in enumerate(dataset.sentences):
        starts, at = [], 0
        for token in sentence.tokens:
            starts.append(at)
            at += len(token) + 1
        spans = by_sentence.get(index, []) if found is not None else [
            (a, b, kind, None) for a, b, kind in iob2.spans(sentence.tags or [])]
        documents.append((f"{stem}-{index + 1}", " ".join(sentence.tokens),
                          [(starts[a], starts[b - 1] + len(sentence.tokens[b - 1]), kind, score) for a, b, kind, score in spans]))
    return documents


def write(out: str | Path, dataset: NERData, tags: Sequence[Sequence[str]], scores: Sequence[Sequence[float]],
          formats: Collection[str], types: Iterable[str], model: str | None = None) -> list[str]:
    """The chosen formats into folder ``out``; returns the names written. ``model`` names the suggestions (Label
    Studio's model_version)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    found = entities(dataset, tags, scores)
    written = []
    if "brat" in formats and dataset.has_documents:
        by_doc = {}
        for e in found:
            by_doc.setdefault(e["file"][:-4], []).append((e["start"], e["end"], e["type"]))
        brat.write_folder(out, dataset.documents, by_doc)
        write_text(out / "annotation.conf", "[entities]\n" + "".join(f"{t}\n" for t in types)
                   + "\n[relations]\n\n[events]\n\n[attributes]\n")
        written.append("X.txt + X.ann, annotation.conf")
    if "jsonl" in formats:
        write_text(out / "entities.jsonl", "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in found))
        written.append("entities.jsonl")
    if "conll" in formats or ("brat" in formats and not dataset.has_documents):
        write_text(out / "predictions.conll", _conll(dataset, tags))
        written.append("predictions.conll")
    tools = [fmt for fmt in json_formats.WRITTEN if fmt in formats]
    documents = tool_documents(dataset, found) if tools else []
    for fmt in tools:
        json_formats.write(out / json_formats.WRITTEN[fmt], fmt, documents, gold=False, model=model)
        written.append(json_formats.WRITTEN[fmt])
    if "labelstudio" in formats:
        write_text(out / json_formats.LABEL_STUDIO_CONFIG, json_formats.label_studio_config(types))
        written.append(json_formats.LABEL_STUDIO_CONFIG)
    return written


def _conll(dataset: NERData, tags: Sequence[Sequence[str]]) -> str:
    lines, doc = [], None
    for sentence, predicted in zip(dataset.sentences, tags):
        if dataset.has_documents and sentence.doc != doc:
            doc = sentence.doc
            lines.append(f"-DOCSTART-\t{doc}.txt\n\n")
        if dataset.has_documents:
            lines += [f"{t}\t{s}\t{e}\t{g}\n" for t, (s, e), g in zip(sentence.tokens, sentence.offsets, predicted)]
        else:
            lines += [f"{t}\t{g}\n" for t, g in zip(sentence.tokens, predicted)]
        lines.append("\n")
    return "".join(lines)
