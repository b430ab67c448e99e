"""Continued pretraining through the recipes: INIT_FROM a published family's transformers folder (the stand-ins of
conftest.standins) in the recipe that continues it, to its report, and the settings step's refusals before any work.

beto.sh continuing a BERT is the headline case (BETO's own recipe continuing BETO), through NER and its random-init
twin; bioelectra.sh an ELECTRA pair and biomegatron.sh a Megatron-BERT, pretraining and conversion only."""

import json
import math
import re
import shutil

import pytest
import torch

from biofairseq.recipe import settings
from biofairseq.recipe.presets import RECIPES, SHARED, value_of
from biofairseq.recipe.table import merge, names
from biofairseq.dev.samples import REPO
from test_recipe import commands, recipe, sample  # noqa: F401  (sample: the module fixture)

# the tiny preset's batch and NER windows, not the continuation's (TAPT's 256 sequences, 512 positions)
SHORT = {"MAX_UPDATE": "10", "WARMUP_UPDATES": "2", "SAVE_INTERVAL_UPDATES": "10", "PHASE2_SHARE": "0",
         "SEQUENCES_PER_UPDATE": "32", "NER_MAX_LENGTH": "128"}


def continuing(sample):
    """The sample's settings without VOCAB_SIZE: a run continuing a model learns no vocabulary (a size is refused)."""
    return {name: value for name, value in sample.items() if name != "VOCAB_SIZE"}


def value(command, flag):
    return command[command.index(flag) + 1]


def resolve(recipe_name, **environ):
    return settings.resolve(recipe_name, {"NUM_GPUS": "0", "STOP_AFTER": "settings", **environ}, REPO)


def refused(recipe_name, **environ):
    with pytest.raises(settings.SettingsError) as raised:
        resolve(recipe_name, **environ)
    return str(raised.value)


# ---- the settings step: the folder's family, its settings and lengths, before any work

@pytest.mark.parametrize("recipe_name, folder, takes, continue_with", [
    ("modernbert", "bert", "ModernBERT", "recipes/bsc_bio_es.sh or recipes/beto.sh"),
    ("bioelectra", "bert", "ELECTRA", "recipes/bsc_bio_es.sh or recipes/beto.sh"),
    ("beto", "electra", "RoBERTa or BERT", "recipes/bioelectra.sh"),
    ("bsc_bio_es", "megatron-bert", "RoBERTa or BERT", "recipes/biomegatron.sh"),
    ("biomegatron", "bert", "RoBERTa or Megatron-BERT", "recipes/bsc_bio_es.sh or recipes/beto.sh"),
])
def test_a_family_the_recipe_does_not_continue_is_named_with_the_recipes_that_do(recipe_name, folder, takes,
                                                                                continue_with, standins):
    message = refused(recipe_name, INIT_FROM=str(standins[folder]))
    assert f"{recipe_name}.sh continues {takes} models" in message and f"with {continue_with}" in message, message


def test_a_roberta_folder_is_refused_by_modernbert_sh_before_any_work(tmp_path):
    """It used to pass the settings, convert, then end in a traceback about --attention sdpa."""
    from test_mistakes import tiny_roberta

    tiny_roberta(tmp_path)
    message = refused("modernbert", INIT_FROM=str(tmp_path / "default-roberta"))
    assert "a RoBERTa model (RobertaForMaskedLM); modernbert.sh continues ModernBERT models" in message, message


def test_what_the_conversion_or_the_run_cannot_take_is_refused_from_config_alone(standins, tmp_path):
    def edited(name, **changes):
        folder = tmp_path / f"{name}-{'-'.join(changes)}"
        shutil.copytree(standins[name], folder)
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, **changes}))
        return str(folder)

    message = refused("beto", INIT_FROM=edited("bert", position_embedding_type="relative_key"))
    assert "position_embedding_type relative_key" in message and "cannot be continued" in message
    short = edited("bert", max_position_embeddings=64)  # every length beyond it in one line
    assert refused("beto", INIT_FROM=short).startswith(  # the continuation's NER_MAX_LENGTH fits the positions
        f"TOKENS_PER_SAMPLE=128: INIT_FROM={short} has 64 positions")
    lengths = {"NER_MAX_LENGTH": "128", "PHASE2_SHARE": "0.1", "PHASE2_TOKENS_PER_SAMPLE": "512", "MAX_UPDATE": "100"}
    assert refused("beto", INIT_FROM=short, **lengths).startswith(
        f"TOKENS_PER_SAMPLE=128, NER_MAX_LENGTH=128 and PHASE2_TOKENS_PER_SAMPLE=512: INIT_FROM={short} has 64 positions")
    assert refused("beto", INIT_FROM=short, **{**lengths, "TOKENS_PER_SAMPLE": "64", "NER_MAX_LENGTH": "64"}).endswith(
        "give at most 64 (or PHASE2_SHARE=0: one length)")
    assert refused("beto", INIT_FROM=str(standins["bert"]), ARCH="beto_base", VOCAB_SIZE="8000").startswith(
        "ARCH=beto_base: INIT_FROM=")  # ... brings its own shape and vocabulary ...; drop ARCH and VOCAB_SIZE
    unfinished = tmp_path / "unfinished"
    shutil.copytree(standins["bert"], unfinished, ignore=shutil.ignore_patterns("*.safetensors"))
    assert refused("beto", INIT_FROM=str(unfinished)).startswith(f"INIT_FROM={unfinished}: no weights (model.safetensors")
    assert f"in {unfinished}" in refused("beto", INIT_FROM=str(unfinished))
    message = refused("bioelectra", INIT_FROM=str(standins["electra"] / "generator"))
    assert "an ELECTRA generator (ElectraForMaskedLM), not a discriminator" in message
    older = edited("bert", model_type="")
    assert 'no model_type, which transformers needs to read it; add the model\'s: "model_type": "bert" for its ' \
           "BertForMaskedLM" in refused("beto", INIT_FROM=older)
    assert "hf download dccuchile/bert-base-spanish-wwm-cased --local-dir models/bert-base-spanish-wwm-cased" in refused(
        "beto", INIT_FROM="dccuchile/bert-base-spanish-wwm-cased")
    electra = str(standins["electra"])
    assert "EMBEDDING_SHARING=gdes: INIT_FROM=" in refused("bioelectra", INIT_FROM=electra, EMBEDDING_SHARING="gdes")
    message = refused("bioelectra", INIT_FROM=electra, GENERATOR_FRACTION="0.25")
    assert "has its generator" in message and "drop the setting" in message
    assert resolve("bioelectra", INIT_FROM=str(standins["electra-discriminator"]), GENERATOR_FRACTION="0.25")
    assert "original fine-tunes INIT_FROM's model as it was given, and there is none" in refused(
        "beto", BASELINE="random-init original")


# ---- a continuation's own values, over every preset

CONTINUING = [name for name in RECIPES if "CONTINUE_EPOCHS" in names(name)]


def inputs(sample):
    return {name: sample[name] for name in ("SOURCES", "NER_DATA")}


@pytest.mark.parametrize("recipe_name", CONTINUING)
def test_every_preset_of_a_continuing_recipe_resolves_a_continuations_values_under_init_from(recipe_name, sample,
                                                                                             standins):
    """TAPT's schedule (1e-4, 256 sequences, 6% warm-up, 100 passes and at most DAPT's 12,500 updates), one length,
    the model's own masking, NER at a published model's settings beside the original, a head warm-up where the folder
    has no trained LM head; what the user gives wins. Without INIT_FROM, the preset's."""
    r = RECIPES[recipe_name]
    for preset in r.presets:
        for folder, head in (("bert", "0"), ("bert-headless", "300")):
            v = merge(recipe_name, {**inputs(sample), "PRESET": preset, "INIT_FROM": str(standins[folder])}, REPO)
            got = {name: v[name] for name in ("PEAK_LR", "SEQUENCES_PER_UPDATE", "CONTINUE_EPOCHS", "MAX_UPDATE",
                                              "WARMUP_UPDATES", "BASELINE", "NER_LRS", "NER_EPOCHS", "NER_MAX_LENGTH")}
            assert got == {"PEAK_LR": "1e-4", "SEQUENCES_PER_UPDATE": "256", "CONTINUE_EPOCHS": "100",
                           "MAX_UPDATE": "12500", "WARMUP_UPDATES": "750", "BASELINE": "original", "NER_LRS": "5e-5",
                           "NER_EPOCHS": "4", "NER_MAX_LENGTH": "512"}, (preset, folder)
            assert v.get("PHASE2_SHARE", "0") == "0" and v["MASK_PROB"] == value_of(r.defaults.get("MASK_PROB", "0.15"))
            if "HEAD_WARMUP_UPDATES" in names(recipe_name):
                assert v["HEAD_WARMUP_UPDATES"] == head, (preset, folder)
        scratch = merge(recipe_name, {**inputs(sample), "PRESET": preset}, REPO)
        assert scratch["CONTINUE_EPOCHS"] == "" and scratch["PEAK_LR"] == value_of(
            {**SHARED, **r.defaults, **r.presets[preset]}["PEAK_LR"])
    given = merge(recipe_name, {**inputs(sample), "INIT_FROM": str(standins["bert"]), "PEAK_LR": "3e-4",
                                "MAX_UPDATE": "300"}, REPO)
    assert (given["PEAK_LR"], given["CONTINUE_EPOCHS"], given["WARMUP_UPDATES"]) == ("3e-4", "", "18")


def test_the_settings_step_names_the_continuations_values_and_notes_a_from_scratch_rate(sample, standins):
    environ = {**inputs(sample), "INIT_FROM": str(standins["bert-headless"]), "PEAK_LR": "1e-3", "NER_LRS": "5e-5,1e-3"}
    first, rate, ner = settings.continuation_notes("beto", resolve("beto", **environ), environ)
    assert first.startswith("INIT_FROM: a continuation's values where none is given (SEQUENCES_PER_UPDATE=256, ")
    assert "PEAK_LR" not in first and "HEAD_WARMUP_UPDATES=300" in first
    assert rate.startswith("note: PEAK_LR=1e-3 is a from-scratch rate on a published model") and "NER_LRS=5e-5,1e-3" in ner
    assert refused("beto", **inputs(sample), INIT_FROM=str(standins["bert"]), PHASE2_SHARE="0.1").startswith(
        "CONTINUE_EPOCHS=100: a run in two length phases counts updates; give MAX_UPDATE")


def test_the_report_puts_the_original_beside_the_continued_model_and_says_whether_it_helped():
    from biofairseq.recipe.report import continuation_lines

    def summary(model, mean, std):
        return {"model": f"model={model}", "split": "test", "f1": {"mean": mean, "std": std}}

    models = {"beto": {"original": {"ppl": 20.0, "head_warmup_updates": 300}, "best": {"ppl": 12.5}}}
    close = continuation_lines(models, {"ncbi": (None, [summary("beto", 0.8196, 0.0035),
                                                        summary("original", 0.8205, 0.0037)])})
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in "\n".join(close).splitlines()
            if line.startswith("| ")]
    assert rows[0] == ["model", "valid ppl", "ncbi test F1 %"] and rows[1:] == [
        ["original (INIT_FROM, as given), its LM head warmed 300 updates", "20.00", "82.05 ± 0.37"],
        ["continued", "12.50", "81.96 ± 0.35"]]
    assert close[-2] == ("The continuation did not help on NER: validation perplexity fell by 7.50; ncbi test F1 fell "
                         "by 0.09 points, no more than the seeds' spread (0.37).")
    better = continuation_lines(models, {"ncbi": (None, [summary("beto", 0.84, 0.003), summary("original", 0.82, 0.004)])})
    assert better[-2].startswith("The continuation helped on NER") and "rose by 2.00 points, more than" in better[-2]


# ---- the recipes, run

@pytest.fixture(scope="module")
def beto(sample, standins, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("continued") / "beto"
    return run_dir, recipe(run_dir, script=REPO / "recipes" / "beto.sh", served=True,
                           **{**continuing(sample), **SHORT, "INIT_FROM": str(standins["bert"]), "NER_SEEDS": "1",
                              "BASELINE": "random-init original"})


def test_beto_sh_continues_a_bert_through_ner_and_gives_back_a_bert(beto, standins):
    """The WordPiece vocabulary replaces a learned one through binarizing, whole-word masking groups its ##
    continuations, pretraining starts from the converted weights (--layer-norm-eps 1e-12), and the model comes back as
    a BertForMaskedLM with the BERT's own vocab.txt, fine-tuned beside its random-init twin; card and report say
    what it continued."""
    run_dir, proc = beto
    printed = commands(proc.stderr)
    assert not [c for c in printed if c[1:2] and c[1].endswith("train_vocab.py")]
    train = next(c for c in printed if c[0] == "biofairseq-train")
    assert value(train, "--layer-norm-eps") == "1e-12" and "--mask-whole-words" in train
    assert value(train, "--finetune-from-model") == str(run_dir / "init" / "model.pt") and value(train, "--bpe") == "bert"
    assert json.loads((run_dir / "data-bin" / "vocab_info.json").read_text())["type"] == "wordpiece"
    config = json.loads((run_dir / "hf" / "beto" / "config.json").read_text())
    assert config["architectures"] == ["BertForMaskedLM"] and config["layer_norm_eps"] == 1e-12
    assert (run_dir / "hf" / "beto" / "vocab.txt").read_bytes() == (standins["bert"] / "vocab.txt").read_bytes()
    assert "continued from" in (run_dir / "hf" / "beto" / "README.md").read_text()
    # 10 updates moved the stand-in's embeddings a little; the twin's are new
    from safetensors.torch import load_file

    def embeddings(folder):
        return load_file(folder / "model.safetensors")["bert.embeddings.word_embeddings.weight"]

    start = embeddings(standins["bert"])
    for folder, close in ((run_dir / "hf" / "beto", True), (run_dir / "hf" / "random_init", False)):
        cosine = torch.nn.functional.cosine_similarity(embeddings(folder), start).mean()
        assert (cosine > 0.9) == close, (folder, cosine)
    report = json.loads((run_dir / "report.json").read_text())
    models = {row["model"] for row in report["ner"]["pharmaconer"]}
    assert report["data_bin"]["vocabulary"] == "WordPiece"
    assert models == {"model=beto", "model=random_init", "model=original"}  # the stand-in itself, fine-tuned as given
    assert (run_dir / "hf" / "original").resolve() == standins["bert"].resolve()
    assert "Continual pretraining" in (run_dir / "report.md").read_text()
    # stage 4 names the model it trains; the original, with its own trained head, validated as the continued one
    assert "==== 4 continue bert (BertForMaskedLM, 2 x 128) -> " in proc.stderr
    original = json.loads((run_dir / "pretrain" / "original.json").read_text())
    assert original["weights"] == str(run_dir / "init" / "model.pt") and original["head_warmup_updates"] == 0
    assert report["pretraining"]["original"]["ppl"] == original["ppl"] > 1
    said = (run_dir / "report.md").read_text().split("## The original model against the continued one")[1]
    assert "| continued " in said and ("The continuation helped on NER" in said or "did not help on NER" in said)
    assert report["pretraining"]["arch"] == value(train, "--arch")
    from biofairseq.recipe.report import pretrained_arch  # the stand-in's shape, not the preset's ARCH (equal here)

    assert pretrained_arch({"ARCH": "beto_base"}, {"fairseq_flags": ["--arch", "bio_megatron_tiny"]}) == "bio_megatron_tiny"


@pytest.fixture(scope="module")
def headless(sample, standins, tmp_path_factory):
    """A sentence-embedding model's route (all-MiniLM-L6-v2's): a BertModel folder (tokenizer.json alone), its
    vocabulary extended by the corpus's words (VOCAB_EXTEND), its head warmed, then continued."""
    run_dir = tmp_path_factory.mktemp("headless") / "run"
    proc = recipe(run_dir, script=REPO / "recipes" / "beto.sh", served=True,
                  **{**continuing(sample), "SEQUENCES_PER_UPDATE": "32", "INIT_FROM": str(standins["bert-headless"]),
                     "HEAD_WARMUP_UPDATES": "3", "CONTINUE_EPOCHS": "0.5", "VOCAB_EXTEND": "200", "NER_SEEDS": "1",
                     "NER_LRS": "5e-5", "NER_MAX_LENGTH": "128", "BASELINE": "none"})
    return run_dir, proc


def test_a_model_without_a_trained_lm_head_gets_its_head_trained_alone_first(headless):
    """A BertModel folder (tokenizer.json alone): HEAD_WARMUP_UPDATES of the LM head with every other weight held,
    then the whole model from there, for CONTINUE_EPOCHS of the text (biofairseq-train --fit-epochs); the original is
    the original encoder with that head, validated as fairseq validated it; the report says so."""
    from biofairseq.training_state import load_state

    run_dir, proc = headless
    head_run, main_run = [c for c in commands(proc.stderr) if c[0] == "biofairseq-train"]
    assert "--lm-head-only" in head_run and value(head_run, "--max-update") == "3"
    assert value(main_run, "--finetune-from-model") == str(run_dir / "pretrain" / "head" / "checkpoints" / "checkpoint_last.pt")
    init = load_state(run_dir / "init_extended" / "model.pt")["model"]
    head = load_state(run_dir / "pretrain" / "head" / "checkpoints" / "checkpoint_last.pt")["model"]
    last = load_state(run_dir / "pretrain" / "checkpoints" / "checkpoint_last.pt")["model"]
    moved = sorted(k for k in init if not torch.equal(init[k], head[k]))
    assert moved == sorted(k for k in init if k.startswith("encoder.lm_head.") and k != "encoder.lm_head.weight")
    assert not torch.equal(head["encoder.sentence_encoder.layers.0.fc1.weight"], last["encoder.sentence_encoder.layers.0.fc1.weight"])
    # half a pass over the training samples, as the task counted them (its blocks, or the rows it packed them into)
    blocks = re.findall(r"loaded (\d+) complete_doc blocks from \d+ lines of \S+/train\n", proc.stderr)[-1]
    rows = re.findall(rf"packed {blocks} blocks into (\d+) rows", proc.stderr)
    report = json.loads((run_dir / "report.json").read_text())
    assert report["pretraining"]["validations"][-1]["update"] == math.ceil(0.5 * int(rows[-1] if rows else blocks) / 32)
    head_valid = [json.loads(line) for line in (run_dir / "pretrain" / "head" / "train.log").read_text().splitlines()
                  if line.startswith("{") and "valid_ppl" in line][-1]
    original = json.loads((run_dir / "pretrain" / "original.json").read_text())
    # the same weights and masks: equal but for the order fairseq sums the batches' losses in (its ppl has 2 decimals)
    assert original["head_warmup_updates"] == 3 and original["ppl"] == pytest.approx(float(head_valid["valid_ppl"]), rel=1e-4)
    assert "the head was trained alone first, for 3 updates with the encoder held fixed" in (run_dir / "report.md").read_text()


def test_vocab_extend_adds_the_corpus_words_through_every_stage_and_the_report_measures_them(headless, standins):
    """The new words after the published vocab.txt's, binarized, continued, given back in the BERT's vocab.txt that
    AutoTokenizer loads, named on the card; the report's break-out table has the vocabulary before and after."""
    from transformers import AutoTokenizer

    run_dir, proc = headless
    extend = next(c for c in commands(proc.stderr) if c[:2] == ["biofairseq-convert", "extend-vocab"])
    assert extend[2:4] == [str(run_dir / "init"), str(run_dir / "init_extended")] and value(extend, "--size") == "200"
    assert value(extend, "--text") == str(run_dir / "clean" / "train.txt")
    record = json.loads((run_dir / "data-bin" / "vocab_info.json").read_text())["extension"]
    assert record["added"] == record["words"] == 200 and record["unchanged_text"]["max_abs_diff_logits"] <= 1e-5
    published = AutoTokenizer.from_pretrained(standins["bert-headless"]).get_vocab()
    vocab = (run_dir / "hf" / "beto" / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert vocab[:len(published)] == sorted(published, key=published.get) and len(vocab) == len(published) + 200
    tokenizer = AutoTokenizer.from_pretrained(run_dir / "hf" / "beto")
    assert [tokenizer.tokenize(w) for w in vocab[-3:]] == [[w] for w in vocab[-3:]]
    assert "| vocabulary extended | 200 tokens (200 words)" in (run_dir / "hf" / "beto" / "README.md").read_text()
    report = json.loads((run_dir / "report.json").read_text())
    rates = report["breakout"]["pharmaconer"]
    assert rates["all mentions"]["extended"] < rates["all mentions"]["original"]
    assert rates["all text"]["extended"] < rates["all text"]["original"]
    said = (run_dir / "report.md").read_text()
    assert "### Vocabulary extension (`init_extended/`)" in said and "| original | extended |" in said.replace("  ", "")


def test_bioelectra_sh_continues_an_electra_pair_and_gives_back_both_towers(sample, standins, tmp_path):
    run_dir = tmp_path / "bioelectra"
    proc = recipe(run_dir, script=REPO / "recipes" / "bioelectra.sh", served=True,
                  **{**continuing(sample), **SHORT, "INIT_FROM": str(standins["electra"]), "NER_DATA": "", "BASELINE": "none"})
    train = next(c for c in commands(proc.stderr) if c[0] == "biofairseq-train")
    assert value(train, "--arch") == "electra_tiny" and value(train, "--layer-norm-eps") == "1e-12"
    assert "--embedding-sharing" not in train  # the pair's: one module, as the folder's towers are equal
    for folder, cls in (("", "ElectraForPreTraining"), ("generator", "ElectraForMaskedLM")):
        config = json.loads((run_dir / "hf" / "bioelectra" / folder / "config.json").read_text())
        assert config["architectures"] == [cls] and config["type_vocab_size"] == 2
    conversion = json.loads((run_dir / "hf" / "bioelectra" / "conversion.json").read_text())
    assert conversion["family"] == "ELECTRA" and conversion["continued_from"]["family"] == "ELECTRA"


def test_biomegatron_sh_continues_a_megatron_bert(sample, standins, tmp_path):
    run_dir = tmp_path / "biomegatron"
    proc = recipe(run_dir, script=REPO / "recipes" / "biomegatron.sh", served=True,
                  **{**continuing(sample), **SHORT, "INIT_FROM": str(standins["megatron-bert"]), "NER_DATA": "",
                     "BASELINE": "none"})
    train = next(c for c in commands(proc.stderr) if c[0] == "biofairseq-train")
    assert value(train, "--arch") == "bio_megatron_tiny" and value(train, "--layer-norm-eps") == "1e-12"
    config = json.loads((run_dir / "hf" / "continued" / "config.json").read_text())
    assert config["architectures"] == ["MegatronBertForMaskedLM"] and config["model_type"] == "megatron-bert"
