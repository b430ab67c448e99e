"""recipes/beto.sh on the same slice of the bundled sample as test_recipe.py: a cased SentencePiece vocabulary,
whole-word masking, two length phases over a data-bin in two shards (SHARD_MB). Run with the pre-LN tiny shape (ARCH=bio_megatron_tiny), so that it is
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
    # 10 updates: 8 at 128 tokens (batch 8), within shard0, then 2 at 512 (batch 4), from shard1
    return run_dir, recipe(run_dir, script=BETO, served=True, **{**sample, "ARCH": "bio_megatron_tiny", "MAX_UPDATE": "10",
                                                     "WARMUP_UPDATES": "2", "SEQUENCES_PER_UPDATE": "8", "BATCH_PER_DEVICE": "8",
                                                     "PHASE2_SHARE": "0.2", "PHASE2_SEQUENCES_PER_UPDATE": "4",
                                                     "PHASE2_BATCH_PER_DEVICE": "4", "SAVE_INTERVAL_UPDATES": "5",
                                                     "LOG_INTERVAL": "2", "NER_DATA": "", "BASELINE": "none",
                                                     "SHARD_MB": "0.4"})


def test_sentencepiece_whole_word_masking_in_two_length_phases(beto):
    run_dir, proc = beto
    printed = commands(proc.stderr)
    vocabulary = next(c for c in printed if c[1:2] and c[1].endswith("train_vocab.py"))
    assert value(vocabulary, "--type") == "sentencepiece"
    assert json.loads((run_dir / "data-bin" / "shard0" / "vocab_info.json").read_text())["normalization"] == "identity"  # cased
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


def test_the_phases_read_a_sharded_data_bin_from_where_they_are(beto):
    """Phase 1 reads shard0; phase 2 (its data loader reset, at epoch 1 again) starts at the shard after phase 1's,
    not shard0 again; the valid split, in shard0 alone, is read in both; stage 5 checks the sharded data-bin."""
    run_dir, proc = beto
    assert sorted(p.name for p in (run_dir / "data-bin").iterdir()) == ["shard0", "shard1"]
    phase1, phase2 = [c for c in commands(proc.stderr) if c[0] == "biofairseq-train"]
    shards = [str(run_dir / "data-bin" / f"shard{k}") for k in (0, 1)]
    assert phase1[1] == ":".join(shards) and phase2[1] == ":".join(shards[::-1])
    loaded = [line.split(" lines of ")[1] for line in proc.stderr.splitlines() if " blocks from " in line]
    train = [path for path in loaded if path.endswith("/train")]
    assert train == [f"{shards[0]}/train", f"{shards[1]}/train"]  # one epoch of each phase
    assert {path for path in loaded if path.endswith("/valid")} == {f"{shards[0]}/valid"}
    assert (run_dir / "pretrain" / "checkpoints" / "phase2.first_shard").read_text() == "1\n"
    assert json.loads((run_dir / "pretrain" / "check.json").read_text())["unigram_ppl"] > 1
