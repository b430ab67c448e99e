"""recipes/biomegatron.sh on the same slice of the bundled sample as test_recipe.py: two SentencePiece vocabularies
and their break-out table, one pre-LN encoder per vocabulary, each fine-tuned with whole-word and with sub-token
labelling, one report; then continual pretraining from one of those models (INIT_FROM=) without NER."""

import json

import pytest

from test_recipe import REPO, commands, recipe, sample  # noqa: F401  (sample: the module fixture)

BIOMEGATRON = REPO / "recipes" / "biomegatron.sh"
TINY = {"MAX_UPDATE": "6", "WARMUP_UPDATES": "1", "SEQUENCES_PER_UPDATE": "8", "BATCH_PER_DEVICE": "8",
        "SAVE_INTERVAL_UPDATES": "6", "LOG_INTERVAL": "3", "NER_SEEDS": "1", "BASELINE": "none"}


def value(command, flag):
    return command[command.index(flag) + 1]


@pytest.fixture(scope="module")
def study(sample, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("biomegatron") / "tiny"
    mine = {name: value for name, value in sample.items() if name != "VOCAB_SIZE"}  # this recipe's is VOCAB_SIZES
    return run_dir, recipe(run_dir, script=BIOMEGATRON, **{**mine, **TINY, "VOCAB_SIZES": "1000,2000"})


def test_each_vocabulary_is_learned_binarized_and_pretrained_pre_ln(study):
    run_dir, proc = study
    printed = commands(proc.stderr)
    vocabularies = [c for c in printed if c[1:2] and c[1].endswith("train_vocab.py")]
    assert [(value(c, "--type"), value(c, "--vocab-size")) for c in vocabularies] == [("sentencepiece", "1000"), ("sentencepiece", "2000")]
    trains = [c for c in printed if c[0] == "biofairseq-train"]
    assert [c[1] for c in trains] == [str(run_dir / "data-bin" / n) for n in ("bio_1k", "bio_2k")]
    assert {value(c, "--arch") for c in trains} == {"bio_megatron_tiny"}
    for name in ("bio_1k", "bio_2k"):
        conversion = json.loads((run_dir / "hf" / name / "conversion.json").read_text())
        assert conversion["transformers_class"] == "XLMRobertaXLForMaskedLM" and conversion["parity"]["ids_identical"]
        assert json.loads((run_dir / "hf" / name / "config.json").read_text())["vocab_size"] == int(name[4]) * 1000


def test_the_report_has_the_break_out_table_and_both_labellings(study):
    run_dir, proc = study
    report = json.loads((run_dir / "report.json").read_text())
    assert list(report["data_bins"]) == ["bio_1k", "bio_2k"] and report["data_bins"]["bio_2k"]["dictionary"] == 2000
    rates = report["breakout"]["pharmaconer"]
    # the larger vocabulary breaks entities and text into fewer pieces
    assert rates["all mentions"]["bio_2k"] < rates["all mentions"]["bio_1k"] and rates["all text"]["bio_2k"] < rates["all text"]["bio_1k"]
    assert rates["all mentions"]["mentions"] == sum(r["mentions"] for k, r in rates.items() if k not in ("all mentions", "all text"))
    assert "Entity break-out rate on pharmaconer" in proc.stdout and "| bio_1k | bio_2k |" in proc.stdout
    sweeps = [c for c in commands(proc.stderr) if c[0] == "biofairseq-ner"]
    assert [(value(c, "--model").rsplit("/", 1)[1], value(c, "--label-scheme")) for c in sweeps] == [
        ("bio_1k", "first-subtoken"), ("bio_1k", "all-subtokens"), ("bio_2k", "first-subtoken"), ("bio_2k", "all-subtokens")]
    models = [s["model"] for s in report["ner"]["pharmaconer"]]
    assert models == [f"model={m},labels={l}" for m in ("bio_1k", "bio_2k") for l in ("whole-word", "sub-token")]
    table = proc.stdout[proc.stdout.index("| model        |  whole-word"):]
    assert "| model=bio_1k |" in table and "| model=bio_2k |" in table
    assert list(report["pretrainings"]) == ["bio_1k", "bio_2k"]


def test_continual_pretraining_keeps_the_models_vocabulary_and_weights(study, sample, tmp_path):
    """From a fairseq checkpoint: converted to transformers, then back (the path a transformers folder takes too)."""
    run_dir, _ = study
    start = run_dir / "pretrain" / "bio_1k" / "checkpoints" / "checkpoint_last.pt"
    continued = tmp_path / "continued"
    proc = recipe(continued, script=BIOMEGATRON, **{**TINY, "SOURCES": sample["SOURCES"], "VALID_DOCS": "10",
                                                     "NER_DATA": "", "MAX_UPDATE": "3", "INIT_FROM": str(start)})
    printed = commands(proc.stderr)
    conversions = [c for c in printed if c[0] == "biofairseq-convert"]
    assert [c[1] for c in conversions] == ["to-hf", "from-hf", "to-hf"]  # the start, back, and the continued model
    assert conversions[0][2] == str(start) and conversions[1][2] == str(continued / "init.hf")
    assert not (continued / "init.hf").exists()  # the intermediate transformers copy is not kept
    assert not [c for c in printed if c[1:2] and c[1].endswith("train_vocab.py")]  # no vocabulary learned
    train = next(c for c in printed if c[0] == "biofairseq-train")
    assert value(train, "--finetune-from-model") == str(continued / "init" / "model.pt")
    assert value(train, "--arch") == "bio_megatron_tiny"  # the shape read back from the transformers model
    # its vocabulary: the data-bin's entries are the model's, in its order
    symbols = lambda path: [line.split()[0] for line in path.read_text(encoding="utf-8").splitlines()]
    assert symbols(continued / "data-bin" / "dict.txt") == symbols(run_dir / "data-bin" / "bio_1k" / "dict.txt")
    # from the model's weights: the first logged perplexity is far below a fresh model's
    from biofairseq.recipe.best_checkpoint import records

    fresh = records(run_dir / "pretrain" / "bio_1k" / "train.log", "train_inner")[0]
    first = records(continued / "pretrain" / "continued" / "train.log", "train_inner")[0]
    assert float(first["ppl"]) < 0.8 * float(fresh["ppl"])
    assert "Continual pretraining: the weights and the vocabulary are those of `INIT_FROM=" in proc.stdout

