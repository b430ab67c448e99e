"""biofairseq-ner on real PharmaCoNER (BRAT) and NCBI-disease (CoNLL) data, with tiny real transformers encoders."""

import json
import random
import re
import shutil
import subprocess
from collections import defaultdict

import pytest

from brat_scorer import score as official_score
from biofairseq.dev.samples import NCBI, PHARMACONER, PHARMACONER_MISALIGNED
from ner_models import tiny_roberta

from biofairseq.finetune import NERFormatError, brat, data, iob2, metrics, training, windows
from biofairseq.finetune.fingerprint import weights_sha256


def ner(*args, check=True):
    """biofairseq-ner's main, run in this process on one thread, as a finished process (exit status, stdout, stderr).
    Its console script runs as a process of its own in every recipe test; here that would cost the import of
    transformers and torch (3 s) on each of ten calls."""
    import contextlib
    import io

    import torch

    from biofairseq.finetune import cli

    out, err, threads = io.StringIO(), io.StringIO(), torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = cli.main([str(a) for a in args])
            except SystemExit as exit:  # argparse's usage errors
                status = exit.code
    finally:
        torch.set_num_threads(threads)
    proc = subprocess.CompletedProcess(["biofairseq-ner", *map(str, args)], status, out.getvalue(), err.getvalue())
    if check and proc.returncode != 0:
        raise AssertionError(f"biofairseq-ner {args[0]} failed ({proc.returncode}):\n{proc.stderr[-4000:]}\n{proc.stdout[-2000:]}")
    return proc


def brat_sample(folder, split, count, first=0):
    folder.mkdir(parents=True)
    for txt in sorted((PHARMACONER / split).glob("*.txt"))[first : first + count]:
        shutil.copy(txt, folder)
        shutil.copy(txt.with_suffix(".ann"), folder)
    return folder


def conll_sample(path, split, count):
    sentences = (NCBI / f"{split}.tsv").read_text(encoding="utf-8").split("\n\n")[:count]
    path.write_text("\n\n".join(sentences) + "\n\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return tiny_roberta(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def tokenizer(model):
    from biofairseq.finetune.training import load_tokenizer

    return load_tokenizer(model)


def gold_triples(documents):
    return {doc.id: {(e.start, e.end, e.type) for e in doc.entities} for doc in documents}


# ---- data


def brat_round_trip(folder, tmp_path):
    """(dataset, gold triples by document, the triples that differ after BIO -> BRAT files -> read back)."""
    dataset = data.read(folder)
    entities = defaultdict(list)
    for sentence in dataset.sentences:
        entities[sentence.doc] += data.entity_offsets(sentence, sentence.tags)
    brat.write_folder(tmp_path, dataset.documents, entities)  # as the predictions are written and scored
    written = gold_triples(brat.read_folder(tmp_path, []))
    gold = gold_triples(dataset.documents)
    return dataset, gold, {(doc, t) for doc in gold for t in gold[doc] ^ written[doc]}


@pytest.mark.fast
@pytest.mark.parametrize("split", ["train", "valid", "test"])
def test_brat_to_bio_to_brat_reproduces_every_pharmaconer_entity(split, tmp_path):
    dataset, gold, differing = brat_round_trip(PHARMACONER / split, tmp_path)
    # every entity line of the .ann files (the sample has no duplicate, nested or misaligned entity)
    lines = sum(line.startswith("T") for ann in (PHARMACONER / split).glob("*.ann") for line in ann.read_text(encoding="utf-8").splitlines())
    assert sum(len(v) for v in gold.values()) == lines == {"train": 703, "valid": 293, "test": 259}[split]
    assert differing == set() and not dataset.problems


@pytest.mark.fast
def test_the_misaligned_pharmaconer_entities_are_reported_and_kept_by_their_offsets(tmp_path):
    """The official release's 5 shifted entities of S0211-69952015000200015-1 are reported with file and line and
    kept by their offsets; the 3 whose offsets end in a space come back without it, and are listed as such."""
    dataset, gold, differing = brat_round_trip(PHARMACONER_MISALIGNED, tmp_path)
    problems = defaultdict(list)
    for kind, message in dataset.problems:
        problems[kind].append(message)
    assert sum(len(v) for v in gold.values()) == 12
    assert len(problems["misaligned"]) == 5
    assert all("S0211-69952015000200015-1.ann:" in m and "kept by its offsets" in m for m in problems["misaligned"])
    assert len(problems["trimmed"]) == 3 and set(problems) == {"misaligned", "trimmed"}
    trimmed = {(int(m.split(" ")[2].split("-")[0]), int(m.split(" ")[2].split("-")[1])) for m in problems["trimmed"]}
    assert {(s, e) for _, (s, e, _) in differing if (s, e) in trimmed} == trimmed
    assert len(differing) == 6  # each trimmed entity: the gold span and the span without its space


@pytest.mark.fast
def test_sentences_never_cut_entities_and_overlaps_are_flattened_longest_first(tmp_path):
    text = "Recibió ácido fólico 5 mg. Después, Ac. Toxoplasma negativo.\nHb15,6 g/dl y PCR.\n"
    at = lambda mention: (text.index(mention), text.index(mention) + len(mention))
    folic, nested, cut, hb, pcr = at("ácido fólico"), at("fólico"), at("mg. Después"), at("Hb"), at("PCR")
    ann = "\n".join([
        f"T1\tNORMALIZABLES {folic[0]} {folic[1]}\tácido fólico",
        "#1\tAnnotatorNotes T1\t63718003",
        f"T2\tPROTEINAS {nested[0]} {nested[1]}\tfólico",  # nested in T1: dropped
        f"T3\tNORMALIZABLES {folic[0]} {folic[1]}\tácido fólico",  # duplicate of T1
        f"T4\tNO_NORMALIZABLES {cut[0]} {cut[1]}\tmg. Después",  # crosses the sentence break after "mg."
        f"T5\tPROTEINAS {hb[0]} {hb[1]}\tHb",  # inside the regex token "Hb15"
        f"T6\tPROTEINAS {pcr[0]} {pcr[1]}\tPCX",  # the text says PCR: misaligned, kept by its offsets
        "R1\tRel Arg1:T1 Arg2:T5",
    ])
    (tmp_path / "doc.txt").write_text(text, encoding="utf-8")
    (tmp_path / "doc.ann").write_text(ann + "\n", encoding="utf-8")
    dataset = data.read(tmp_path)
    assert sorted(k for k, _ in dataset.problems) == ["duplicate", "flattened", "misaligned"]
    assert any(m.startswith(f"{tmp_path / 'doc.ann'}:3: PROTEINAS {nested[0]}-{nested[1]} overlaps NORMALIZABLES") for _, m in dataset.problems)
    assert any(m.startswith(f"{tmp_path / 'doc.ann'}:7: offsets") for _, m in dataset.problems)
    assert dataset.counts["sentence_breaks_inside_entities_removed"] == 1
    found = {(s, e, k) for sentence in dataset.sentences for s, e, k in data.entity_offsets(sentence, sentence.tags)}
    assert found == {(*folic, "NORMALIZABLES"), (*cut, "NO_NORMALIZABLES"), (*hb, "PROTEINAS"), (*pcr, "PROTEINAS")}
    assert [s.tokens[:3] for s in dataset.sentences] == [["Recibió", "ácido", "fólico"], ["Hb", "15", ","]]
    assert "Toxoplasma" in dataset.sentences[0].tokens  # "Ac. Toxoplasma" is not cut either


@pytest.mark.fast
def test_conversion_command_writes_bio_and_statistics(tmp_path):
    sample = brat_sample(tmp_path / "brat", "train", 3)
    out = tmp_path / "out" / "train.conll"
    proc = ner("convert", sample, out)
    stats = json.loads(out.with_suffix(".stats.json").read_text())
    assert stats["documents"] == 3 and stats["entities"] == stats["entities_read"] > 0 and "entities" in proc.stdout
    back = data.read(out)
    assert [s.tokens for s in back.sentences] == [s.tokens for s in data.read(sample).sentences]
    assert sum(len(iob2.spans(s.tags)) for s in back.sentences) == stats["entities"]


@pytest.mark.fast
@pytest.mark.parametrize("make, message", [
    (lambda p: p / "missing", "no such file or folder"),
    (lambda p: (p.mkdir(), (p / "a.ann").write_text("T1\tX 0 1\ta\n"))[0] or p, "BRAT file without its .txt"),
    (lambda p: (p.mkdir(), (p / "a.txt").write_text("abc"), (p / "a.ann").write_text("T1\tX zero 1\ta\n"))[0] or p, "a.ann:1: not a BRAT entity line"),
    (lambda p: (p.with_suffix(".tsv").write_text("fever\tB-Disease\nhigh\tDISEASE\n"), p.with_suffix(".tsv"))[1], ":2: tag 'DISEASE' is not IOB2"),
])
def test_bad_data_gives_one_line_naming_the_file(tmp_path, make, message):
    path = make(tmp_path / "input")
    with pytest.raises(NERFormatError, match="^" + str(tmp_path).replace("\\", "\\\\") + ".*" + message.replace("(", "\\(")):
        data.read(path)


# ---- windows


@pytest.mark.fast
def test_windows_give_every_gold_word_exactly_one_prediction(tokenizer):
    dataset = data.read(PHARMACONER / "valid")
    # one document as a single sentence of ~500 words: far longer than the 64 sub-tokens allowed
    doc = dataset.documents[0].id
    parts = [s for s in dataset.sentences if s.doc == doc]
    long = data.Sentence(sum((s.tokens for s in parts), []), sum((s.tags for s in parts), []))
    sentences = [long, *dataset.sentences[:200]]
    labels = iob2.label_list(dataset.types())
    ids = {l: i for i, l in enumerate(labels)}
    for scheme in ("first-subtoken", "all-subtokens"):
        built = windows.build(sentences, tokenizer, ids, 64, scheme, overlap=16)
        assert max(len(w.input_ids) for w in built) <= 64
        assert sum(w.sentence == 0 for w in built) > len(long.tokens) * 1.2 / 62  # the long one is cut into many
        owned = defaultdict(list)
        for w in built:
            for word, _ in w.owned:
                owned[(w.sentence, word)].append(w)
        assert all(len(v) == 1 for v in owned.values())
        assert len(owned) == sum(len(s.tokens) for s in sentences)
        # the gold labels, read back through the windows as if they were predictions, are the gold tags
        as_predictions = [[ids["O"] if x == windows.IGNORE else x for x in w.labels] for w in built]
        assert windows.word_tags(built, as_predictions, labels, len(sentences)) == [s.tags for s in sentences]
        # all-subtokens labels every sub-token between <s> and </s>; first-subtoken only the first of each word
        labelled = [sum(x != windows.IGNORE for x in w.labels) == len(w.input_ids) - 2 for w in built]
        assert all(labelled) if scheme == "all-subtokens" else not all(labelled)


@pytest.mark.fast
def test_both_labelling_schemes_score_a_known_prediction_set_at_the_word_level(tokenizer):
    """BioMegatron's whole-word labelling (first-subtoken) and sub-token labelling (all-subtokens) differ in training
    only: each word is scored once, by its first sub-token, so their F1s compare on the same gold words."""
    sentences = data.read(NCBI / "devel.tsv").sentences[:300]
    labels = iob2.label_list({"Disease"})
    ids = {l: i for i, l in enumerate(labels)}
    spans = [(i, span) for i, s in enumerate(sentences) for span in iob2.spans(s.tags)]
    missed = set(random.Random(1).sample(spans, 20))
    gold = [s.tags for s in sentences]
    expected = [list(t) for t in gold]
    for i, (a, b, _) in missed:
        expected[i][a:b] = ["O"] * (b - a)
    tp, total = len(spans) - len(missed), len(spans)
    for scheme in ("first-subtoken", "all-subtokens"):
        built = windows.build(sentences, tokenizer, ids, 64, scheme, overlap=16)
        continuation = 0
        predictions = []
        for w in built:
            # every continuation sub-token predicts B-Disease: a scorer that read them would find spurious entities
            predicted = [ids["B-Disease"]] * len(w.input_ids)
            for word, position in w.owned:
                predicted[position] = ids[expected[w.sentence][word]]
            continuation += len(w.input_ids) - 2 - len(w.owned)
            predictions.append(predicted)
        assert continuation > 100
        tags = windows.word_tags(built, predictions, labels, len(sentences))
        assert tags == expected
        s = metrics.scores(gold, tags)
        assert s["precision"] == 1.0 and s["recall"] == pytest.approx(tp / total)
        assert s["f1"] == pytest.approx(2 * tp / (tp + total))
        # training labels: sub-token labelling teaches I-X on a B-X word's continuation pieces, whole-word none
        word, position = next((o for w in built for o in w.owned if gold[w.sentence][o[0]].startswith("B-")
                               and len(w.input_ids) > o[1] + 1 and (o[0] + 1, o[1] + 1) not in w.owned), (None, None))
        window = next(w for w in built if (word, position) in w.owned)
        assert window.labels[position + 1] == (ids["I-Disease"] if scheme == "all-subtokens" else windows.IGNORE)


def test_a_two_layer_head_trains_saves_and_predicts_the_same(model, tmp_path):
    from biofairseq.finetune import head

    train = conll_sample(tmp_path / "train.tsv", "train", 30)
    dev = conll_sample(tmp_path / "dev.tsv", "devel", 15)
    out = tmp_path / "run"
    ner("train", "--model", model, "--train", train, "--dev", dev, "--output-dir", out, "--lr", 3e-3, "--epochs", 1,
        "--batch-size", 16, "--gradient-accumulation", 1, "--max-length", 64, "--num-fc-layers", 2, "--fc-hidden-size", 24,
        "--fc-dropout", 0.5)
    m = json.loads((out / "metrics.json").read_text())
    assert m["options"]["num_fc_layers"] == 2 and m["options"]["fc_dropout"] == 0.5
    loaded = head.load(out / "model")
    assert [tuple(p.shape) for n, p in loaded.named_parameters() if n.startswith("classifier.")] == [(24, 64), (24,), (3, 24), (3,)]
    assert loaded.config.classifier_dropout == 0.5 and loaded.dropout.p == 0.5
    proc = ner("predict", "--model", out, "--input", dev, "--output-dir", tmp_path / "pred", "--max-length", 64)
    assert json.loads((tmp_path / "pred" / "metrics.json").read_text())["scores"]["f1"] == pytest.approx(m["dev"]["f1"])
    assert "input F1" in proc.stdout


@pytest.mark.fast
def test_a_two_layer_head_loads_from_a_sharded_save(model, tmp_path):
    """transformers shards a save above max_shard_size (5 GB by default: BioMegatron-1.2b's fine-tuned model in fp32)."""
    import torch

    from biofairseq.finetune import head

    built = head.build(model, ["O", "B-X", "I-X"], fc_layers=2, fc_hidden_size=24).eval()
    built.save_pretrained(tmp_path / "sharded", max_shard_size="200KB")
    assert len(list((tmp_path / "sharded").glob("model-*.safetensors"))) > 1
    loaded = head.load(tmp_path / "sharded")
    ids = torch.tensor([[0, 40, 41, 42, 2]])
    with torch.no_grad():
        assert torch.equal(built(input_ids=ids).logits, loaded(input_ids=ids).logits)


# ---- metrics


@pytest.mark.fast
def test_gold_as_prediction_scores_one_and_known_errors_score_the_hand_computed_values(tmp_path):
    sentences = data.read(NCBI / "devel.tsv").sentences
    gold = [s.tags for s in sentences]
    assert metrics.scores(gold, gold)["f1"] == 1.0
    spans = [(i, span) for i, tags in enumerate(gold) for span in iob2.spans(tags)]
    total = len(spans)
    assert total == 245  # the B- tags of the excerpt's 300 sentences
    rng = random.Random(0)
    dropped, shifted = rng.sample(spans, 40), []
    predicted = [list(t) for t in gold]
    for i, (a, b, kind) in dropped:
        predicted[i][a:b] = ["O"] * (b - a)
    for i, (a, b, kind) in spans:
        if (i, (a, b, kind)) not in dropped and b < len(gold[i]) and gold[i][b] == "O" and len(shifted) < 25:
            predicted[i][b] = f"I-{kind}"  # one token too long: a false positive and a false negative
            shifted.append(i)
    spurious = 0
    for i, tags in enumerate(gold):
        if all(t == "O" for t in tags) and spurious < 30:
            predicted[i][0] = "B-Disease"
            spurious += 1
    tp, n_pred = total - 40 - 25, total - 40 + 30
    s = metrics.scores(gold, predicted)
    assert s["precision"] == pytest.approx(tp / n_pred) and s["recall"] == pytest.approx(tp / total)
    assert s["f1"] == pytest.approx(2 * tp / (n_pred + total))
    # per type, on PharmaCoNER: every PROTEINAS predicted as NORMALIZABLES
    pc = [s.tags for s in data.read(PHARMACONER / "test").sentences]
    swapped = [[t.replace("PROTEINAS", "NORMALIZABLES") for t in tags] for tags in pc]
    per = metrics.scores(pc, swapped)["per_type"]
    assert per["PROTEINAS"]["recall"] == 0 and per["NORMALIZABLES"]["recall"] == 1.0
    assert per["NORMALIZABLES"]["precision"] == pytest.approx(130 / (130 + 123))  # the sample's test entities


# ---- training, prediction, sweep


@pytest.fixture(scope="module")
def trained(model, tmp_path_factory):
    root = tmp_path_factory.mktemp("pharmaconer")
    train = brat_sample(root / "train", "train", 60)
    dev = brat_sample(root / "dev", "valid", 10)
    test = brat_sample(root / "test", "test", 8)  # fewer windows than dev: scored apart from the dev metrics
    assert add_nested_mentions(test) > 5
    add_unseen_type(test)  # accepted with --allow-unseen-types: the model cannot learn it, the scores count it
    out = root / "run"
    # the card biofairseq-convert to-hf gives a converted model: the fine-tuned model's card inherits its language and license
    (model / "README.md").write_text("---\nlanguage: es\nlicense: apache-2.0\n---\n\nA tiny RoBERTa.\n", encoding="utf-8")
    proc = ner("train", "--model", model, "--train", train, "--dev", dev, "--test", test, "--output-dir", out, "--lr", 3e-3,
               "--epochs", 5, "--warmup-ratio", 0.1, "--batch-size", 8, "--gradient-accumulation", 1, "--max-length", 64,
               "--window-overlap", 16, "--dataset", "PlanTL-GOB-ES/pharmaconer", "--allow-unseen-types")
    (root / "train.stderr").write_text(proc.stderr, encoding="utf-8")
    return out, dev, test


UNSEEN = "SPECIES"  # another data set's type (LINNAEUS, S800): a test set training never saw it in


def add_unseen_type(folder, documents=2):
    """The first entity of the first ``documents`` documents that have one, retyped UNSEEN."""
    anns = [ann for ann in sorted(folder.glob("*.ann")) if "\nT" in "\n" + ann.read_text(encoding="utf-8")]
    for ann in anns[:documents]:
        lines = ann.read_text(encoding="utf-8").splitlines()
        first = next(i for i, line in enumerate(lines) if line.startswith("T"))
        name, span, mention = lines[first].split("\t")
        lines[first] = "\t".join([name, f"{UNSEEN} {span.split(' ', 1)[1]}", mention])
        ann.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_a_type_training_never_saw_is_kept_with_the_flag_and_named_in_every_result(trained, tmp_path):
    """--allow-unseen-types: the model's labels are the types it trained on; the test's UNSEEN mentions stay gold, so
    they count as missed, as the official scorer counts them (test_brat_scores_count_every_gold_mention...), and the
    run's log, metrics.json, model card and report name the type."""
    out, _, test = trained
    m = json.loads((out / "metrics.json").read_text())
    assert m["unseen_types"] == {"test": [UNSEEN]} and not any(UNSEEN in label for label in m["labels"])
    assert m["test"]["per_type"][UNSEEN]["support"] >= 2 and m["test"]["per_type"][UNSEEN]["recall"] == 0
    said = [line for line in (out.parent / "train.stderr").read_text(encoding="utf-8").splitlines() if UNSEEN in line]
    assert len(said) == 1 and f"test {test}" in said[0] and "never seen in training" in said[0]
    assert f"{UNSEEN} (never seen in training)" in (out / "model" / "README.md").read_text(encoding="utf-8")
    table = ner("report", out, "--output-dir", tmp_path / "report").stdout
    assert f"never seen in training: {UNSEEN}" in table
    assert f" {UNSEEN} (never seen in training) |" in (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    assert json.loads((tmp_path / "report" / "report.json").read_text())[0]["unseen_types"] == [UNSEEN]
    # predict scores the same test set as the run did, with the same flag
    args = ["predict", "--model", out, "--input", test, "--max-length", 64, "--window-overlap", 16]
    refused = ner(*args, "--output-dir", tmp_path / "refused", check=False)
    error = [line for line in refused.stderr.splitlines() if "error:" in line]  # after the nested mentions' warning
    assert refused.returncode == 1 and len(error) == 1 and UNSEEN in error[0] and "--allow-unseen-types" in error[0]
    ner(*args, "--output-dir", tmp_path / "pred", "--allow-unseen-types")
    predicted = json.loads((tmp_path / "pred" / "metrics.json").read_text())
    assert predicted["scores"]["f1"] == pytest.approx(m["test"]["f1"]) and predicted["unseen_types"] == [UNSEEN]


def test_finetuning_improves_dev_f1_over_the_untrained_head(trained):
    out, *_ = trained
    m = json.loads((out / "metrics.json").read_text())
    untrained = m["history"][0]
    assert untrained["step"] == 0
    assert m["best"]["f1"] > untrained["f1"] + 0.1 and m["dev"]["f1"] == pytest.approx(m["best"]["f1"])
    assert set(m["dev"]["per_type"]) <= {"NORMALIZABLES", "NO_NORMALIZABLES", "PROTEINAS", "UNCLEAR"}
    assert (out / "model" / "config.json").is_file() and not (out / "checkpoints").exists()
    assert any((out / "tensorboard").iterdir())


def test_printed_f1_equals_the_official_scorer_on_the_written_brat_predictions(trained, tmp_path):
    out, dev, test = trained
    m = json.loads((out / "metrics.json").read_text())
    for name, gold in (("dev", dev), ("test", test)):
        official = official_score(gold, out / "predictions" / name)
        assert official["tp"] > 0 and official["fp"] + official["fn"] > 0  # real, imperfect predictions
        assert official["f1"] == pytest.approx(m[name]["f1"], abs=1e-12)
        assert official["precision"] == pytest.approx(m[name]["precision"], abs=1e-12)
    # predict: the saved model tags the same folder the same way
    proc = ner("predict", "--model", out, "--input", dev, "--output-dir", tmp_path / "pred", "--max-length", 64, "--window-overlap", 16)
    assert json.loads((tmp_path / "pred" / "metrics.json").read_text())["scores"]["f1"] == pytest.approx(m["dev"]["f1"])
    for ann in (out / "predictions" / "dev").glob("*.ann"):
        assert (tmp_path / "pred" / "predictions" / ann.name).read_text() == ann.read_text()
    assert "input F1" in proc.stdout
    with pytest.raises(NERFormatError, match="holds a finished run .*; choose another --output-dir or pass --overwrite$"):
        training.train(out / "model", dev, dev, None, out, training.TrainOptions())


def electra_layer_lrs(learning_rate, layer_decay, n_layers):
    """google-research/electra's _get_layer_lrs (model/optimization.py): learning rate by TF variable-name key, the
    task head at depth n_layers + 2, layer i at depth i + 1, the embeddings (and their projection) at depth 0."""
    key_to_depths = {"/embeddings/": 0, "/embeddings_project/": 0, "task_specific/": n_layers + 2}
    for layer in range(n_layers):
        key_to_depths[f"encoder/layer_{layer}/"] = layer + 1
    return {key: learning_rate * layer_decay ** (n_layers + 2 - depth) for key, depth in key_to_depths.items()}


def reference_key(name):
    """The key of ``electra_layer_lrs`` that a transformers parameter's TF name would match."""
    if ".embeddings_project." in name:
        return "/embeddings_project/"
    if ".embeddings." in name:
        return "/embeddings/"
    layer = re.search(r"\.encoder\.layer\.(\d+)\.", name)
    return f"encoder/layer_{layer.group(1)}/" if layer else "task_specific/"


@pytest.mark.fast
@pytest.mark.parametrize("family", ["roberta", "electra"])
def test_layerwise_lr_decay_gives_electras_reference_rates_to_a_12_layer_model(family):
    import transformers
    from transformers import TrainingArguments

    from biofairseq.finetune.training import layerwise_groups

    shape = dict(vocab_size=100, hidden_size=16, num_hidden_layers=12, num_attention_heads=2, intermediate_size=32)
    if family == "roberta":
        encoder = transformers.RobertaForTokenClassification(transformers.RobertaConfig(**shape, num_labels=3))
    else:  # ELECTRA-small's embeddings narrower than its layers: the projection sits at the embeddings' depth
        encoder = transformers.ElectraForTokenClassification(transformers.ElectraConfig(**shape, embedding_size=8, num_labels=3))
    args = TrainingArguments(output_dir="unused", learning_rate=1e-4, weight_decay=0.01, report_to="none")
    decay_names = {n for n, _ in encoder.named_parameters() if "bias" not in n}
    groups = layerwise_groups(encoder, args, 0.8, decay_names)
    reference = electra_layer_lrs(1e-4, 0.8, 12)
    lr_of = {id(p): g["lr"] for g in groups for p in g["params"]}
    decay_of = {id(p): g["weight_decay"] for g in groups for p in g["params"]}
    named = dict(encoder.named_parameters())
    assert sum(len(g["params"]) for g in groups) == len(named)
    for name, p in named.items():
        assert lr_of[id(p)] == pytest.approx(reference[reference_key(name)]), name
        assert decay_of[id(p)] == (0.01 if name in decay_names else 0.0), name
    # the head at the full rate, the top layer at decay^2, the embeddings at decay^14
    assert lr_of[id(named["classifier.weight"])] == pytest.approx(1e-4)
    assert lr_of[id(named[f"{family}.encoder.layer.11.output.dense.weight"])] == pytest.approx(1e-4 * 0.8**2)
    assert lr_of[id(named[f"{family}.embeddings.word_embeddings.weight"])] == pytest.approx(1e-4 * 0.8**14)


def test_sweep_on_conll_writes_both_statistics_and_resumes(model, tmp_path):
    train = conll_sample(tmp_path / "train.tsv", "train", 40)
    # a sentence whose entity starts with I-: read as B- (conlleval's rule), which the sweep must say, once
    train.write_text("fever\tO\nleukemia\tI-Disease\n\n" + train.read_text(encoding="utf-8"), encoding="utf-8")
    dev = conll_sample(tmp_path / "dev.tsv", "devel", 20)
    # the test set: dev with a typo in one sentence's type, a type training never saw, accepted with the flag
    sentences = dev.read_text(encoding="utf-8").split("\n\n")
    typo = next(i for i, sentence in enumerate(sentences) if "B-Disease" in sentence)
    sentences[typo] = sentences[typo].replace("-Disease", "-Diseases")
    test = tmp_path / "test.tsv"
    test.write_text("\n\n".join(sentences), encoding="utf-8")
    args = ["sweep", "--model", model, "--train", train, "--dev", dev, "--test", test, "--output-dir", tmp_path / "sweep",
            "--lrs", "1e-3,3e-3", "--seeds", "1,2", "--epochs", 1, "--batch-size", 16, "--gradient-accumulation", 1,
            "--max-length", 64, "--allow-unseen-types"]
    first = ner(*args)
    report = json.loads((tmp_path / "sweep" / "report.json").read_text())[0]
    assert report["runs"] == 4 and report["lrs"] == [1e-3, 3e-3] and report["seeds"] == [1, 2]
    metrics = [json.loads((tmp_path / "sweep" / f"lr={lr}" / f"seed={s}" / "metrics.json").read_text())
               for lr in ("0.001", "0.003") for s in (1, 2)]
    assert report["f1"]["mean"] == pytest.approx(sum(m["test"]["f1"] for m in metrics) / 4)
    assert report["dev_f1"]["mean"] == pytest.approx(sum(m["dev"]["f1"] for m in metrics) / 4)
    assert "dev F1 mean ± std" in first.stdout
    assert report["best_on_dev"]["lr"] in (1e-3, 3e-3) and report["best_on_dev"]["epoch"] == 1
    assert "median_over_seeds" in report and "± " in first.stdout and "best-on-dev test F1" in first.stdout
    assert (tmp_path / "sweep" / "dev_f1.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "sweep" / "lr=0.001" / "seed=1" / "predictions" / "dev" / "predictions.conll").is_file()
    # the default overlap of 128 is capped at half a window (64 sub-tokens, <s> and </s> aside): the card says what was used
    assert metrics[0]["window_overlap"] == 31
    # the grid shrunk on a rerun: nothing trains again, and the report holds the runs asked for, not all on disk
    again = ner(*[a if a != "1,2" else "2" for a in args])
    assert again.stdout.count("finished earlier, skipped") == 2, again.stdout
    shrunk = json.loads((tmp_path / "sweep" / "report.json").read_text())[0]
    assert shrunk["runs"] == 2 and shrunk["seeds"] == [2]
    card = (tmp_path / "sweep" / "lr=0.001" / "seed=1" / "model" / "README.md").read_text(encoding="utf-8")
    assert re.search(r"\| window overlap +\| +31 \|", card)
    second = ner(*args)
    assert second.stdout.count("finished earlier, skipped") == 4
    # the repaired I- tag: one warning line on stderr for the whole grid, and its count in every run's metrics.json
    warnings = [line for line in first.stderr.splitlines() if "warning:" in line]
    assert len(warnings) == 1 and str(train) in warnings[0] and "1 entity changed" in warnings[0] and "sentence 1: an I- tag" in warnings[0]
    m = json.loads((tmp_path / "sweep" / "lr=0.003" / "seed=2" / "metrics.json").read_text())
    assert m["data_problems"]["train"] == {"count": 1, "dropped": 0, "repaired": 1} and m["data_problems"]["dev"]["count"] == 0
    # per type, as seqeval's classification_report gives them
    assert m["test"]["scorer"] == "seqeval" and set(m["test"]["per_type"]["Disease"]) == {"precision", "recall", "f1", "support"}
    # the type training never saw: said once, recorded in every run, named by the report
    assert sum("never seen in training" in line for line in first.stderr.splitlines()) == 1
    assert m["unseen_types"] == {"test": ["Diseases"]} and m["test"]["per_type"]["Diseases"]["recall"] == 0
    assert "never seen in training: Diseases" in first.stdout and report["unseen_types"] == ["Diseases"]
    # predict given the sweep folder, not one of its runs: pointed to the best-on-dev run's model
    best = tmp_path / "sweep" / f"lr={report['best_on_dev']['lr']:g}" / f"seed={report['best_on_dev']['seed']}" / "model"
    proc = ner("predict", "--model", tmp_path / "sweep", "--input", dev, "--output-dir", tmp_path / "tagged", check=False)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert f"--model {tmp_path / 'sweep'}: a biofairseq-ner sweep folder" in proc.stderr and f"{best}" in proc.stderr
    assert (best / "config.json").is_file() and not (tmp_path / "tagged").exists()


# ---- scores as the official scorers count them, prediction on new notes, CRLF files, reports


def add_nested_mentions(folder):
    """Gold the BIO files cannot hold: inside each entity of 6 characters or more, a nested mention of its first 3."""
    added = 0
    for ann in sorted(folder.glob("*.ann")):
        lines = ann.read_text(encoding="utf-8").splitlines()
        for line in list(lines):
            if line.startswith("T"):
                kind, start, end = line.split("\t")[1].split(" ")
                if int(end) - int(start) >= 6:
                    mention = line.split("\t")[2][:3]
                    lines.append(f"T{900 + added}\t{'UNCLEAR' if kind != 'UNCLEAR' else 'PROTEINAS'} {start} {int(start) + 3}\t{mention}")
                    added += 1
        ann.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return added


def test_brat_scores_count_every_gold_mention_nested_ones_included(trained):
    out, _, test = trained
    m = json.loads((out / "metrics.json").read_text())
    official = official_score(test, out / "predictions" / "test")  # the gold folder holds nested mentions
    assert m["test"]["f1"] == pytest.approx(official["f1"], abs=1e-12)
    assert m["test"]["recall"] == pytest.approx(official["recall"], abs=1e-12)
    assert m["test"]["support"] == official["tp"] + official["fn"]
    assert m["test"]["seqeval"]["support"] < m["test"]["support"]  # the flattened BIO lost the nested ones
    table = ner("report", out).stdout
    assert f"{100 * m['test']['f1']:.2f} ± 0.00" in table and "seqeval on BIO" in table


def test_empty_and_blank_notes_get_empty_outputs_alone_or_in_a_folder(trained, tmp_path):
    """A note with no text, or only whitespace, has nothing to tag: no window at all (Trainer.predict then gave None,
    and predict ended in a TypeError)."""
    out, dev, _ = trained
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "empty.txt").write_text("")
    (notes / "blank.txt").write_text("  \n\n\t\n")
    real = sorted(dev.glob("*.txt"))[0]
    shutil.copy(real, notes)
    ner("predict", "--model", out, "--input", notes / "blank.txt", "--output-dir", tmp_path / "alone", "--max-length", 64)
    assert (tmp_path / "alone" / "predictions" / "blank.ann").read_text() == ""
    ner("predict", "--model", out, "--input", notes, "--output-dir", tmp_path / "folder", "--max-length", 64,
        "--window-overlap", 16)
    written = tmp_path / "folder" / "predictions"
    assert (written / "empty.ann").read_text() == (written / "blank.ann").read_text() == ""
    # the real note beside them is tagged as the run tagged it in its dev set
    assert (written / f"{real.stem}.ann").read_text() == (out / "predictions" / "dev" / f"{real.stem}.ann").read_text()


def test_predict_writes_brat_json_lines_and_conll_that_agree_and_load_in_the_tools_users_have(trained, tmp_path):
    """Every format at once (the default): the BRAT files read back through our own reader, pandas' read of the JSON
    lines and the CoNLL file's tags give the same entities, at the same character offsets, each JSON record's text the
    note's text there and a confidence in (0, 1]; annotation.conf names the model's types. --max-length left out is
    the run's own (metrics.json). --formats picks."""
    import pandas

    out, test, _ = trained  # the dev set: the test set has a type the model lacks
    proc = ner("predict", "--model", out, "--input", test, "--output-dir", tmp_path / "all", "--window-overlap", 16)
    assert "windows of 64 sub-tokens: its fine-tuning run's (metrics.json)" in proc.stdout
    written = tmp_path / "all" / "predictions"
    frame = pandas.read_json(written / "entities.jsonl", lines=True)
    assert list(frame.columns) == ["file", "start", "end", "type", "text", "score"] and len(frame) > 0
    assert frame["score"].between(0, 1, inclusive="right").all()
    texts = {f: (test / f).read_text(encoding="utf-8") for f in frame["file"].unique()}
    assert all(texts[r.file][r.start:r.end] == r.text for r in frame.itertuples())
    from_json = {(r.file[:-4], r.start, r.end, r.type) for r in frame.itertuples()}
    read_back = {(d.id, e.start, e.end, e.type) for d in brat.read_folder(written, []) for e in d.entities}
    assert read_back == from_json
    conf = (written / "annotation.conf").read_text().split("\n\n")[0].splitlines()
    assert conf[0] == "[entities]" and set(frame["type"]) <= set(conf[1:])
    columns = [line.split("\t") for line in (written / "predictions.conll").read_text(encoding="utf-8").splitlines()
               if line and not line.startswith("-DOCSTART-")]
    assert all(len(c) == 4 for c in columns)
    begun = {(int(c[1]), c[3][2:]) for c in columns if c[3].startswith("B-")}
    assert begun == {(r.start, r.type) for r in frame.itertuples()}  # each entity begins at its first token's offset
    ner("predict", "--model", out, "--input", test, "--output-dir", tmp_path / "json", "--formats", "jsonl")
    assert sorted(p.name for p in (tmp_path / "json" / "predictions").iterdir()) == ["entities.jsonl"]


def test_pre_annotations_round_trip_through_each_tool_format_as_training_data(trained, tmp_path):
    """The pre-annotation loop: predict writes doccano, Label Studio and Prodigy suggestions; each, accepted as it is
    (Label Studio's reviewer submits the suggestion: its result becomes the annotation), reads back as training data
    with the predicted entities at their offsets. Label Studio's suggestions carry the scores of entities.jsonl."""
    out, dev, _ = trained
    ner("predict", "--model", out, "--input", dev, "--output-dir", tmp_path / "p", "--window-overlap", 16,
        "--formats", "brat,jsonl,doccano,labelstudio,prodigy")
    written = tmp_path / "p" / "predictions"
    predicted = [json.loads(line) for line in (written / "entities.jsonl").read_text(encoding="utf-8").splitlines()]
    expected = {(r["file"][:-4], r["start"], r["end"], r["type"]) for r in predicted}
    assert expected
    tasks = json.loads((written / "labelstudio.json").read_text(encoding="utf-8"))
    scores = {(t["data"]["file"][:-4], r["value"]["start"], r["value"]["end"], r["value"]["labels"][0]): r["score"]
              for t in tasks for r in t["predictions"][0]["result"]}
    assert scores == {(r["file"][:-4], r["start"], r["end"], r["type"]): r["score"] for r in predicted}
    for task in tasks:  # what Label Studio exports once each suggestion is submitted unchanged
        task["annotations"] = [{"result": task.pop("predictions")[0]["result"], "was_cancelled": False}]
    (written / "labelstudio.json").write_text(json.dumps(tasks, ensure_ascii=False), encoding="utf-8")
    gold_texts = {d.id: d.text for d in data.read(dev).documents}
    for name in ("doccano.jsonl", "labelstudio.json", "prodigy.jsonl", "entities.jsonl"):
        back = training.read_annotated(written / name, "training", warn=lambda line: None)
        assert {(d.id, e.start, e.end, e.type) for d in back.documents for e in d.entities} == expected, name
        assert {d.id: d.text for d in back.documents} == gold_texts and not back.problems


def test_a_tools_export_trains_and_scores_as_its_brat_folders_do_to_the_digit(trained, model, tmp_path):
    """PharmaCoNER as Label Studio's export (biofairseq-ner convert --to labelstudio): training on it follows the BRAT
    run loss for loss, and the fine-tuned model scores the test set's export with BRAT's scores, every digit (nested
    mentions and a type training never saw included); metrics.json names the format read."""
    out, _, test = trained
    root = tmp_path / "brat"
    sets = {"train": brat_sample(root / "train", "train", 12), "dev": brat_sample(root / "dev", "valid", 3), "test": test}
    paths = {role: tmp_path / "labelstudio" / f"{role}.json" for role in sets}
    for role, folder in sets.items():
        ner("convert", folder, paths[role], "--to", "labelstudio")
    runs = {}
    for fmt, given in (("brat", sets), ("labelstudio", paths)):
        ner("train", "--model", model, *(f"--{role}={path}" for role, path in given.items() if role != "test"),
            "--output-dir", tmp_path / f"run-{fmt}", "--lr", 3e-3, "--epochs", 1, "--batch-size", 8,
            "--gradient-accumulation", 1, "--max-length", 64)
        runs[fmt] = json.loads((tmp_path / f"run-{fmt}" / "metrics.json").read_text())
        ner("predict", "--model", out, "--input", given["test"], "--output-dir", tmp_path / f"test-{fmt}",
            "--window-overlap", 16, "--formats", "jsonl", "--allow-unseen-types")
        runs[fmt]["scored"] = json.loads((tmp_path / f"test-{fmt}" / "metrics.json").read_text())["scores"]
    brat_run, tool_run = runs["brat"], runs["labelstudio"]
    assert tool_run["train_loss"] == brat_run["train_loss"] and tool_run["dev"] == brat_run["dev"]
    assert tool_run["scored"] == brat_run["scored"] and brat_run["scored"]["f1"] > 0
    assert (tool_run["data_read"]["train"]["format"], brat_run["data_read"]["train"]["format"]) == ("label-studio", "brat")


def test_predict_tags_plain_notes_and_a_partly_annotated_folder(trained, tmp_path):
    out, dev, _ = trained
    notes = tmp_path / "notes"
    notes.mkdir()
    docs = sorted(dev.glob("*.txt"))
    for txt in docs[:3]:
        shutil.copy(txt, notes)
    ner("predict", "--model", out, "--input", notes, "--output-dir", tmp_path / "tagged", "--max-length", 64)
    assert sorted(p.name for p in (tmp_path / "tagged" / "predictions").glob("*.ann")) == sorted(f"{t.stem}.ann" for t in docs[:3])
    assert "scores" not in json.loads((tmp_path / "tagged" / "metrics.json").read_text())
    # two of the three with their gold annotations
    for txt in docs[:2]:
        shutil.copy(txt.with_suffix(".ann"), notes)
    proc = ner("predict", "--model", out, "--input", notes, "--output-dir", tmp_path / "partly", "--max-length", 64)
    m = json.loads((tmp_path / "partly" / "metrics.json").read_text())
    gold_only = tmp_path / "gold"
    brat_sample(gold_only, "valid", 0)
    for txt in docs[:2]:
        shutil.copy(txt.with_suffix(".ann"), gold_only)
    assert m["scored_documents"] == 2
    assert m["scores"]["f1"] == pytest.approx(official_score(gold_only, tmp_path / "partly" / "predictions")["f1"], abs=1e-12)
    assert "annotated part of the input" in proc.stdout
    assert "fine-tuned with" not in proc.stderr  # the run's windows (sentences, 64 sub-tokens), as it learned
    # whole documents with a model fine-tuned on sentences: done as asked, and said
    proc = ner("predict", "--model", out, "--input", notes, "--output-dir", tmp_path / "documents", "--max-length", 64,
               "--context", "document")
    assert "was fine-tuned with --context sentence --max-length 64; it tags with --context document" in proc.stderr
    assert json.loads((tmp_path / "documents" / "metrics.json").read_text())["scored_documents"] == 2
    # the report reads training runs only: predict's folders beside them are skipped
    shutil.copytree(tmp_path / "partly", out.parent / "predicted_beside")
    try:
        assert "± 0.00" in ner("report", out.parent, "--output-dir", tmp_path / "report").stdout
    finally:
        shutil.rmtree(out.parent / "predicted_beside")


def test_a_run_without_a_recorded_best_epoch_is_reported(trained, tmp_path):
    out, *_ = trained
    run = tmp_path / "run"
    shutil.copytree(out, run, ignore=shutil.ignore_patterns("model", "tensorboard"))
    m = json.loads((run / "metrics.json").read_text())
    m["best"] = None  # e.g. trained with eval steps that never came
    (run / "metrics.json").write_text(json.dumps(m))
    table = ner("report", run).stdout
    assert "| -" in table.replace("  ", " ") or "|         - |" in table


@pytest.mark.fast
def test_crlf_brat_files_keep_their_offsets(tmp_path):
    lf, crlf = brat_sample(tmp_path / "lf", "valid", 4), tmp_path / "crlf"
    crlf.mkdir()
    for txt in sorted(lf.glob("*.txt")):
        text = txt.read_text(encoding="utf-8")
        assert "\n" in text
        shifted = lambda offset: offset + text[:offset].count("\n")
        (crlf / txt.name).write_bytes(text.replace("\n", "\r\n").encode("utf-8"))
        lines = []
        for line in txt.with_suffix(".ann").read_text(encoding="utf-8").splitlines():
            if line.startswith("T"):
                name, span, mention = line.split("\t")
                kind, start, end = span.split(" ")
                line = f"{name}\t{kind} {shifted(int(start))} {shifted(int(end))}\t{mention}"
            lines.append(line)
        (crlf / txt.with_suffix(".ann").name).write_bytes(("\r\n".join(lines) + "\r\n").encode("utf-8"))
    a, b = data.read(lf), data.read(crlf)
    assert not [m for kind, m in b.problems if kind == "misaligned"]
    assert [(s.tokens, s.tags) for s in a.sentences] == [(s.tokens, s.tags) for s in b.sentences]
    written = tmp_path / "written"
    entities = {d.id: [(e.start, e.end, e.type) for e in d.entities] for d in b.documents}
    brat.write_folder(written, b.documents, entities)
    assert official_score(crlf, written)["f1"] == 1.0
    for txt in crlf.glob("*.txt"):
        assert (written / txt.name).read_bytes() == txt.read_bytes()


@pytest.mark.fast
def test_warmup_ratio_one_warms_up_over_the_whole_run(model, tokenizer, tmp_path):
    from transformers import AutoModelForTokenClassification

    encoder = AutoModelForTokenClassification.from_pretrained(model, num_labels=3)
    options = training.TrainOptions(lr=1e-3, warmup_ratio=1.0, precision="fp32")
    trainer = training.make_trainer(encoder, tokenizer, options, tmp_path, [])
    trainer.create_optimizer()
    scheduler = trainer.create_scheduler(100)
    rates = []
    for _ in range(100):
        rates.append(scheduler.get_last_lr()[0])
        trainer.optimizer.step()
        scheduler.step()
    assert rates[10] == pytest.approx(1e-4) and rates[50] == pytest.approx(5e-4) and rates == sorted(rates)


def test_a_sweep_spread_over_devices_gives_the_runs_it_gives_one_after_another(model, tmp_path, capfd):
    """--devices 0,1: each run in a process of its own that sees one device (here the CPU: no GPU is visible), two at
    once; the same metrics and predictions as the runs one after another in this process."""
    train, dev = conll_sample(tmp_path / "train.tsv", "train", 30), conll_sample(tmp_path / "dev.tsv", "devel", 10)
    args = ["--model", model, "--train", train, "--dev", dev, "--lrs", "1e-3,3e-3", "--seeds", "1", "--epochs", 1,
            "--batch-size", 16, "--gradient-accumulation", 1, "--max-length", 64]
    ner("sweep", *args, "--output-dir", tmp_path / "one_by_one")
    spread = ner("sweep", *args, "--output-dir", tmp_path / "spread", "--devices", "0,1")
    assert "2 runs over 2 devices (0,1)" in spread.stdout
    workers = capfd.readouterr().err  # the runs' processes write to the real stderr
    assert "on device 0" in workers and "on device 1" in workers
    for lr in ("0.001", "0.003"):
        runs = [tmp_path / kind / f"lr={lr}" / "seed=1" for kind in ("one_by_one", "spread")]
        a, b = (json.loads((run / "metrics.json").read_text()) for run in runs)
        assert a["train_loss"] == b["train_loss"] and a["history"] == b["history"] and a["dev"] == b["dev"]
        predictions = [(run / "predictions" / "dev" / "predictions.conll").read_bytes() for run in runs]
        assert predictions[0] == predictions[1]
    bad = ner("sweep", *args, "--output-dir", tmp_path / "bad", "--devices", "0,0", check=False)
    assert bad.returncode == 2 and "give distinct GPU numbers separated by commas" in bad.stderr


def test_sweep_devices_are_places_in_the_gpus_an_allocation_gives(monkeypatch):
    """Slurm sets CUDA_VISIBLE_DEVICES to the allocation's GPUs (2,5 here): --devices 0,1 pins the runs to GPUs 2 and 5,
    not to the machine's 0 and 1, which may be another job's; a place beyond them is refused in one line."""
    from biofairseq.finetune import NERFormatError
    from biofairseq.finetune.sweep import _physical

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5")
    assert _physical(("0", "1")) == ("2", "5")
    with pytest.raises(NERFormatError, match=r"^--devices 0,2: 2 is not one of the 2 GPUs this process sees \(0 to 1\)"):
        _physical(("0", "2"))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert _physical(("0", "1")) == ("0", "1")  # no GPU here: the numbers as given


def test_a_sweep_redoes_the_runs_of_a_model_that_changed(model, tmp_path):
    from safetensors.torch import load_file, save_file

    copy = tmp_path / "model"
    shutil.copytree(model, copy)
    train = conll_sample(tmp_path / "train.tsv", "train", 20)
    dev = conll_sample(tmp_path / "dev.tsv", "devel", 10)
    args = ["sweep", "--model", copy, "--train", train, "--dev", dev, "--output-dir", tmp_path / "sweep", "--lrs", "1e-3",
            "--seeds", "1,2", "--epochs", 1, "--batch-size", 16, "--gradient-accumulation", 1, "--max-length", 64, "--no-save-model"]
    ner(*args)
    first = json.loads((tmp_path / "sweep" / "lr=0.001" / "seed=1" / "metrics.json").read_text())["model_sha256"]
    weights = load_file(copy / "model.safetensors")
    save_file({k: v + 0.01 if v.is_floating_point() else v for k, v in weights.items()}, copy / "model.safetensors")
    # seed 2 was interrupted: its folder holds the old model's checkpoints and no metrics.json
    unfinished = tmp_path / "sweep" / "lr=0.001" / "seed=2"
    (unfinished / "metrics.json").unlink()
    (unfinished / "checkpoints" / "checkpoint-1").mkdir(parents=True)
    proc = ner(*args)
    assert proc.stdout.count("finished with another model") == 1 and "started with another model" in proc.stdout
    for seed in (1, 2):
        m = json.loads((tmp_path / "sweep" / "lr=0.001" / f"seed={seed}" / "metrics.json").read_text())
        assert m["model_sha256"] == weights_sha256(copy) != first
    assert (tmp_path / "sweep" / "model.sha256").read_text().strip() == weights_sha256(copy)
    # a sweep of --no-save-model has no model to tag with: said, with the way to get one
    proc = ner("predict", "--model", tmp_path / "sweep", "--input", dev, "--output-dir", tmp_path / "tagged", check=False)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert "a biofairseq-ner sweep folder" in proc.stderr and "--no-save-model" in proc.stderr


# ---- what a new user meets: raw text, warnings, --help, reports, model cards, Hub ids, stray files, one-line errors


def test_predict_tags_a_single_txt_file_as_raw_text(trained, tmp_path):
    """A .txt file is text to tag (a CoNLL file is .conll, .tsv or .bio): its .ann is written beside a copy of it, as
    for a folder of notes."""
    out, dev, _ = trained
    note = tmp_path / "notes" / "notes.txt"
    note.parent.mkdir()
    shutil.copy(sorted(dev.glob("*.txt"))[0], note)
    proc = ner("predict", "--model", out, "--input", note, "--output-dir", tmp_path / "tagged", "--max-length", 64)
    written = tmp_path / "tagged" / "predictions"
    assert sorted(p.name for p in written.iterdir()) == ["annotation.conf", "entities.jsonl", "notes.ann", "notes.txt",
                                                          "predictions.conll"] and "warning" not in proc.stderr
    assert (written / "notes.txt").read_bytes() == note.read_bytes()
    assert {e.type for e in brat.read_folder(written, [])[0].entities} <= {"NORMALIZABLES", "NO_NORMALIZABLES", "PROTEINAS", "UNCLEAR"}
    assert "scores" not in json.loads((tmp_path / "tagged" / "metrics.json").read_text())


@pytest.mark.fast
def test_a_txt_file_is_one_brat_document_and_conll_files_are_conll(tmp_path):
    txt = next(t for t in sorted((PHARMACONER / "valid").glob("*.txt")) if "\nT" in "\n" + t.with_suffix(".ann").read_text(encoding="utf-8"))
    shutil.copy(txt, tmp_path / "note.txt")
    raw = data.read(tmp_path / "note.txt")
    assert raw.has_documents and not raw.annotated and [d.id for d in raw.documents] == ["note"]
    annotated = data.read(txt)  # its .ann beside it: gold
    assert annotated.annotated and annotated.types() and [d.id for d in annotated.documents] == [txt.stem]
    for suffix in (".conll", ".tsv", ".bio"):
        shutil.copy(NCBI / "devel.tsv", tmp_path / f"devel{suffix}")
        assert not data.read(tmp_path / f"devel{suffix}").has_documents
    with pytest.raises(NERFormatError, match="has no annotations .a CoNLL file\\? name it .conll, .tsv or .bio"):
        training.read_annotated(tmp_path / "note.txt", "training")


@pytest.mark.fast
def test_reading_problems_are_one_warning_line_with_the_count_and_the_first(tmp_path):
    said = []
    dataset = training.read_annotated(PHARMACONER_MISALIGNED, "training", said.append)
    assert len(said) == 1 and said[0].startswith(f"warning: training {PHARMACONER_MISALIGNED}: 8 entities changed")
    assert "5 misaligned (kept by their offsets), 3 trimmed" in said[0] and said[0].count("S0211-69952015000200015-1.ann:") == 3
    assert dataset.problem_counts() == {"count": 8, "dropped": 0, "misaligned": 5, "trimmed": 3}


def test_train_says_on_stderr_what_reading_dropped_and_records_it(trained):
    out, _, test = trained
    stderr = (out.parent / "train.stderr").read_text(encoding="utf-8")
    lines = [line for line in stderr.splitlines() if "warning:" in line]
    m = json.loads((out / "metrics.json").read_text())
    dropped = m["data_problems"]["test"]
    assert dropped["flattened"] > 5 and dropped["dropped"] == dropped["flattened"]  # the nested mentions the BIO tags cannot hold
    assert len(lines) == 1 and f"warning: test {test}: {dropped['count']} entities changed" in lines[0]
    assert m["data_problems"]["train"]["count"] == m["data_problems"]["dev"]["count"] == 0


@pytest.mark.fast
def test_help_shows_every_flags_default_and_every_flag_has_help():
    import argparse

    from biofairseq.finetune import cli

    parser = cli._parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert set(commands) == {"convert", "train", "sweep", "predict", "report"}
    for name, sub in commands.items():
        text = " ".join(sub.format_help().split())
        for action in sub._actions:
            assert action.help, f"{name} {action.dest}: no help"
            if action.option_strings and action.default not in (None, False, True, argparse.SUPPRESS):
                assert f"(default: {action.default})" in text, f"{name} {action.option_strings[0]}: default not shown"
    train = " ".join(commands["train"].format_help().split())
    for shown in ("--lr LR peak learning rate (linear decay to 0) (default: 5e-05)", "(default: 20)", "(default: 32)", "(default: 0.9,0.999)"):
        assert shown in train
    assert "(default: 8e-06,1e-05,2e-05,3e-05,5e-05)" in " ".join(commands["sweep"].format_help().split())


def copied_run(run, folder, lr):
    """A copy of a finished run's metrics.json (no model) as a run of learning rate ``lr``."""
    folder.mkdir(parents=True)
    m = json.loads((run / "metrics.json").read_text())
    m["options"]["lr"] = lr
    (folder / "metrics.json").write_text(json.dumps(m))


def test_report_groups_runs_by_the_value_of_their_learning_rate(trained, tmp_path):
    out, *_ = trained
    for i, lr in enumerate([1e-3, "1e-3", 0.1 * 0.01, "0.001"]):  # one setting, however written
        copied_run(out, tmp_path / "model" / f"run{i}", lr)
    copied_run(out, tmp_path / "model" / "other", 2e-3)
    ner("report", tmp_path / "model")
    report = json.loads((tmp_path / "model" / "report.json").read_text())[0]
    assert report["lrs"] == [1e-3, 2e-3] and report["runs"] == 5 and report["median_over_seeds"]["seeds"] in (1, 4)


def test_report_has_a_per_type_table_over_runs_with_its_scorer(trained, tmp_path):
    out, *_ = trained
    m = json.loads((out / "metrics.json").read_text())
    copied_run(out, tmp_path / "model" / "a", 3e-3)
    b = json.loads((out / "metrics.json").read_text())
    kind = sorted(b["test"]["per_type"])[0]
    b["test"]["per_type"][kind]["f1"] = m["test"]["per_type"][kind]["f1"] + 0.1  # a second run, 10 points better on one type
    (tmp_path / "model" / "b").mkdir()
    (tmp_path / "model" / "b" / "metrics.json").write_text(json.dumps(b))
    ner("report", tmp_path / "model")
    text = (tmp_path / "model" / "report.md").read_text()
    assert "Per entity type, test set" in text and "scorer: brat" in text and "official scorers" in text
    f1 = m["test"]["per_type"][kind]["f1"]
    row = next(line for line in text.splitlines() if [cell.strip() for cell in line.split("|")][2:3] == [kind])
    assert f"{100 * (f1 + 0.05):.2f} ± {100 * 0.1 / 2 ** 0.5:.2f}" in row and f"{m['test']['per_type'][kind]['support']:,}" in row
    summary = json.loads((tmp_path / "model" / "report.json").read_text())[0]
    assert summary["scorer"] == "brat" and set(summary["per_type"]) == set(m["test"]["per_type"])


@pytest.mark.fast
def test_the_dev_f1_plot_says_its_unit_and_has_a_title():
    from biofairseq.finetune import sweep_report

    fig, axes = sweep_report.figure(1)
    runs = [{"lr": 1e-3, "history": [{"epoch": 1, "f1": 0.5}, {"epoch": 2, "f1": 0.6}]}]
    sweep_report.plot_dev_f1(axes[0], "NER dev F1", {"model": runs})
    assert "(%)" in axes[0].get_ylabel() and axes[0].get_title()
    assert [line.get_ydata().tolist() for line in axes[0].get_lines()] == [[50.0, 60.0]]
    import matplotlib.pyplot as plt

    plt.close(fig)


@pytest.mark.fast
def test_write_model_card_writes_hub_metadata_that_huggingface_hub_reads(tmp_path):
    from huggingface_hub import ModelCard

    from biofairseq.model_card import read_metadata, write_model_card

    metadata = {"language": "es", "license": "apache-2.0", "tags": ["fill-mask"], "base_model": None, "datasets": [],
                "model-index": [{"name": "m", "results": [{"task": {"type": "fill-mask"}, "dataset": {"type": "scielo", "name": "SciELO"},
                                                           "metrics": [{"type": "perplexity", "value": 3.5}]}]}]}
    path = write_model_card(tmp_path, metadata, "# m\n\nPretrained on SciELO.")
    assert path == tmp_path / "README.md" and sorted(p.name for p in tmp_path.iterdir()) == ["README.md"]  # no temporary left
    card = ModelCard.load(path)
    assert card.data.language == "es" and card.data.license == "apache-2.0" and card.data.base_model is None
    assert card.data.eval_results[0].metric_value == 3.5 and "Pretrained on SciELO." in card.text
    assert read_metadata(tmp_path)["language"] == "es" and read_metadata(tmp_path / "none") == {}


def test_train_writes_a_model_card_with_the_runs_figures(trained):
    from huggingface_hub import ModelCard

    out, *_ = trained
    m = json.loads((out / "metrics.json").read_text())
    card = ModelCard.load(out / "model" / "README.md")
    data = card.data
    assert data.language == "es" and data.license == "apache-2.0"  # the base model's card's
    assert {"token-classification", "ner"} <= set(data.tags) and data.pipeline_tag == "token-classification"
    assert data.datasets == ["PlanTL-GOB-ES/pharmaconer"] and data.base_model is None  # a local folder, not a Hub id
    results = {(r.dataset_split, r.metric_type): r.metric_value for r in data.eval_results}
    assert results[("test", "f1")] == pytest.approx(m["test"]["f1"], abs=1e-4) and results[("dev", "recall")] == pytest.approx(m["dev"]["recall"], abs=1e-4)
    text = card.text
    assert "official definition" in text and "learning rate | 0.003" in " ".join(text.split()) and "| seed " in text
    assert card.data.model_name == "tiny0-ner-pharmaconer"
    for kind, v in m["test"]["per_type"].items():
        assert f"| {kind} " in text and f"{100 * v['f1']:.2f}" in text


@pytest.mark.fast
@pytest.mark.parametrize("given, message", [
    ("PlanTL-GOB-ES/bsc-bio-es", "--model PlanTL-GOB-ES/bsc-bio-es: not a local folder, and the Hub cannot be reached (HF_HUB_OFFLINE is set)"),
    ("./hf/my-model", "--model ./hf/my-model: no such folder"),
    ("runs/ner/pharmaconer/model", "--model runs/ner/pharmaconer/model: no such folder"),
    ("EMPTY", "without config.json, not a model"),
    ("EMPTY/checkpoint_best.pt", "a file, not a model folder (a fairseq checkpoint: biofairseq-convert to-hf"),
])
def test_model_is_a_folder_or_a_hub_id_and_offline_fails_in_one_line(given, message, tmp_path, monkeypatch):
    (tmp_path / "EMPTY").mkdir()
    (tmp_path / "EMPTY" / "checkpoint_best.pt").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    proc = ner("train", "--model", given, "--train", PHARMACONER / "train", "--dev", PHARMACONER / "valid",
               "--output-dir", "out/run", check=False)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and message in proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.fast
def test_brat_folders_with_stray_files_are_read_and_wrong_inputs_refused(tmp_path):
    clean = brat_sample(tmp_path / "clean", "valid", 3)
    stray = tmp_path / "stray"
    shutil.copytree(clean, stray)
    (stray / "README.md").write_text("PharmaCoNER excerpt\n")
    (stray / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1\x00\xff")
    (stray / "meta.json").write_text("{}")
    first = sorted(clean.glob("*.txt"))[0].name
    (stray / f"._{first}").write_bytes(b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X\xff\xfe")  # macOS's AppleDouble copy
    (stray / ".ipynb_checkpoints").mkdir()
    shutil.copy(clean / first, stray / ".ipynb_checkpoints" / first.replace(".txt", "-checkpoint.txt"))
    a, b = data.read(clean), data.read(stray)
    assert [(s.tokens, s.tags) for s in a.sentences] == [(s.tokens, s.tags) for s in b.sentences] and b.annotated
    assert sorted(p.name for p in b.ignored) == sorted([".DS_Store", "README.md", "meta.json", f"._{first}", first.replace(".txt", "-checkpoint.txt")])
    assert [line.split(":")[0] for line in b.warnings("training")] == ["note"]
    # refused, in one line naming the path and the fix
    (tmp_path / "empty").mkdir()
    (tmp_path / "data.json").write_text("{}")
    (tmp_path / "data.xml").write_text("<doc/>")
    ann = tmp_path / "alone" / "x.ann"
    ann.parent.mkdir()
    ann.write_text("T1\tX 0 1\ta\n")
    shutil.copy(ann, tmp_path / "x.ann")
    (tmp_path / "splits").mkdir()
    for split in ("train", "test"):
        shutil.copytree(clean, tmp_path / "splits" / split)
    for path, named, message in [
        (tmp_path / "empty", tmp_path / "empty", "no .txt files (it is empty)"),
        (tmp_path / "data.xml", tmp_path / "data.xml", "not NER data (.xml); give a BRAT folder"),
        (tmp_path / "data.json", tmp_path / "data.json", "its records are none of the JSON read here (the first has no keys); give span JSON"),
        (tmp_path / "x.ann", tmp_path / "x.ann", "a BRAT annotation file alone; give its text x.txt"),
        (ann.parent, ann, "BRAT file without its .txt"),
        (tmp_path / "splits", tmp_path / "splits", "holds the splits train/, test/ of a data set; give one of them"),
    ]:
        with pytest.raises(NERFormatError, match="^" + re.escape(f"{named}: {message}")):
            data.read(path)


@pytest.mark.fast
def test_a_folder_made_for_a_run_is_removed_when_it_fails_before_a_checkpoint(tmp_path):
    with pytest.raises(KeyError):
        with training.created_folder(tmp_path / "runs" / "a" / "seed=1"):
            raise KeyError
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(KeyError):
        with training.created_folder(tmp_path / "resumable", keep=lambda: True):
            raise KeyError
    assert (tmp_path / "resumable").is_dir()


USER_MISTAKES = [  # (arguments, exit status, a fragment of the one line on stderr); {d}: the data, {o}: the output, {m}: the model
    (["train", "--train", "{d}/train", "--dev", "{d}/valid", "--output-dir", "{o}"], 2, "the following arguments are required: --model; see biofairseq-ner train --help"),
    (["train", "--model", "{m}", "--train", "{d}/train", "--dev", "{d}/valid", "--output-dir", "{o}", "--lr", "abc"], 2, "argument --lr: invalid float value: 'abc'"),
    (["sweep", "--model", "{m}", "--train", "{d}/train", "--dev", "{d}/valid", "--output-dir", "{o}", "--lrs", "1e-3,x"], 2, "'x' in '1e-3,x' is not a number"),
    (["sweep", "--model", "{m}", "--train", "{d}/train", "--dev", "{d}/valid", "--output-dir", "{o}", "--lrs", "1e-3,-1e-3"], 1, "--lr -0.001: must be a positive learning rate"),
    (["train", "--model", "{m}", "--train", "{d}/train", "--dev", "{d}/valid", "--output-dir", "{o}", "--adam-betas", "0.9"], 1, "--adam-betas 0.9: must be two values"),
    (["train", "--model", "{m}", "--train", "{d}/train", "--dev", "{d}/valid", "--output-dir", "{o}", "--epochs", "0"], 1, "--epochs 0: must be a positive number"),
    (["train", "--model", "{m}", "--train", "{d}/train", "--dev", "{d}/valid", "--output-dir", "{o}", "--warmup-ratio", "10"], 1, "--warmup-ratio 10: must be a share"),
    (["train", "--model", "{m}", "--train", "{d}", "--dev", "{d}/valid", "--output-dir", "{o}"], 1, "holds the splits train/, valid/, test/ of a data set; give one of them"),
    (["train", "--model", "{m}", "--train", "{d}/trian", "--dev", "{d}/valid", "--output-dir", "{o}"], 1, "trian: no such file or folder"),
    (["train", "--model", "{m}", "--train", "{d}/LICENSE", "--dev", "{d}/valid", "--output-dir", "{o}"], 1, "LICENSE: not NER data (no suffix)"),
    (["train", "--model", "{m}", "--train", "{d}/train/S0004-06142005000900013-1.ann", "--dev", "{d}/valid", "--output-dir", "{o}"], 1, "a BRAT annotation file alone"),
    (["train", "--model", "{m}", "--train", "{d}/train", "--dev", "{d}/valid", "--output-dir", "{d}/LICENSE"], 1, "LICENSE: a file; give a folder"),
    (["predict", "--model", "{m}", "--input", "{d}/valid", "--output-dir", "{o}"], 1, "are not BIO tags, so it is not a fine-tuned NER model"),
    (["predict", "--model", "{m}", "--input", "{d}/valid", "--output-dir", "{d}"], 1, "already exists; choose another or pass --overwrite"),
    (["report", "{o}"], 1, "no finished run"),
    (["convert", "{d}/valid", "{o}.txt"], 1, "name a CoNLL output .conll, .tsv or .bio"),
]


@pytest.mark.fast
@pytest.mark.parametrize("command", ["train", "sweep"])
@pytest.mark.parametrize("split", ["dev", "test"])
def test_a_type_training_never_saw_stops_train_and_sweep_in_one_line(command, split, model, tmp_path):
    """A dev or test type that training lacks (a typo, another data set's types) would be a label the model never
    learns, scored 0: it stops before any training, naming the file, the types and the flag that accepts it."""
    train = conll_sample(tmp_path / "train.tsv", "train", 20)
    dev = conll_sample(tmp_path / "dev.tsv", "devel", 20)
    typo = tmp_path / f"{split}_typo.tsv"
    typo.write_text(dev.read_text(encoding="utf-8").replace("-Disease", "-Diseases"), encoding="utf-8")
    paths = {"dev": dev, "test": dev, split: typo}
    out = tmp_path / "out"
    proc = ner(command, "--model", model, "--train", train, "--dev", paths["dev"], "--test", paths["test"], "--output-dir",
               out, check=False)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    for said in (f"{typo}: {split} entity types never seen in training: Diseases", f"{train} has Disease",
                 "--allow-unseen-types"):
        assert said in proc.stderr, proc.stderr
    assert not out.exists()


@pytest.mark.fast
def test_a_recipe_passes_allow_unseen_types_through_ner_extra():
    from biofairseq.recipe.table import kind_of

    assert kind_of("bsc_bio_es", "NER_EXTRA")("--allow-unseen-types") is None


@pytest.mark.fast
@pytest.mark.parametrize("args, status, message", USER_MISTAKES, ids=lambda v: " ".join(v)[:60] if isinstance(v, list) else None)
def test_user_mistakes_are_one_line_and_leave_nothing_behind(args, status, message, model, tmp_path):
    out = tmp_path / "out"
    proc = ner(*[a.format(d=PHARMACONER, o=out, m=model) for a in args], check=False)
    assert proc.returncode == status and proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr
    assert not out.exists() and not out.with_suffix(".txt").exists()


@pytest.mark.fast
def test_document_context_joins_each_documents_sentences_and_writes_back_the_same_entities(tmp_path):
    """--context document: one sequence per BRAT document, windows across its sentences; the gold tags written back
    through the joined sequences give every gold entity of the .ann files that the sentences give."""
    dataset = data.read(PHARMACONER / "valid")
    joined = data.by_document(dataset, PHARMACONER / "valid")
    assert [s.doc for s in joined.sentences] == [d.id for d in dataset.documents]
    assert sum(len(s.tokens) for s in joined.sentences) == sum(len(s.tokens) for s in dataset.sentences)
    assert len(joined.sentences) < len(dataset.sentences)
    _, gold, lost = brat_round_trip(PHARMACONER / "valid", tmp_path / "sentences")
    entities = defaultdict(list)
    for sentence in joined.sentences:
        entities[sentence.doc] += data.entity_offsets(sentence, sentence.tags)
    brat.write_folder(tmp_path / "documents", joined.documents, entities)
    written = gold_triples(brat.read_folder(tmp_path / "documents", []))
    assert {(doc, t) for doc in gold for t in gold[doc] ^ written[doc]} == lost
    with pytest.raises(NERFormatError, match="--context document needs BRAT documents"):
        data.by_document(data.read(NCBI / "devel.tsv"), NCBI / "devel.tsv")
