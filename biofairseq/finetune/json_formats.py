"""NER data as JSON, in the shapes the annotation tools export and import, and our own.

Read (detected from the records, not the file name):

- span records, one document each, character offsets into its text, read as BRAT documents are
  (``biofairseq.finetune.data``): doccano's sequence-labelling JSONL export (``text`` and ``label``:
  ``[[start, end, TYPE]]``, or ``entities``: ``{start_offset, end_offset, label}`` in a project with relations),
  Label Studio's JSON export (a list of tasks: ``data`` holds the text, each annotation's ``result`` the regions
  ``{"type": "labels", "value": {start, end, text, labels}}``; or its JSON-MIN export), Prodigy's ``spans`` (``text``, ``spans``:
  ``{start, end, label}``, ``answer``), and ``biofairseq-ner predict``'s ``entities.jsonl`` with the notes' ``.txt``
  files beside it; records with a ``text`` only are documents to tag;
- token lists as ``datasets``' ``to_json`` writes them (``tokens`` and ``ner_tags``; tags as strings, or as ids
  named by the ``ClassLabel`` of a ``dataset_info.json`` beside the file, as ``Dataset.save_to_disk`` and
  ``DatasetInfo.write_to_directory`` write it).

Offsets count characters (Python's, as BRAT's do). A document's name (for BRAT files written of it) is the ``file``
we write into every record, else the tool's ``id``, else its position in the file.

Written (``biofairseq-ner predict --formats``, ``biofairseq-ner convert``): doccano JSONL, Label Studio JSON (the
model's entities as ``predictions`` with their scores, gold ones as ``annotations``) and Prodigy JSONL.
"""

import json
import re
from collections import Counter
from collections.abc import Iterable
from html import escape
from pathlib import Path
from typing import Any

from biofairseq.finetune import NERFormatError, brat, iob2, splits

SUFFIXES = splits.JSON_SUFFIXES
# what each kind is called in the log and in metrics.json
NAMES = {
    "doccano": "doccano JSONL", "label-studio": "Label Studio JSON", "label-studio-min": "Label Studio JSON-MIN",
    "prodigy": "Prodigy JSONL",
    "predict": "biofairseq-ner predict's entities.jsonl", "text": "JSON lines of text to tag",
    "tokens": "token lists (tokens + ner_tags)",
}
KINDS = ("span JSON (doccano's JSONL export, Label Studio's JSON or JSON-MIN export, Prodigy's spans, biofairseq-ner predict's "
         "entities.jsonl beside its .txt files) or token lists (tokens + ner_tags, as datasets' to_json writes them)")
WRITTEN = {"doccano": "doccano.jsonl", "labelstudio": "labelstudio.json", "prodigy": "prodigy.jsonl"}
LABEL_STUDIO_CONFIG = "labelstudio.xml"  # written beside labelstudio.json: the project's labelling config
# Label Studio's NER template names its tags so: <Labels name="label" toName="text"> over <Text name="text" value="$text">
LABEL_STUDIO_FROM, LABEL_STUDIO_TO = "label", "text"


def records(path: Path) -> list[dict]:
    """The JSON records of a file: a JSON array (Label Studio's export), JSON lines, or one object."""
    text = brat.read_text(path).removeprefix("\ufeff")  # a byte-order mark, as Windows tools write
    head = text.lstrip()[:1]
    if head and head not in "[{":
        raise NERFormatError(f"{path}: not JSON (it starts with {text.lstrip()[:20]!r}{', a CSV?' if ',' in text.split(chr(10))[0] else ''}); "
                             f"export JSON from the tool, or give {KINDS}")
    if head == "[":
        try:
            found = json.loads(text)
        except json.JSONDecodeError as error:
            raise NERFormatError(f"{path}:{error.lineno}: not JSON ({error.msg} at column {error.colno}: a trailing comma, "
                                 f"a missing quote?); give {KINDS}") from None
    else:
        found = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    found.append(json.loads(line))
                except ValueError as error:
                    try:  # one object over several lines
                        found = [json.loads(text)]
                        break
                    except ValueError:
                        raise NERFormatError(f"{path}:{n}: not a JSON line ({error.msg}); give {KINDS}") from None
    if not found:
        raise NERFormatError(f"{path}: no records; give {KINDS}")
    bad = next((i for i, r in enumerate(found, 1) if not isinstance(r, dict)), None)
    if bad is not None:
        raise NERFormatError(f"{path}: record {bad} is not a JSON object; give {KINDS}")
    return found


def kind(record: dict) -> str | None:
    """Which of NAMES a record is, by its keys."""
    if isinstance(record.get("data"), dict):
        return "label-studio"
    if "tokens" in record and "ner_tags" in record:
        return "tokens"
    if {"file", "start", "end", "type"} <= record.keys():
        return "predict"
    if _min_regions(record) is not None and _text_key(record, _MIN_META) is not None:
        return "label-studio-min"
    if isinstance(record.get("text"), str):
        if "spans" in record:
            return "prodigy"
        if record.keys() & {"label", "labels", "entities"}:
            return "doccano"
        return "text"
    return None


def read(path: str | Path, problems: list, counts: Counter) -> tuple[str, list | None, list | None]:
    """(kind, BRAT documents or None, [(tokens, tags)] or None) of a JSON file; problems and counts as the BRAT
    reader keeps them."""
    path = Path(path)
    found = records(path)
    kinds = [kind(r) for r in found]
    if kinds[0] is None:
        raise NERFormatError(f"{path}: its records are none of the JSON read here (the first has "
                             f"{', '.join(sorted(found[0])) or 'no keys'}); give {KINDS}")
    # a record of text alone is an example without labels in doccano's and JSON-MIN's exports
    first = next((k for k in kinds if k != "text"), "text")
    mixes = {first, "text"} if first in ("doccano", "label-studio-min") else {first}
    for n, other in enumerate(kinds, 1):
        if first == "label-studio-min" and other is None and _text_key(found[n - 1], _MIN_META):
            continue  # an annotation without regions, its text under the Text tag's own name
        if other not in mixes:
            raise NERFormatError(f"{path}: record {n} is {NAMES.get(other, 'of no kind read here')}, the first "
                                 f"{NAMES[first]}; give one kind a file")
    if first == "tokens":
        return first, None, _token_lists(path, found, counts)
    reader = {"label-studio": _label_studio, "label-studio-min": _label_studio_min, "prodigy": _prodigy,
              "doccano": _doccano, "text": _doccano, "predict": _predicted}[first]
    documents = reader(path, found, problems, counts)
    counts["empty_documents"] += sum(not d.text.strip() for d in documents)
    return first, documents, None


def _entity(doc: brat.Document, start: Any, end: Any, label: Any, mention: Any, where: str, problems: list) -> None:
    if not (isinstance(start, int) and isinstance(end, int) and isinstance(label, str) and label):
        raise NERFormatError(f"{where}: an entity needs integer start and end and a label, it has {start!r}, {end!r}, "
                             f"{label!r}; fix or remove it")
    if start < 0 or end > len(doc.text) or start >= end:
        problems.append(("outside", f"{where}: {label} {start}-{end} is outside the text or empty; dropped"))
        return
    if isinstance(mention, str) and doc.text[start:end] != mention:
        problems.append(("misaligned", f"{where}: offsets {start}-{end} give {doc.text[start:end]!r}, the mention says "
                                       f"{mention!r}; kept by its offsets"))
    doc.entities.append(brat.Entity(start, end, label, where))


_SAFE = re.compile(r"[\w.-]+(/[\w.-]+)*")


def _document(text: Any, names: list, n: int, seen: set, where: str, annotated: bool) -> brat.Document:
    """A document named by the first usable of ``names`` (our ``file``, the tool's id), else its position ``n``."""
    if not isinstance(text, str):
        raise NERFormatError(f"{where}: its text is {type(text).__name__}, not a string; fix or remove the record")
    name = next((str(x).removesuffix(".txt") for x in names if x is not None and x != ""), str(n))
    if not _SAFE.fullmatch(name) or ".." in name.split("/") or name in seen:
        name = str(n) if str(n) not in seen else f"record-{n}"
    seen.add(name)
    return brat.Document(name, text, [], annotated)


def _doccano(path: Path, found: list, problems: list, counts: Counter) -> list:
    documents, seen = [], set()
    for n, r in enumerate(found, 1):
        where = f"{path}:{n}"
        spans = next((r[k] for k in ("label", "labels", "entities") if k in r), None)
        doc = _document(r.get("text"), [r.get("file"), r.get("id")], n, seen, where, spans is not None)
        for i, span in enumerate(spans or [], 1):
            if isinstance(span, dict) and {"start_offset", "end_offset", "label"} <= span.keys():  # with relations
                _entity(doc, span["start_offset"], span["end_offset"], span["label"], None, f"{where}, label {i}", problems)
            elif isinstance(span, list) and len(span) == 3:
                _entity(doc, *span, None, f"{where}, label {i}", problems)
            else:
                raise NERFormatError(f"{where}: label {span!r} is neither [start, end, TYPE] nor {{start_offset, end_offset, "
                                     "label}; fix or remove it")
        documents.append(doc)
    return documents


def _prodigy(path: Path, found: list, problems: list, counts: Counter) -> list:
    documents, seen = [], set()
    for n, r in enumerate(found, 1):
        where = f"{path}:{n}"
        accepted = r.get("answer", "accept") == "accept"  # reject and ignore are not gold: text to tag at most
        counts["prodigy_answers_not_accept"] += not accepted
        meta = r.get("meta") if isinstance(r.get("meta"), dict) else {}
        doc = _document(r.get("text"), [meta.get("file"), meta.get("id")], n, seen, where, accepted)
        for i, span in enumerate((r.get("spans") or []) if accepted else [], 1):
            if not isinstance(span, dict):
                raise NERFormatError(f"{where}: span {span!r} is not {{start, end, label}}; fix or remove it")
            _entity(doc, span.get("start"), span.get("end"), span.get("label"), None, f"{where}, span {i}", problems)
        documents.append(doc)
    return documents


def _label_studio(path: Path, found: list, problems: list, counts: Counter) -> list:
    documents, seen, types = [], set(), set()
    for n, task in enumerate(found, 1):
        where = f"{path}: task {task.get('id', n)}"
        data = task["data"]
        key = _text_key(data)
        if key is None:
            raise NERFormatError(f"{where}: its data holds no text ({', '.join(sorted(data)) or 'nothing'}); export "
                                 "a text project")
        given = task.get("annotations") or []
        annotations = [a for a in given if isinstance(a, dict) and not a.get("was_cancelled")]
        counts["label_studio_cancelled_annotations_skipped"] += len(given) - len(annotations)
        counts["label_studio_tasks_with_several_annotations_one_kept"] += len(annotations) > 1
        doc = _document(data[key], [data.get("file"), task.get("id")], n, seen, where, bool(annotations))
        if annotations:
            chosen = next((a for a in annotations if a.get("ground_truth")), annotations[0])
            for i, result in enumerate(chosen.get("result") or [], 1):
                value = result.get("value") or {}
                types.add(result.get("type"))
                if result.get("type") != "labels" or "labels" not in value:
                    counts["label_studio_results_not_labels_skipped"] += 1  # relations, choices, text areas
                    continue
                for label in value["labels"]:  # one region may carry several labels: each an entity
                    _entity(doc, value.get("start"), value.get("end"), label, value.get("text"), f"{where}, region {i}",
                            problems)
        documents.append(doc)
    if types and "labels" not in types:
        raise NERFormatError(f"{path}: its annotations hold no text spans (Labels), only {', '.join(sorted(map(str, types)))}; "
                             "export a text project labelled with <Labels> over <Text>")
    return documents


# JSON-MIN's own keys beside the task's data
_MIN_META = {"id", "annotator", "annotation_id", "created_at", "updated_at", "lead_time", "file"}


def _text_key(data: dict, skip: set = frozenset({"file"})) -> str | None:
    """Where a task's text is: ``text``, else its longest string value (a note, not a date or a name)."""
    if isinstance(data.get("text"), str):
        return "text"
    strings = [k for k, v in data.items() if isinstance(v, str) and k not in skip]
    return max(strings, key=lambda k: len(data[k]), default=None)


def _min_regions(record: dict) -> list | None:
    """The regions of a Label Studio JSON-MIN record (under its labels tag's name: a list of {start, end, labels}), or
    None."""
    return next((v for v in record.values() if isinstance(v, list) and v and isinstance(v[0], dict)
                 and {"start", "end", "labels"} <= v[0].keys()), None)


def _label_studio_min(path: Path, found: list, problems: list, counts: Counter) -> list:
    """JSON-MIN: a record an annotation, the text and its regions (a task without regions has no record of them)."""
    documents, seen = [], set()
    for n, r in enumerate(found, 1):
        where = f"{path}: task {r.get('id', n)}"
        doc = _document(r.get(_text_key(r, _MIN_META)), [r.get("file"), r.get("id")], n, seen, where, True)
        for i, value in enumerate(_min_regions(r) or [], 1):
            for label in value.get("labels") or []:
                _entity(doc, value.get("start"), value.get("end"), label, value.get("text"), f"{where}, region {i}", problems)
        documents.append(doc)
    return documents


def _predicted(path: Path, found: list, problems: list, counts: Counter) -> list:
    """entities.jsonl of a BRAT or .txt input: every .txt beside it is a document (one without entities has no
    record), annotated by the records that name it."""
    if any("sentence" in r for r in found):
        raise NERFormatError(f"{path}: predictions of a CoNLL file (token positions, not character offsets); read "
                             "predictions.conll beside it instead")
    folder = path.parent
    names = {str(p.relative_to(folder).with_suffix("")): p for p in sorted(folder.rglob("*.txt")) if not brat.hidden(p, folder)}
    documents = {name: brat.Document(name, brat.read_text(p)) for name, p in names.items()}
    for n, r in enumerate(found, 1):
        doc = documents.get(str(r["file"]).removesuffix(".txt"))
        if doc is None:
            raise NERFormatError(f"{path}:{n}: names {r['file']}, which is not beside it; put the notes' .txt files "
                                 "beside entities.jsonl (predict --formats brat,jsonl writes both)")
        _entity(doc, r["start"], r["end"], r["type"], r.get("text"), f"{path}:{n}", problems)
    return list(documents.values())


def _tag_names(path: Path) -> list[str] | None:
    """The ner_tags ClassLabel names of a datasets info file beside ``path``, or None."""
    for name in ("dataset_info.json", "dataset_infos.json"):
        info = path.parent / name
        if not info.is_file():
            continue
        try:
            found = json.loads(info.read_text(encoding="utf-8"))
        except ValueError as error:
            raise NERFormatError(f"{info}: not JSON ({error}); rewrite it with DatasetInfo.write_to_directory") from None
        infos = [found] if "features" in found else [v for v in found.values() if isinstance(v, dict)]
        for features in (i.get("features") or {} for i in infos):
            tags = features.get("ner_tags")
            feature = tags.get("feature") if isinstance(tags, dict) else tags[0] if isinstance(tags, list) and tags else None
            if isinstance(feature, dict) and isinstance(feature.get("names"), list):
                return feature["names"]
    return None


def _token_lists(path: Path, found: list, counts: Counter) -> list:
    names, sentences = None, []
    for n, r in enumerate(found, 1):
        tokens, tags = r["tokens"], r["ner_tags"]
        if not (isinstance(tokens, list) and isinstance(tags, list) and all(isinstance(t, str) for t in tokens)):
            raise NERFormatError(f"{path}:{n}: tokens must be a list of strings and ner_tags a list; fix the record")
        if len(tokens) != len(tags):
            raise NERFormatError(f"{path}:{n}: {len(tokens)} tokens and {len(tags)} ner_tags; give one tag a token")
        if any(isinstance(t, int) for t in tags):
            names = names or _tag_names(path)
            if names is None:
                raise NERFormatError(f"{path}: ner_tags are ids, and no dataset_info.json beside it names them; "
                                     "write it there (dataset.info.write_to_directory(folder)) or write the tags as "
                                     "strings")
            if any(not isinstance(t, int) or not 0 <= t < len(names) for t in tags):
                raise NERFormatError(f"{path}:{n}: a tag id outside the {len(names)} names of dataset_info.json; fix "
                                     "the record or the names")
            tags = [names[t] for t in tags]
        bad = next((t for t in tags if not iob2.is_tag(t)), None)
        if bad is not None:
            raise NERFormatError(f"{path}:{n}: tag {bad!r} is not IOB2 (O, B-TYPE, I-TYPE); convert the tags to BIO")
        if not tokens:
            counts["empty_sentences"] += 1
            continue
        sentences.append((tokens, tags))
    return sentences


def label_studio_config(types: Iterable[str]) -> str:
    """The labelling config (Label Studio's NER template) whose tag names the written tasks use, with these types."""
    labels = "".join(f'    <Label value="{escape(t, quote=True)}"/>\n' for t in sorted(types))
    return (f'<View>\n  <Labels name="{LABEL_STUDIO_FROM}" toName="{LABEL_STUDIO_TO}">\n{labels}  </Labels>\n'
            f'  <Text name="{LABEL_STUDIO_TO}" value="$text"/>\n</View>\n')


def write(path: Path, fmt: str, documents: list, gold: bool, model: str | None = None) -> None:
    """``documents``: [(name, text, [(start, end, type, score or None)])] as ``fmt`` (a key of WRITTEN) imports them:
    gold entities as annotations (Label Studio) or accepted answers (Prodigy), else as a model's suggestions."""
    from biofairseq.atomic import write_text

    lines = []
    for name, text, entities in documents:
        entities = sorted(entities)
        if fmt == "doccano":  # doccano keeps keys other than text and label as the example's metadata
            lines.append({"text": text, "label": [[s, e, t] for s, e, t, _ in entities], "file": f"{name}.txt"})
        elif fmt == "prodigy":
            lines.append({"text": text, "spans": [{"start": s, "end": e, "label": t} for s, e, t, _ in entities],
                          "meta": {"file": f"{name}.txt"}, **({"answer": "accept"} if gold else {})})
        elif fmt == "labelstudio":
            result = [{"id": f"e{i}", "from_name": LABEL_STUDIO_FROM, "to_name": LABEL_STUDIO_TO, "type": "labels",
                       "value": {"start": s, "end": e, "text": text[s:e], "labels": [t]},
                       **({"score": score} if score is not None else {})}
                      for i, (s, e, t, score) in enumerate(entities, 1)]
            task = {"data": {"text": text, "file": f"{name}.txt"}}
            if gold:
                task["annotations"] = [{"result": result}]
            else:
                scores = [score for *_, score in entities if score is not None]
                # the task's score sorts the Data Manager: its least sure entity first
                task["predictions"] = [{"model_version": model or "biofairseq", "result": result,
                                        **({"score": min(scores)} if scores else {})}]
            lines.append(task)
        else:
            raise ValueError(fmt)
    if fmt == "labelstudio":
        write_text(path, json.dumps(lines, ensure_ascii=False, indent=1) + "\n")
    else:
        write_text(path, "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))
