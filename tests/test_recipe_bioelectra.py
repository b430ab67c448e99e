"""recipes/bioelectra.sh end to end on the same slice of the bundled sample as test_recipe.py: the shared stage
machinery with another objective (ELECTRA) and two length phases, on CPU, with the real tools."""

import json
from pathlib import Path

import pytest

from test_recipe import RECIPE, REPO, commands, recipe, sample  # noqa: F401  (sample: the module fixture)

BIOELECTRA = REPO / "recipes" / "bioelectra.sh"


@pytest.fixture(scope="module")
def electra_run(sample, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("electra") / "tiny"
    # 18 updates at 128 tokens, then 2 at 512 with 8 sequences each; one seed, no random-init twin
    # (test_electra_convert makes one of a discriminator); NER data with train and dev and no test split
    no_test = Path(sample["SOURCES"].split("=", 1)[1]).parent / "ner_no_test"
    return run_dir, recipe(run_dir, script=BIOELECTRA, served=True, **{**sample, "MAX_UPDATE": "20", "SAVE_INTERVAL_UPDATES": "10",
                                                          "NER_SEEDS": "1", "BASELINE": "none",
                                                          "NER_DATA": f"pharmaconer={no_test}"})


def test_bioelectra_runs_two_length_phases_on_one_schedule_and_reports_electra(electra_run):
    run_dir, proc = electra_run
    phases = [c for c in commands(proc.stderr) if c[0] == "biofairseq-train"]
    value = lambda command, flag: command[command.index(flag) + 1]
    assert [value(c, "--task") for c in phases] == ["electra", "electra"]
    assert [value(c, "--tokens-per-sample") for c in phases] == ["128", "512"]
    assert [value(c, "--max-update") for c in phases] == ["18", "20"]
    assert [value(c, "--total-num-update") for c in phases] == ["20", "20"]  # one learning-rate schedule
    assert [value(c, "--batch-size") for c in phases] == ["32", "8"]
    assert "--reset-dataloader" in phases[1] and "--reset-optimizer" not in phases[1]
    assert "--reset-lr-scheduler" not in phases[1]
    # ELECTRA's optimizer: no weight decay on LayerNorm weights and biases
    assert all(value(c, "--optimizer") == "adamw" and value(c, "--weight-decay-exclude") == "norm_and_bias" for c in phases)
    import torch

    groups = torch.load(run_dir / "pretrain" / "checkpoints" / "checkpoint_last.pt", weights_only=False)["last_optimizer_state"]["param_groups"]
    assert sorted(g["weight_decay"] for g in groups) == [0.0, 0.01]
    # phase 2 went on from phase 1: updates 19-20 follow 18, the learning rate keeps decaying
    from biofairseq.recipe.best_checkpoint import records

    steps = {int(r["num_updates"]): float(r["lr"]) for r in records(run_dir / "pretrain" / "train.log", "train_inner")}
    assert sorted(steps) == list(range(5, 21, 5))
    # linear decay to 0 at update 20 after 10 warm-up updates, across the phases: the same step from 15 to 20
    # as from 10 to 15
    assert steps[10] > steps[15] > steps[20] == 0 and steps[15] - steps[20] == pytest.approx(steps[10] - steps[15], rel=1e-3)
    report = json.loads((run_dir / "report.json").read_text())
    pretraining = report["pretraining"]
    assert pretraining["objective"] == "ELECTRA" and pretraining["best"]["metric"] == "last"
    assert pretraining["best"]["update"] == 20 and pretraining["best"]["checkpoint"].endswith("checkpoint_last.pt")
    assert {"gen_ppl", "disc_auc", "disc_acc_replaced", "disc_trivial"} <= pretraining["validations"][-1].keys()
    assert "generator ppl" in proc.stdout and "trivial solution" in proc.stdout
    # the discriminator and the generator in transformers; NER fine-tuned the discriminator
    conversion = json.loads((run_dir / "hf" / "bioelectra" / "conversion.json").read_text())
    assert conversion["transformers_class"] == "ElectraForPreTraining" and conversion["parity"]["ids_identical"]
    assert conversion["generator"]["transformers_class"] == "ElectraForMaskedLM"
    ner = report["ner"]["pharmaconer"]
    assert [s["model"] for s in ner] == ["model=bioelectra"] and ner[0]["runs"] == 1
    sweep = next(c for c in commands(proc.stderr) if c[0] == "biofairseq-ner")
    assert value(sweep, "--layerwise-lr-decay") == "0.8" and value(sweep, "--warmup-ratio") == "0.1"
    # no test split: the sweep fine-tunes on train, selects on dev and reports dev scores
    assert value(sweep, "--dev").endswith("ner_no_test/dev") and "--test" not in sweep
    assert ner[0]["split"] == "dev" and "| dev F1 mean ± std" in proc.stdout
    assert (run_dir / "recipe.env").read_text().startswith("RECIPE=bioelectra\n")


def test_bioelectra_pretraining_logs_both_towers_and_the_generator_learns(electra_run):
    from biofairseq.recipe.best_checkpoint import records

    run_dir, _ = electra_run
    steps = list({int(r["num_updates"]): r for r in records(run_dir / "pretrain" / "train.log", "train_inner")}.values())
    wanted = {"gen_loss", "gen_ppl", "gen_acc", "disc_loss", "disc_trivial", "disc_acc_replaced", "disc_acc_original",
              "replace_rate", "disc_auc", "disc_cosine"}
    assert len(steps) == 4 and wanted <= steps[-1].keys()
    first, last = steps[0], steps[-1]
    assert last["gen_loss"] < first["gen_loss"] - 0.2 and last["gen_acc"] > first["gen_acc"]
    # the discriminator moves from its random start towards (at least) the base rate of replacements
    assert last["disc_loss"] < first["disc_loss"] - 0.1
    assert all(0 < s["replace_rate"] <= 15.5 for s in steps)


def test_the_recipes_share_the_stage_machinery_and_copy_none_of_it():
    library = (REPO / "recipes" / "lib" / "stages.sh").read_text() + (REPO / "recipes" / "lib" / "recipe.sh").read_text()
    for script in (RECIPE, BIOELECTRA, REPO / "recipes" / "bio_lm.sh"):
        text = script.read_text()
        assert 'source "$(dirname "${BASH_SOURCE[0]}")/lib/recipe.sh"' in text
        for function in ("stage", "run", "die", "recipe_run"):
            assert f"{function}() {{" in library and f"{function}() {{" not in text, (script.name, function)


def test_the_variants_table_reads_a_pilot_folder_as_the_report_does(electra_run):
    """benchmarks/electra_variants.py: the discriminator's last validation and the sweep's dev F1, from the files."""
    import inprocess

    run_dir, _ = electra_run
    out = inprocess.run("python", REPO / "benchmarks" / "electra_variants.py", f"tiny={run_dir}").stdout
    row = [c.strip() for c in out.splitlines()[2].split("|")[1:-1]]
    report = json.loads((run_dir / "report.json").read_text())
    last = report["pretraining"]["validations"][-1]
    assert row[:2] == ["tiny", "20"] and row[5].startswith(f"{last['disc_loss'] / last['disc_trivial']:.3f} / ")
    assert row[7] == f"{100 * report['ner']['pharmaconer'][0]['dev_f1']['mean']:.2f} ± 0.00 (1)" and row[8] == "-"


def test_the_one_gpu_preset_runs_on_the_cpu_at_a_tiny_shape(sample, tmp_path):
    """PRESET=one_gpu with electra_tiny as its discriminator and 10 updates (its own shape trains an update in
    test_electra.py), NER left out: pretraining takes the preset's packed rows, fused AdamW, clipping, generator and
    temperature (bf16 is a GPU's: on a CPU fp32), and the discriminator converts."""
    run_dir = tmp_path / "one_gpu"
    proc = recipe(run_dir, script=BIOELECTRA, served=True, **{
        **sample, "PRESET": "one_gpu", "ARCH": "electra_tiny", "SEQUENCES_PER_UPDATE": "32", "BATCH_PER_DEVICE": "32",
        "MAX_UPDATE": "10", "WARMUP_UPDATES": "5", "SAVE_INTERVAL_UPDATES": "10", "NER_DATA": ""})
    train, = [c for c in commands(proc.stderr) if c[0] == "biofairseq-train"]
    value = lambda flag: train[train.index(flag) + 1]
    assert (value("--optimizer"), value("--clip-norm"), value("--generator-width-fraction"), value("--sampling-temperature")) == \
        ("fused_adamw", "1.0", "0.25", "2")
    assert {"--cpu", "--pack-documents"} <= set(train) and value("--tokens-per-sample") == "128"  # bf16 is the GPU's
    assert json.loads((run_dir / "hf" / "bioelectra" / "conversion.json").read_text())["parity"]["ids_identical"]
