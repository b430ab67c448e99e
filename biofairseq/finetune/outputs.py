"""What ``biofairseq-ner predict`` writes: each entity with its confidence, in the formats a team's tools read.

- ``brat``: ``X.txt`` + ``X.ann`` per note (character offsets, as the shared tasks score them) and brat's
  ``annotation.conf`` naming the model's types, so that the folder opens in brat as it is;
- ``jsonl``: ``entities.jsonl``, one record an entity: the file, its start and end, type, text and score (for notes,
  character offsets; for a CoNLL file, the sentence and token positions); pandas and datasets read it;
- ``conll``: ``predictions.conll``, token and tag per line, with each token's character offsets between them and a
  ``-DOCSTART-`` line naming each note (CoNLL readers take the first and the last column).

An entity's score is the mean, over its words, of the probability the model gives the label it predicted there.
"""

import json
from pathlib import Path

from biofairseq.atomic import write_text
from biofairseq.finetune import brat, iob2

FORMATS = ("brat", "jsonl", "conll")


def entities(dataset, tags, scores):
    """One dict an entity, in input order: notes give character offsets in their document, a CoNLL file token
    positions in its sentence."""
    found, texts = [], {d.id: d.text for d in dataset.documents} if dataset.is_brat else {}
    for index, (sentence, predicted, score) in enumerate(zip(dataset.sentences, tags, scores)):
        for a, b, kind in iob2.spans(predicted):
            confidence = round(sum(score[a:b]) / (b - a), 4)
            if dataset.is_brat:
                start, end = sentence.offsets[a][0], sentence.offsets[b - 1][1]
                found.append({"file": f"{sentence.doc}.txt", "start": start, "end": end, "type": kind,
                              "text": texts[sentence.doc][start:end], "score": confidence})
            else:
                found.append({"file": Path(dataset.path).name, "sentence": index, "start": a, "end": b, "type": kind,
                              "text": " ".join(sentence.tokens[a:b]), "score": confidence})
    return found


def write(out, dataset, tags, scores, formats, types):
    """The chosen formats into folder ``out``; returns the names written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    found = entities(dataset, tags, scores)
    written = []
    if "brat" in formats and dataset.is_brat:
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
    if "conll" in formats or ("brat" in formats and not dataset.is_brat):
        write_text(out / "predictions.conll", _conll(dataset, tags))
        written.append("predictions.conll")
    return written


def _conll(dataset, tags):
    lines, doc = [], None
    for sentence, predicted in zip(dataset.sentences, tags):
        if dataset.is_brat and sentence.doc != doc:
            doc = sentence.doc
            lines.append(f"-DOCSTART-\t{doc}.txt\n\n")
        if dataset.is_brat:
            lines += [f"{t}\t{s}\t{e}\t{g}\n" for t, (s, e), g in zip(sentence.tokens, sentence.offsets, predicted)]
        else:
            lines += [f"{t}\t{g}\n" for t, g in zip(sentence.tokens, predicted)]
        lines.append("\n")
    return "".join(lines)
