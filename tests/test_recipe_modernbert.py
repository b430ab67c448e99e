"""recipes/modernbert.sh as a team holding ModernBERT weights runs it: INIT_FROM a transformers ModernBERT folder
laid out as answerdotai's (special tokens after the vocabulary), continual pretraining on packed rows in two length
phases (128, then 512 tokens: past the 128-token window), conversion with parity, and NER with transformers'
ModernBertForTokenClassification, on the slice of the bundled sample that test_recipe.py uses."""

import json

import pytest

from test_modernbert import LOCAL_WINDOW, relaid_as_modernbert
from test_recipe import REPO, commands, recipe, sample  # noqa: F401  (sample: the module fixture)

MODERNBERT = REPO / "recipes" / "modernbert.sh"


def value(command, flag):
    return command[command.index(flag) + 1]


@pytest.fixture(scope="module")
def init_from(bytebpe_corpus, tmp_path_factory):
    """A randomly initialised bio_modernbert_tiny, converted to transformers and relaid as answerdotai's ModernBERT."""
    import torch

    from biofairseq.checkpoints import load_dictionary, new_model, save
    from biofairseq.convert.cli import main as convert

    root = tmp_path_factory.mktemp("init")
    model, cfg = new_model(["--arch", "bio_modernbert_tiny"], bytebpe_corpus.data_bin,
                           load_dictionary(bytebpe_corpus.data_bin / "dict.txt"))
    torch.manual_seed(0)
    save(root / "model.pt", model, cfg)
    assert convert(["to-hf", str(root / "model.pt"), str(root / "hf")]) == 0
    relaid_as_modernbert(root / "hf", root / "ModernBERT-tiny")
    return root / "ModernBERT-tiny"


@pytest.fixture(scope="module")
def modernbert(sample, init_from, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("modernbert") / "tiny"
    # 10 updates: 8 at 128 tokens (batch 8), then 2 at 512 (batch 4); one NER run of one epoch; 100 new tokens
    # on ModernBERT's own layout of ids (renumbered by from-hf)
    return run_dir, recipe(run_dir, script=MODERNBERT, served=True, **{
        "VOCAB_EXTEND": "100",
        **{k: v for k, v in sample.items() if k != "VOCAB_SIZE"},  # continuing: no vocabulary learned (a size is refused)
        "INIT_FROM": str(init_from), "MAX_UPDATE": "10", "WARMUP_UPDATES": "2", "SEQUENCES_PER_UPDATE": "8",
        "BATCH_PER_DEVICE": "8", "PHASE2_SHARE": "0.2", "PHASE2_SEQUENCES_PER_UPDATE": "4", "PHASE2_BATCH_PER_DEVICE": "4",
        "SAVE_INTERVAL_UPDATES": "5", "LOG_INTERVAL": "2", "NER_SEEDS": "1", "BASELINE": "none"})


def test_continual_pretraining_from_a_modernbert_folder_on_packed_rows_in_two_lengths(modernbert, init_from):
    run_dir, proc = modernbert
    printed = commands(proc.stderr)
    assert [c[1] for c in printed if c[0] == "biofairseq-convert"] == ["from-hf", "extend-vocab", "to-hf"]
    init = json.loads((run_dir / "init" / "conversion.json").read_text())
    assert init["transformers_class"] == "ModernBertForMaskedLM" and any("renumbered" in n for n in init["notes"])
    phase1, phase2 = [c for c in printed if c[0] == "biofairseq-train"]
    for c in (phase1, phase2):
        assert value(c, "--arch") == "bio_modernbert_tiny" and value(c, "--mask-prob") == "0.3"
        assert "--pack-documents" in c and "--attention" not in c  # unpadded rows; ModernBERT's attention is SDPA
        assert value(c, "--optimizer") == "fused_adamw" and value(c, "--weight-decay") == "1e-5"
    assert value(phase1, "--finetune-from-model") == str(run_dir / "init_extended" / "model.pt")
    assert (value(phase1, "--tokens-per-sample"), value(phase2, "--tokens-per-sample")) == ("128", "512")
    # the data-bin was binarized with ModernBERT's vocabulary, renumbered (the mask token is fairseq's <mask>), and
    # extended: the old symbols in their places, the 100 new ones after them
    from biofairseq.corpus.vocab import read_dict

    symbols, old = read_dict(run_dir / "data-bin" / "dict.txt")[0], read_dict(run_dir / "init" / "dict.txt")[0]
    assert old[-1] == "<mask>" and symbols == read_dict(run_dir / "init_extended" / "dict.txt")[0]
    assert symbols[:len(old)] == old and len(symbols) == len(old) + 100
    assert not [c for c in printed if c[1:2] and c[1].endswith("train_vocab.py")]  # no vocabulary learned
    assert "Continual pretraining: the weights and the vocabulary are those of `INIT_FROM=" in proc.stdout


def test_the_model_converts_with_parity_past_the_window_and_fine_tunes_as_modernbert(modernbert):
    run_dir, proc = modernbert
    conversion = json.loads((run_dir / "hf" / "modernbert" / "conversion.json").read_text())
    parity = conversion["parity"]
    assert conversion["transformers_class"] == "ModernBertForMaskedLM" and parity["batch_shape"][1] > LOCAL_WINDOW
    assert parity["ids_identical"] and max(parity["max_abs_diff_logits"], parity["max_abs_diff_hidden"]) < 1e-4
    # the extended tokenizer, offline, encodes the validation text as the data-bin holds it, new tokens included
    from fairseq.data import data_utils
    from transformers import AutoTokenizer

    from biofairseq.checkpoints import load_dictionary

    tokenizer = AutoTokenizer.from_pretrained(run_dir / "hf" / "modernbert")
    dictionary = load_dictionary(run_dir / "data-bin" / "dict.txt")
    assert len(tokenizer) == len(dictionary)
    data = data_utils.load_indexed_dataset(str(run_dir / "data-bin" / "valid"), dictionary)
    lines = (run_dir / "clean" / "valid.txt").read_text().splitlines()  # a blank line (a document's end): </s> alone
    ids = [tokenizer(line, add_special_tokens=False)["input_ids"] + [dictionary.eos()] for line in lines]
    assert [data[k].tolist() for k in range(len(data))] == ids
    assert sum(i >= len(dictionary) - 100 for line in ids for i in line) > 0
    run = next((run_dir / "ner" / "pharmaconer" / "model=modernbert").glob("lr=*/seed=*/metrics.json"))
    assert json.loads(run.read_text())["train_loss"] > 0
    tagger = json.loads((run.parent / "model" / "config.json").read_text())
    assert tagger["architectures"] == ["ModernBertForTokenClassification"]
    report = json.loads((run_dir / "report.json").read_text())
    assert report["pretraining"]["arch"] == "bio_modernbert_tiny"


def test_ner_windows_compares_windowings_on_dev_and_resumes(modernbert, tmp_path):
    """benchmarks/ner_windows.py on the recipe's model: document windows of 128 and whole documents, one seed, one
    epoch, on a few BRAT documents; a second run keeps the finished runs; a wrong --batches stops it."""
    import os
    import shutil
    import sys

    import command_server
    import inprocess

    from biofairseq.dev.samples import PHARMACONER

    run_dir, _ = modernbert
    data = tmp_path / "pharmaconer"
    for split, count in (("train", 3), ("valid", 2)):
        (data / split).mkdir(parents=True)
        for text in sorted((PHARMACONER / split).glob("*.txt"))[:count]:
            for part in (text, text.with_suffix(".ann")):
                shutil.copy(part, data / split)
    windows = [sys.executable, str(REPO / "benchmarks" / "ner_windows.py"), "--model", str(run_dir / "hf" / "modernbert"),
               "--data", str(data), "--work", str(tmp_path / "work"), "--seeds", "1", "--epochs", "1",
               "--only", "windows of 128,whole", "--batches", "whole=1"]
    # the benchmark is a process, its fine-tuning runs ($PYTHON -m biofairseq.finetune.cli train) are served here
    first = command_server.completed(windows, dict(os.environ), cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    rows = {line.split("|")[1].strip(): line.split("|") for line in first.stdout.splitlines() if line.startswith("| ")}
    assert set(rows) == {"windowing", "documents, windows of 128", "whole documents (up to 8,192)"}
    assert rows["whole documents (up to 8,192)"][2].strip() == "1" and float(rows["documents, windows of 128"][5].strip(" *")) >= 0
    finished = sorted((tmp_path / "work").glob("*/seed1/metrics.json"))
    assert [m.parent.parent.name for m in finished] == ["document-128-batch23", "document-8192-batch1"]
    stamps = [m.stat().st_mtime_ns for m in finished]
    again = command_server.completed(windows, dict(os.environ), cwd=tmp_path)
    assert again.returncode == 0 and [m.stat().st_mtime_ns for m in finished] == stamps
    wrong = inprocess.run(*windows[:-2], "--batches", "windows=4", cwd=tmp_path, check=False)  # stops before any run
    assert wrong.returncode == 1 and "--batches 'windows=4': give WORDS=BATCH" in wrong.stderr
