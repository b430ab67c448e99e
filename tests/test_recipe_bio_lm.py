"""recipes/bio_lm.sh on the same slice of the bundled sample as test_recipe.py: four models in one run (base, large,
base distilled from large, base trained longer), each checked and converted, one report. Without NER data
(NER_DATA=), to keep the suite short: fine-tuning several models and reporting them side by side is the shared stage
that test_recipe.py runs with two."""

import json

import pytest

from test_recipe import REPO, commands, recipe, sample  # noqa: F401  (sample: the module fixture)

BIO_LM = REPO / "recipes" / "bio_lm.sh"
ORDER = ["base", "base_longer", "large", "distilled"]  # the paper's Table 6


@pytest.fixture(scope="module")
def bio_lm_run(sample, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("bio_lm") / "tiny"
    # 6 pretraining updates of 8 sequences, 6 more to distil or train longer, warm-up left to the recipe (5%); no
    # fine-tuning, no random-init twin
    variables = {k: v for k, v in sample.items() if k != "WARMUP_UPDATES"}
    return run_dir, recipe(run_dir, script=BIO_LM, served=True, **{**variables, "MAX_UPDATE": "6", "DISTIL_UPDATES": "6",
                                                      "SEQUENCES_PER_UPDATE": "8", "BATCH_PER_DEVICE": "8",
                                                      "SAVE_INTERVAL_UPDATES": "6", "LOG_INTERVAL": "3",
                                                      "NER_DATA": "", "BASELINE": "none"})


def value(command, flag):
    return command[command.index(flag) + 1]


def test_four_models_pretrain_with_the_papers_schedules_and_the_right_starts(bio_lm_run):
    run_dir, proc = bio_lm_run
    trains = [c for c in commands(proc.stderr) if c[0] == "biofairseq-train"]
    assert [value(c, "--criterion") for c in trains] == ["masked_lm_accuracy", "masked_lm_accuracy", "mlm_distillation",
                                                         "masked_lm_accuracy"]
    assert [value(c, "--arch") for c in trains] == ["bio_roberta_tiny", "bio_roberta_small", "bio_roberta_tiny",
                                                    "bio_roberta_tiny"]
    assert [value(c, "--lr") for c in trains] == ["1e-3", "7e-4", "8e-4", "8e-4"]
    assert [value(c, "--max-update") for c in trains] == ["6"] * 4
    assert [value(c, "--total-num-update") for c in trains] == ["6"] * 4
    assert [value(c, "--warmup-updates") for c in trains] == ["1", "1", "1", "1"]  # 5%, rounded up
    base, large = (str(run_dir / "pretrain" / m / "checkpoints" / "checkpoint_last.pt") for m in ("base", "large"))
    distil, longer = trains[2:]
    assert value(distil, "--teacher-path") == large
    assert [value(distil, f) for f in ("--alpha-mlm", "--alpha-kl", "--temperature", "--alpha-cos")] == ["5.0", "2.0", "2.0", "1.0"]
    assert value(distil, "--finetune-from-model") == value(longer, "--finetune-from-model") == base
    assert value(distil, "--save-dir") == str(run_dir / "pretrain" / "distilled" / "checkpoints")


def test_the_student_starts_from_base_and_logs_every_term(bio_lm_run):
    from biofairseq.recipe.best_checkpoint import records

    run_dir, _ = bio_lm_run
    steps = lambda model: list(records(run_dir / "pretrain" / model / "train.log", "train_inner"))
    base, distilled, longer = steps("base"), steps("distilled"), steps("base_longer")
    assert [int(s["num_updates"]) for s in distilled] == [3, 6]  # a schedule of its own
    assert {"mlm_loss", "kl_loss", "cos_loss", "teacher_ppl", "accuracy"} <= distilled[0].keys()
    # from base's weights, not from scratch: three updates in, the students' perplexity is well below base's at the
    # same point of its own schedule
    assert float(distilled[0]["ppl"]) < 0.8 * float(base[0]["ppl"]) and float(longer[0]["ppl"]) < 0.8 * float(base[0]["ppl"])


def test_all_four_are_converted_and_reported_side_by_side(bio_lm_run):
    from safetensors.torch import load_file

    run_dir, proc = bio_lm_run
    report = json.loads((run_dir / "report.json").read_text())
    models = report["pretrainings"]
    assert list(models) == ORDER
    assert [models[m]["objective"] for m in ORDER] == ["masked LM", "masked LM", "masked LM", "distillation"]
    assert [models[m]["arch"] for m in ORDER] == ["bio_roberta_tiny", "bio_roberta_tiny", "bio_roberta_small", "bio_roberta_tiny"]
    assert all(models[m]["best"]["metric"] == "last" for m in ORDER)
    converted = [c[3] for c in commands(proc.stderr) if c[:2] == ["biofairseq-convert", "to-hf"]]
    assert converted == [str(run_dir / "hf" / m) for m in ORDER]
    assert report["ner"] == {} and not [c for c in commands(proc.stderr) if c[0] == "biofairseq-ner"]  # NER_DATA=
    # the student in transformers, without the projection the criterion trained
    conversion = json.loads((run_dir / "hf" / "distilled" / "conversion.json").read_text())
    assert conversion["parity"]["ids_identical"] and conversion["transformers_class"] == "RobertaForMaskedLM"
    weights = load_file(run_dir / "hf" / "distilled" / "model.safetensors")
    assert not [k for k in weights if "projection" in k] and weights["roberta.embeddings.word_embeddings.weight"].shape[1] == 128
    text = (run_dir / "report.md").read_text()
    assert "### distilled (`pretrain/distilled/`)" in text and "teacher ppl" in text
    table = text[text.index("| model "):].splitlines()[2:6]  # the side-by-side table, after its header and rule
    assert [line.split("|")[1].strip() for line in table] == ORDER
    assert (run_dir / "recipe.env").read_text().startswith("RECIPE=bio_lm\n")
