"""Continued pretraining through the recipes: INIT_FROM a published family's transformers folder (the stand-ins of
conftest.standins) in the recipe that continues it, to its report, and the settings step's refusals before any work.

beto.sh continuing a BERT is the headline case (BETO's own recipe continuing BETO), through NER and its random-init
twin; bioelectra.sh an ELECTRA pair and biomegatron.sh a Megatron-BERT, pretraining and conversion only."""

import json
import shutil

import pytest
import torch

from biofairseq.recipe import settings
from biofairseq.samples import REPO
from test_recipe import commands, recipe, sample  # noqa: F401  (sample: the module fixture)

SHORT = {"MAX_UPDATE": "10", "WARMUP_UPDATES": "2", "SAVE_INTERVAL_UPDATES": "10", "PHASE2_SHARE": "0"}


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
    short = edited("bert", max_position_embeddings=64)  # every length beyond it in one line (the tiny preset's)
    assert refused("beto", INIT_FROM=short).startswith(
        f"TOKENS_PER_SAMPLE=128, NER_MAX_LENGTH=128 and PHASE2_TOKENS_PER_SAMPLE=512: INIT_FROM={short} has 64 positions")
    assert refused("beto", INIT_FROM=short, TOKENS_PER_SAMPLE="64").endswith("give at most 64 (or PHASE2_SHARE=0: one length)")
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
    assert report["pretraining"]["arch"] == value(train, "--arch")
    from biofairseq.recipe.report import pretrained_arch  # the stand-in's shape, not the preset's ARCH (equal here)

    assert pretrained_arch({"ARCH": "beto_base"}, {"fairseq_flags": ["--arch", "bio_megatron_tiny"]}) == "bio_megatron_tiny"


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
