"""NER data from the annotation tools' JSON (doccano, Label Studio, Prodigy), datasets' token lists and our own
predict JSON lines: small files written by hand in each tool's documented shape, and PharmaCoNER converted to each
format and read back."""

import json

import pytest

from biofairseq.dev.samples import PHARMACONER
from biofairseq.finetune import NERFormatError, brat, data

pytestmark = pytest.mark.fast

TEXT = "Paciente con anemia ferropénica.\r\nSe pauta Hb15,6 y ácido fólico."  # CRLF and non-ASCII, as notes are
ANEMIA, HB, ACIDO = (13, 31, "ENFERMEDAD"), (43, 45, "PROTEINAS"), (52, 64, "NORMALIZABLES")


def write(path, records, lines=True):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records) if lines
                    else json.dumps(records, ensure_ascii=False, indent=2), encoding="utf-8")
    return path


def entities(dataset):
    return {(d.id, e.start, e.end, e.type) for d in dataset.documents for e in d.entities}


def tagged(dataset):
    return [(s.doc, list(zip(s.tokens, s.tags))) for s in dataset.sentences]


def test_the_offsets_of_the_sample_text():
    assert [TEXT[s:e] for s, e, _ in (ANEMIA, HB, ACIDO)] == ["anemia ferropénica", "Hb", "ácido fólico"]


def test_doccano_exports_with_and_without_relations_read_as_brat_documents(tmp_path):
    """doccano's sequence-labelling export ([[start, end, TYPE]] in label; {start_offset, end_offset, label} under
    entities when the project has relations); an example without labels is annotated with none; a span that cuts a
    word (Hb of Hb15) gets a token edge, as in BRAT."""
    plain = write(tmp_path / "doccano.jsonl", [
        {"id": 7, "text": TEXT, "label": [list(ANEMIA), list(HB), list(ACIDO)], "Comments": []},
        {"id": 8, "text": "Sin hallazgos.", "label": []},
    ])
    relations = write(tmp_path / "relations.jsonl", [
        {"id": 7, "text": TEXT, "entities": [{"id": 1, "label": t, "start_offset": s, "end_offset": e} for s, e, t in
                                             (ANEMIA, HB, ACIDO)], "relations": [], "Comments": []},
        {"id": 8, "text": "Sin hallazgos.", "entities": [], "relations": []},
    ])
    a, b = data.read(plain), data.read(relations)
    assert a.format == b.format == "doccano" and a.annotated
    assert entities(a) == entities(b) == {("7", *ANEMIA), ("7", *HB), ("7", *ACIDO)}
    assert tagged(a) == tagged(b) and not a.problems
    words = dict(pair for doc, pairs in tagged(a) if doc == "7" for pair in pairs)
    assert words["Hb"] == "B-PROTEINAS" and words["15"] == "O"
    assert a.statistics()["format"] == "doccano"


def test_label_studio_export_keeps_one_annotation_a_task_and_skips_what_is_not_gold(tmp_path):
    """Label Studio's JSON export: a cancelled annotation and relation results are skipped and counted; of two
    annotations the ground truth is kept; a region with two labels is two entities (flattened as overlaps are); a
    task not annotated yet is text, not gold; the text may sit under any data key."""
    region = lambda s, e, *labels: {"id": f"r{s}", "from_name": "label", "to_name": "text", "type": "labels",
                                    "value": {"start": s, "end": e, "text": TEXT[s:e], "labels": list(labels)}}
    tasks = [
        {"id": 1, "data": {"note": TEXT}, "predictions": [],
         "annotations": [
             {"id": 10, "was_cancelled": True, "result": [region(0, 8, "ENFERMEDAD")]},
             {"id": 11, "ground_truth": False, "result": [region(*ANEMIA[:2], "ENFERMEDAD")]},
             {"id": 12, "ground_truth": True, "result": [
                 region(*ANEMIA[:2], "ENFERMEDAD"), region(*HB[:2], "PROTEINAS", "NORMALIZABLES"), region(*ACIDO),
                 {"id": "x", "type": "relation", "from_id": "r13", "to_id": "r43", "direction": "right"}]}]},
        {"id": 2, "data": {"note": "Pendiente de revisar."}, "annotations": [], "predictions": []},
    ]
    tasks[0]["annotations"][2]["result"][2] = region(*ACIDO[:2], "NORMALIZABLES")
    dataset = data.read(write(tmp_path / "export.json", tasks, lines=False))
    assert dataset.format == "label-studio"
    assert entities(dataset) == {("1", *ANEMIA), ("1", *HB[:2], "PROTEINAS"), ("1", *HB[:2], "NORMALIZABLES"),
                                 ("1", *ACIDO)}
    assert [d.annotated for d in dataset.documents] == [True, False]
    assert dataset.counts["label_studio_cancelled_annotations_skipped"] == 1
    assert dataset.counts["label_studio_tasks_with_several_annotations_one_kept"] == 1
    assert dataset.counts["label_studio_results_not_labels_skipped"] == 1
    assert [k for k, _ in dataset.problems] == ["flattened"]  # two labels on Hb: one kept in the BIO tags


def test_label_studio_json_min_reads_the_regions_under_the_labels_tag(tmp_path):
    """JSON-MIN: the text under the Text tag's value name, the regions under the Labels tag's; an annotation without
    regions has no key for them; a byte-order mark is read past."""
    regions = [{"start": s, "end": e, "text": TEXT[s:e], "labels": [t]} for s, e, t in (ANEMIA, HB, ACIDO)]
    meta = {"annotator": "ana@hospital.org", "annotation_id": 9, "created_at": "2026-12-01T10:00:00Z", "lead_time": 4.2}
    path = write(tmp_path / "min.json", [{"nota": TEXT, "id": 3, "entidad": regions, **meta},
                                         {"nota": "Sin hallazgos.", "id": 4, **meta}], lines=False)
    path.write_bytes("\ufeff".encode() + path.read_bytes())
    dataset = data.read(path)
    assert dataset.format == "label-studio-min" and entities(dataset) == {("3", *ANEMIA), ("3", *HB), ("3", *ACIDO)}
    assert [d.text for d in dataset.documents] == [TEXT, "Sin hallazgos."] and dataset.annotated


def test_prodigy_spans_train_on_accepted_answers_only(tmp_path):
    path = write(tmp_path / "prodigy.jsonl", [
        {"text": TEXT, "spans": [{"start": s, "end": e, "label": t, "token_start": 0, "token_end": 0}
                                 for s, e, t in (ANEMIA, HB, ACIDO)],
         "_input_hash": 1, "_task_hash": 2, "answer": "accept", "meta": {"file": "nota1.txt"}},
        {"text": "Dolor torácico.", "spans": [{"start": 0, "end": 14, "label": "ENFERMEDAD"}], "answer": "reject"},
        {"text": "Fiebre.", "spans": [], "answer": "ignore"},
    ])
    dataset = data.read(path)
    assert dataset.format == "prodigy" and entities(dataset) == {("nota1", *ANEMIA), ("nota1", *HB), ("nota1", *ACIDO)}
    assert [d.annotated for d in dataset.documents] == [True, False, False]
    assert dataset.counts["prodigy_answers_not_accept"] == 2


def test_our_predict_json_lines_read_back_with_the_notes_beside_them(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "nota1.txt").write_bytes(TEXT.encode())
    (tmp_path / "nota2.txt").write_bytes(b"Sin hallazgos.")
    write(tmp_path / "entities.jsonl", [{"file": "sub/nota1.txt", "start": s, "end": e, "type": t,
                                         "text": TEXT[s:e], "score": 0.9} for s, e, t in (ANEMIA, HB, ACIDO)])
    dataset = data.read(tmp_path / "entities.jsonl")
    assert dataset.format == "predict" and dataset.annotated
    assert entities(dataset) == {("sub/nota1", *ANEMIA), ("sub/nota1", *HB), ("sub/nota1", *ACIDO)}
    assert sorted(d.id for d in dataset.documents) == ["nota2", "sub/nota1"]
    write(tmp_path / "entities.jsonl", [{"file": "nota3.txt", "start": 0, "end": 3, "type": "X", "text": "Sin"}])
    with pytest.raises(NERFormatError, match=r"entities.jsonl:1: names nota3.txt, which is not beside it"):
        data.read(tmp_path / "entities.jsonl")


def test_token_lists_with_tag_strings_or_ids_named_by_dataset_info(tmp_path):
    """datasets' to_json: one record a sentence; ids are named by the ClassLabel of dataset_info.json (as
    save_to_disk and DatasetInfo.write_to_directory write it); an I- starting an entity is read as B-, as CoNLL's."""
    names = ["O", "B-Disease", "I-Disease"]
    rows = [{"id": "0", "tokens": ["Familial", "breast", "cancer", "."], "ner_tags": [0, 1, 2, 0]},
            {"id": "1", "tokens": ["Ovarian", "cancer"], "ner_tags": [2, 2]}, {"id": "2", "tokens": [], "ner_tags": []}]
    ids = write(tmp_path / "ids" / "train.json", rows) if (tmp_path / "ids").mkdir() is None else None
    with pytest.raises(NERFormatError, match=r"train.json: ner_tags are ids, and no dataset_info.json beside it"):
        data.read(ids)
    info = {"features": {"id": {"dtype": "string", "_type": "Value"},
                         "tokens": {"feature": {"dtype": "string", "_type": "Value"}, "_type": "Sequence"},
                         "ner_tags": {"feature": {"names": names, "_type": "ClassLabel"}, "_type": "Sequence"}}}
    (tmp_path / "ids" / "dataset_info.json").write_text(json.dumps(info), encoding="utf-8")
    by_id = data.read(ids)
    strings = data.read(write(tmp_path / "strings.jsonl", [{**r, "ner_tags": [names[t] for t in r["ner_tags"]]}
                                                            for r in rows]))
    assert by_id.format == strings.format == "tokens" and not by_id.has_documents
    assert [s.tags for s in by_id.sentences] == [s.tags for s in strings.sentences] == [
        ["O", "B-Disease", "I-Disease", "O"], ["B-Disease", "I-Disease"]]
    assert [k for k, _ in by_id.problems] == ["repaired"] and by_id.counts["empty_sentences"] == 1


@pytest.mark.parametrize("records, message", [
    ([{"title": "x", "body": "y"}], r"none of the JSON read here \(the first has body, title\); give span JSON"),
    ([{"text": "a", "label": [[0, 1, "X"]]}, {"tokens": ["a"], "ner_tags": ["O"]}],
     r"record 2 is token lists \(tokens \+ ner_tags\), the first doccano JSONL; give one kind a file"),
    ([{"text": "abc", "label": [[0, "2", "X"]]}], r"doc.jsonl:1, label 1: an entity needs integer start and end and a label"),
    ([{"text": "abc", "label": [{"start": 0, "end": 2, "label": "X"}]}],
     r"doc.jsonl:1: label .* is neither \[start, end, TYPE\] nor \{start_offset, end_offset, label\}"),
    ([{"id": 1, "data": {"image": "/data/upload/1/xray.png"}, "annotations": [{"result": [
        {"type": "rectanglelabels", "value": {"x": 1, "y": 2, "rectanglelabels": ["Mass"]}}]}]}],
     r"doc.jsonl: its annotations hold no text spans \(Labels\), only rectanglelabels; export a text project"),
    ([{"tokens": ["a", "b"], "ner_tags": ["O"]}], r"doc.jsonl:1: 2 tokens and 1 ner_tags; give one tag a token"),
    ([{"tokens": ["a"], "ner_tags": ["S-X"]}], r"doc.jsonl:1: tag 'S-X' is not IOB2"),
])
def test_json_of_no_kind_read_or_with_bad_records_is_refused_in_one_line(tmp_path, records, message):
    with pytest.raises(NERFormatError, match=message) as error:
        data.read(write(tmp_path / "doc.jsonl", records))
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("name, text, message", [
    ("broken.jsonl", '{"text": "a", "label": []}\n{"text": \n', r"broken.jsonl:2: not a JSON line"),
    ("comma.json", '[{"data": {"text": "a"}},\n]\n', r"comma.json:2: not JSON \(Expecting value at column 1: a trailing comma"),
    ("table.json", "text,label\nfiebre,SINTOMA\n", r"table.json: not JSON \(it starts with 'text,label.*', a CSV\?\); export JSON"),
    ("empty.json", "\n", r"empty.json: no records; give span JSON"),
])
def test_broken_json_and_empty_files_are_refused_naming_the_line(tmp_path, name, text, message):
    (tmp_path / name).write_text(text, encoding="utf-8")
    with pytest.raises(NERFormatError, match=message):
        data.read(tmp_path / name)


def test_problems_are_those_of_brat_and_counted_as_brat_counts_them(tmp_path):
    """An entity past the text is dropped, a mention that disagrees with its offsets is kept by them, white space at
    an edge is trimmed, an empty document is counted: the BRAT reader's kinds, in metrics.json's counts."""
    region = lambda s, e, text: {"type": "labels", "value": {"start": s, "end": e, "text": text, "labels": ["X"]}}
    tasks = [{"id": 1, "data": {"text": TEXT}, "annotations": [{"result": [
        region(60, 90, "fólico."), region(13, 19, "anemiaX"), region(12, 19, " anemia")]}]},
             {"id": 2, "data": {"text": ""}, "annotations": [{"result": []}]}]
    dataset = data.read(write(tmp_path / "ls.json", tasks, lines=False))
    kinds = dataset.problem_counts()
    assert (kinds["outside"], kinds["misaligned"], kinds["dropped"]) == (1, 1, 2)  # the trimmed one overlaps: flattened
    assert dataset.counts["empty_documents"] == 1


@pytest.mark.parametrize("fmt", ["doccano", "labelstudio", "prodigy"])
@pytest.mark.parametrize("split", ["train", "test"])
def test_pharmaconer_converted_to_each_format_reads_back_the_same_entities_and_tags(fmt, split, tmp_path):
    """BRAT -> the tool's format (gold, as biofairseq-ner convert writes it) -> read back: every mention at its
    offsets, and the same sentences and tags to train on."""
    from biofairseq.finetune import json_formats

    gold = data.read(PHARMACONER / split)
    path = tmp_path / json_formats.WRITTEN[fmt]
    json_formats.write(path, fmt, [(d.id, d.text, [(e.start, e.end, e.type, None) for e in d.entities])
                                   for d in gold.documents], gold=True)
    back = data.read(path)
    assert brat.mentions(back.documents) == brat.mentions(gold.documents)
    assert tagged(back) == tagged(gold) and back.annotated


def test_convert_leaves_out_what_a_half_done_project_has_not_annotated_and_says_so(tmp_path, capsys):
    """convert of a Label Studio export with a task not annotated yet: converted without it, with a note; --to
    labelstudio writes the project's labelling config beside the tasks, naming the data's types."""
    from biofairseq.finetune import cli

    tasks = [{"id": 1, "data": {"text": TEXT}, "annotations": [{"result": [
                {"type": "labels", "value": {"start": s, "end": e, "labels": [t]}} for s, e, t in (ANEMIA, HB, ACIDO)]}]},
             {"id": 2, "data": {"text": "Pendiente."}, "annotations": []}]
    export = write(tmp_path / "export.json", tasks, lines=False)
    assert cli.main(["convert", str(export), str(tmp_path / "out.conll")]) == 0
    out, err = capsys.readouterr()
    assert "note: input " in err and "1 of 2 documents not annotated (yet), left out: 2" in err
    assert f"read {export}: Label Studio JSON" in out + err
    assert json.loads((tmp_path / "out.stats.json").read_text())["documents_not_annotated_left_out"] == 1
    assert cli.main(["convert", str(export), str(tmp_path / "again.json"), "--to", "labelstudio"]) == 0
    config = (tmp_path / "again.xml").read_text()
    assert '<Labels name="label" toName="text">' in config and '<Text name="text" value="$text"/>' in config
    assert [line.strip() for line in config.splitlines() if "<Label " in line] == [
        f'<Label value="{t}"/>' for t in ("ENFERMEDAD", "NORMALIZABLES", "PROTEINAS")]
    assert [t["data"]["file"] for t in json.loads((tmp_path / "again.json").read_text())] == ["1.txt"]
