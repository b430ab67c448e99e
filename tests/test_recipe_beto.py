"""recipes/beto.sh on the same slice of the bundled sample as test_recipe.py: a cased SentencePiece vocabulary,
whole-word masking, two length phases. Run with the pre-LN tiny shape (ARCH=bio_megatron_tiny), so that it is
also the test of a pre-LN model trained on SentencePiece data with whole-word masking and converted with parity.
Without NER data (NER_DATA=): pre-LN models of this shape are fine-tuned in test_recipe_biomegatron.py."""

import json

import pytest

from test_recipe import REPO, commands, recipe, sample  # noqa: F401  (sample: the module fixture)

BETO = REPO / "recipes" / "beto.sh"


def value(command, flag):
    return command[command.index(flag) + 1]


@pytest.fixture(scope="module")
def beto(sample, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("beto") / "tiny"
    # 10 updates: 8 at 128 tokens (batch 8), then 2 at 512 (batch 4)
    return run_dir, recipe(run_dir, script=BETO, **{**sample, "ARCH": "bio_megatron_tiny", "MAX_UPDATE": "10",
                                                     "WARMUP_UPDATES": "2", "SEQUENCES_PER_UPDATE": "8", "BATCH_PER_DEVICE": "8",
                                                     "PHASE2_SHARE": "0.2", "PHASE2_SEQUENCES_PER_UPDATE": "4",
                                                     "PHASE2_BATCH_PER_DEVICE": "4", "SAVE_INTERVAL_UPDATES": "5",
                                                     "LOG_INTERVAL": "2", "NER_DATA": "", "BASELINE": "none"})


def test_sentencepiece_whole_word_masking_in_two_length_phases(beto):
    run_dir, proc = beto
    printed = commands(proc.stderr)
    vocabulary = next(c for c in printed if c[1:2] and c[1].endswith("train_vocab.py"))
    assert value(vocabulary, "--type") == "sentencepiece"
    assert json.loads((run_dir / "data-bin" / "vocab_info.json").read_text())["normalization"] == "identity"  # cased
    phase1, phase2 = [c for c in printed if c[0] == "biofairseq-train"]
    for c in (phase1, phase2):
        assert "--mask-whole-words" in c and value(c, "--arch") == "bio_megatron_tiny" and value(c, "--total-num-update") == "10"
        assert value(c, "--optimizer") == "adamw" and value(c, "--weight-decay-exclude") == "norm_and_bias"  # BERT's
    assert (value(phase1, "--tokens-per-sample"), value(phase1, "--max-update"), value(phase1, "--batch-size")) == ("128", "8", "8")
    assert (value(phase2, "--tokens-per-sample"), value(phase2, "--max-update"), value(phase2, "--batch-size")) == ("512", "10", "4")
    assert "--reset-dataloader" in phase2 and "--reset-dataloader" not in phase1
    log = (run_dir / "pretrain" / "train.log").read_text()
    assert "'mask_whole_words': True" in log  # the task fairseq-train built masks whole words
    from biofairseq.recipe.best_checkpoint import records

    updates = [int(r["num_updates"]) for r in records(run_dir / "pretrain" / "train.log", "train_inner")]
    assert updates[-1] == 10 and 8 in updates


def test_the_pre_ln_model_converts_with_parity_and_is_reported(beto):
    run_dir, proc = beto
    conversion = json.loads((run_dir / "hf" / "beto" / "conversion.json").read_text())
    assert conversion["layout"].startswith("pre-LN without embedding LayerNorm")
    parity = conversion["parity"]
    assert parity["ids_identical"] and max(parity["max_abs_diff_logits"], parity["max_abs_diff_hidden"]) < 1e-4
    report = json.loads((run_dir / "report.json").read_text())
    assert report["data_bin"]["vocabulary"] == "SentencePiece" and report["pretraining"]["best"]["metric"] == "last"
    assert report["ner"] == {} and not [c for c in commands(proc.stderr) if c[0] == "biofairseq-ner"]  # NER_DATA=
