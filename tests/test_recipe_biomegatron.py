"""recipes/biomegatron.sh on the same slice of the bundled sample as test_recipe.py: two SentencePiece vocabularies
and their break-out table, one pre-LN encoder per vocabulary, each fine-tuned with whole-word and with sub-token
labelling, one report. Its commands run in this process (served); continual pretraining (INIT_FROM=) is
test_recipe_modernbert.py's run, and the stages' handling of a fairseq checkpoint as INIT_FROM is below."""

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
    return run_dir, recipe(run_dir, script=BIOMEGATRON, served=True, **{**mine, **TINY, "VOCAB_SIZES": "1000,2000"})


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


def test_a_fairseq_checkpoint_as_init_from_goes_through_transformers_and_only_its_conversion_is_kept(tmp_path):
    """INIT_FROM=x.pt: to-hf into init.hf, from-hf into init (the vocabulary and the start), init.hf removed; the
    model's shape and first weights are the conversion's (biofairseq-train --init-from: its flags, then the recipe's,
    which win; --finetune-from-model on the first phase only)."""
    from biofairseq.recipe import recipes, settings
    from biofairseq.recipe.plan import Plan
    from biofairseq.train_inputs import init_from

    start = tmp_path / "checkpoint_last.pt"
    run, _ = settings.prepare("biomegatron", {"NUM_GPUS": "0", "STOP_AFTER": "settings", "RUN_DIR": str(tmp_path / "run")},
                              REPO, "biomegatron.sh", say=lambda line: None)
    run.values["INIT_FROM"] = str(start)
    plan = Plan(run)
    recipes.biomegatron(plan)
    ran = plan.commands
    hf, init = tmp_path / "run" / "init.hf", tmp_path / "run" / "init"
    assert ran[1:5] == [["rm", "-rf", str(hf)], ["biofairseq-convert", "to-hf", str(start), str(hf)],
                        ["biofairseq-convert", "from-hf", str(hf), str(init)], ["rm", "-rf", str(hf)]]
    train = next(r for r in ran if r[0] == "biofairseq-train")
    assert train[train.index("--init-from") + 1] == str(init) and "--arch" not in train
    init.mkdir(parents=True)
    (init / "conversion.json").write_text('{"fairseq_flags": ["--arch", "bio_megatron_tiny", "--dropout", "0.0"]}')
    assert init_from(["data", "--init-from", str(init), "--dropout", "0.1"]) == [
        "data", "--arch", "bio_megatron_tiny", "--dropout", "0.0", "--finetune-from-model", f"{init}/model.pt",
        "--dropout", "0.1"]
    assert "--finetune-from-model" not in init_from(["data", "--init-from", str(init), "--new-phase-at", "9"])
