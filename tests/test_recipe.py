"""recipes/bsc_bio_es.sh end to end on a slice of the bundled sample: every stage, on CPU, with the real tools.

The sample is shrunk (fewer documents, fewer updates and epochs), not the stages: cleaning, BPE, binarizing,
fairseq-train --task document_mlm, the best checkpoint, conversion, the random-init baseline, the NER sweep
and the report all run.
"""

import datetime
import json
import os
import shlex
import shutil
import subprocess

import pytest

from biofairseq.samples import BIN, REPO, recipe_sample

RECIPE = REPO / "recipes" / "bsc_bio_es.sh"
EXAMPLES = REPO / "examples" / "data"
SMALL = {  # a few minutes of the demo's work in about a minute
    "VALID_DOCS": "10", "VOCAB_SIZE": "2000", "MAX_UPDATE": "20", "WARMUP_UPDATES": "10", "SAVE_INTERVAL_UPDATES": "10",
    "LOG_INTERVAL": "5", "NER_LRS": "1e-3", "NER_SEEDS": "1,2", "NER_EPOCHS": "1", "NUM_GPUS": "0",
    "WEAK_PRETRAINING": "continue",  # 20 updates do not beat word frequencies; the check says so and goes on
}


def recipe(run_dir, check=True, script=RECIPE, **variables):
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PYTHON": str(BIN / "python"),
           "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore", "RUN_DIR": str(run_dir), **variables}
    proc = subprocess.run(["bash", str(script)], cwd=REPO, env=env, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"recipe failed ({proc.returncode}):\n{proc.stderr[-5000:]}")
    return proc


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    """120 clinical cases and 8/4/4 PharmaCoNER documents, taken from the bundled sample."""
    root = tmp_path_factory.mktemp("sample")
    inputs = recipe_sample(root)
    # the same train and valid, the latter named dev, and no test split (test_recipe_bioelectra.py's NER data)
    shutil.copytree(root / "ner" / "train", root / "ner_no_test" / "train")
    shutil.copytree(root / "ner" / "valid", root / "ner_no_test" / "dev")
    return {**inputs, **SMALL}


@pytest.fixture(scope="module")
def run(sample, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("run") / "tiny"
    return run_dir, recipe(run_dir, **sample)


def commands(stderr):
    """The commands the recipe printed, parsed as a shell would."""
    return [shlex.split(line[2:]) for line in stderr.splitlines() if line.startswith("+ ")]


def test_every_stage_runs_and_the_report_comes_from_the_run(run):
    run_dir, proc = run
    printed = commands(proc.stderr)
    train = next(c for c in printed if c[0] == "biofairseq-train")
    assert train[train.index("--task") + 1] == "document_mlm" and train[train.index("--arch") + 1] == "bio_roberta_tiny"
    assert train[train.index("--adam-betas") + 1] == "(0.9,0.98)" and "--cpu" in train  # printed as a shell reads it
    assert train[train.index("--optimizer") + 1] == "adam" and "--weight-decay-exclude" not in train  # RoBERTa's
    assert [c[0] for c in printed if c[0] in ("biofairseq-convert", "biofairseq-ner")] == ["biofairseq-convert", *["biofairseq-ner"] * 2]

    report = json.loads((run_dir / "report.json").read_text())
    stats = json.loads((run_dir / "clean" / "stats.json").read_text())
    assert report["corpus"]["total"]["docs_out"] == stats["total"]["docs_out"] == 120
    assert report["corpus"]["valid_docs"] == 10 and report["data_bin"]["dictionary"] == 2000
    # the kept checkpoint is the one with the lowest validation perplexity in fairseq's own log
    pretraining = report["pretraining"]
    assert pretraining["updates"] == 20 and len(pretraining["validations"]) >= 2
    assert pretraining["best"]["ppl"] == min(v["ppl"] for v in pretraining["validations"])
    assert pretraining["validations"][-1]["ppl"] < pretraining["validations"][0]["ppl"]  # it learned something
    # one point per logged update: fairseq writes each --log-file line again in every later epoch
    updates = [t["update"] for t in pretraining["train"]]
    assert updates == list(range(5, 21, 5)) and pretraining["wall_seconds"] > 0
    ner = report["ner"]["pharmaconer"]
    assert [s["model"] for s in ner] == ["model=bsc_bio_es", "model=random_init"]
    assert all(s["runs"] == 2 and s["split"] == "test" for s in ner)
    # the Markdown report is printed at the end, and every file it names is there
    assert proc.stdout.strip() == (run_dir / "report.md").read_text().strip()
    assert "## NER: pharmaconer" in proc.stdout and "| model=bsc_bio_es " in proc.stdout
    for path in ("report.png", "ner/pharmaconer/report.md", "ner/pharmaconer/dev_f1.png", "hf/bsc_bio_es/model.safetensors",
                 "hf/random_init/model.safetensors", "pretrain/checkpoints/checkpoint_best.pt"):
        assert (run_dir / path).is_file(), path
    assert any((run_dir / "pretrain" / "tensorboard").rglob("events.out.tfevents.*"))
    assert any((run_dir / "ner").rglob("tensorboard/events.out.tfevents.*"))
    # the check against word frequencies ran before fine-tuning and the report says what it found
    check = json.loads((run_dir / "pretrain" / "check.json").read_text())
    assert check["unigram_ppl"] > 1 and 0 < check["mean_token_cosine"] < 1
    assert "Check against word frequencies" in proc.stdout
    assert "pretraining_check:" in proc.stderr
    # the checkpoint records its BPE (fairseq's --bpe flags)
    assert train[train.index("--bpe") + 1] == "hf_byte_bpe" and train[train.index("--bpe-vocab") + 1].endswith("vocab.json")


def test_the_vocabulary_folder_has_the_umasks_mode_like_the_others(run):
    """tempfile.mkdtemp makes its folder 0700, which shut teammates out of a shared run folder's vocabulary."""
    umask = os.umask(0)
    os.umask(umask)
    assert (run[0] / "vocab").stat().st_mode & 0o777 == 0o777 & ~umask


def test_a_sweep_of_a_model_pretrained_again_is_redone(run, sample):
    from safetensors.torch import load_file, save_file

    run_dir, _ = run
    model = run_dir / "hf" / "bsc_bio_es" / "model.safetensors"
    weights = load_file(model)
    save_file({k: v * 1.01 if v.is_floating_point() else v for k, v in weights.items()}, model)  # as FORCE=1 would make
    proc = recipe(run_dir, **sample)
    assert "changed since" in proc.stderr
    assert proc.stderr.count("finished with another model") == 2  # both runs of the new model, none of random_init
    sweeps = [c for c in commands(proc.stderr) if c[0] == "biofairseq-ner"]
    assert len(sweeps) == 1 and sweeps[0][sweeps[0].index("--model") + 1].endswith("bsc_bio_es")


def test_a_rerun_skips_every_finished_stage(run, sample):
    run_dir, _ = run
    report = (run_dir / "report.md").stat().st_mtime_ns
    proc = recipe(run_dir, **sample)
    assert not commands(proc.stderr)  # nothing ran
    assert proc.stderr.count("skipped: ") == 10  # 8 stages, the random-init baseline and its NER sweep
    assert (run_dir / "report.md").stat().st_mtime_ns == report


@pytest.mark.parametrize("name, value, stage", [("VALID_DOCS", "11", "stage 1 (clean the sources)"),
                                                ("NER_EPOCHS", "3", "stage 7 (fine-tune on NER)")])
def test_a_rerun_with_a_setting_that_finished_stages_did_not_use_stops_in_one_line(run, sample, name, value, stage):
    run_dir, _ = run
    env = (run_dir / "recipe.env").read_text()
    proc = recipe(run_dir, check=False, **{**sample, name: value})
    assert proc.returncode == 1 and not commands(proc.stderr)
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"bsc_bio_es.sh: error: {name}={value}, but {stage} already made {run_dir}/")
    assert last.endswith(f"with {name}={sample[name]}; give {name}={sample[name]} to go on, FORCE=1 to redo every stage, or a new RUN_DIR")
    assert (run_dir / "recipe.env").read_text() == env and not (run_dir / "recipe.changes").exists()


def test_a_setting_of_a_stage_not_yet_run_may_change_and_the_report_says_when(run, sample, tmp_path):
    from biofairseq.recipe import report

    run_dir = tmp_path / "tiny"
    run_dir.mkdir()
    for made in ("recipe.env", "clean", "vocab", "data-bin"):  # the corpus stages done, pretraining not started
        (shutil.copytree if (run[0] / made).is_dir() else shutil.copy)(run[0] / made, run_dir / made)
    proc = recipe(run_dir, **{**sample, "MAX_UPDATE": "30", "STOP_AFTER": "binarize"})
    assert "note: MAX_UPDATE=30 (was 20): no stage made with it has run yet" in proc.stderr
    assert "MAX_UPDATE=30\n" in (run_dir / "recipe.env").read_text()
    (when, name, before, after), = report.settings_changes(run_dir)
    assert (name, before, after) == ("MAX_UPDATE", "20", "30") and when.startswith(str(datetime.date.today()))
    rows = [[cell.strip() for cell in row.split("|")[1:-1]] for row in "\n".join(report.changes_lines(run_dir)).splitlines()]
    assert [when, "MAX_UPDATE", "20", "30"] in rows


def test_stop_after_binarize_ends_before_pretraining(run, sample):
    run_dir, _ = run
    proc = recipe(run_dir, **sample, STOP_AFTER="binarize")
    assert not commands(proc.stderr) and proc.stderr.count("skipped: ") == 3  # clean, vocabulary, data-bin
    assert proc.stderr.strip().splitlines()[-1].startswith("bsc_bio_es.sh: STOP_AFTER=binarize: stopped after the corpus stages")


@pytest.mark.parametrize("variables, message", [
    ({"PRESET": "paper"}, "PRESET=paper needs SOURCES="),
    ({"PRESET": "one_gpu"}, "PRESET=one_gpu needs SOURCES="),
    ({"PRESET": "huge"}, "PRESET=huge: unknown; use PRESET=tiny, PRESET=pilot, PRESET=one_gpu or PRESET=paper"),
    ({"NER_DATA": "pharmaconer"}, "NER_DATA=pharmaconer: 'pharmaconer': give NAME=DIR"),
    ({"SEQUENCES_PER_UPDATE": "48", "BATCH_PER_DEVICE": "32"}, "SEQUENCES_PER_UPDATE=48 is not a multiple of 1 device(s) x BATCH_PER_DEVICE=32"),
    # a wrong value of every setting of every recipe: test_recipe_settings.py
])
def test_mistakes_stop_with_one_line_before_any_work(variables, message, tmp_path):
    proc = recipe(tmp_path / "run", check=False, NUM_GPUS="0", **variables)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1].startswith("bsc_bio_es.sh: error: ") and message in proc.stderr
    assert not (tmp_path / "run" / "clean").exists()


SLURM = REPO / "tests" / "slurm"  # stand-ins for Slurm's commands: its variables, local processes


@pytest.mark.parametrize("variables, message", [
    ({"NUM_GPUS": "0"}, "NUM_NODES=2 needs GPUs: set NUM_GPUS to the GPUs of each machine, or NUM_NODES=1"),
    ({"NUM_GPUS": "8", "PATH": f"{SLURM}{os.pathsep}{BIN}{os.pathsep}{os.environ['PATH']}", "SLURM_JOB_ID": ""},
     "NUM_NODES=2: not inside a Slurm allocation (no SLURM_JOB_ID); submit the recipe with sbatch"),
    ({"NUM_GPUS": "8", "PATH": f"{BIN}{os.pathsep}/usr/bin{os.pathsep}/bin"}, "NUM_NODES=2: srun not found"),
])
def test_several_machines_without_gpus_or_slurm_stop_with_one_line(variables, message, tmp_path):
    if "srun not found" in message and shutil.which("srun", path=variables["PATH"]):
        pytest.skip("this machine has Slurm")
    proc = recipe(tmp_path / "run", check=False, NUM_NODES="2", **variables)
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 1 and last.startswith(f"bsc_bio_es.sh: error: {message}"), proc.stderr[-2000:]
    assert not (tmp_path / "run").exists()


def test_several_machines_pretrain_under_srun_with_fairseqs_slurm_start(run, sample, tmp_path):
    """NUM_NODES=2: one srun task per machine, its cores, and fairseq's own launcher (--distributed-port). The
    stand-in srun records the command instead of starting it (a CPU cannot run --fp16 on 2 x 2 GPUs); then the
    same srun line starts each machine's task up to fairseq's Slurm start-up, on the recorded arguments."""
    run_dir, _ = run
    copy = tmp_path / "run"  # the corpus stages done, pretraining not
    shutil.copytree(run_dir, copy, ignore=lambda folder, names: [n for n in names if folder == str(run_dir)
                                                                 and n not in ("clean", "vocab", "data-bin", "recipe.env")])
    record = tmp_path / "srun.jsonl"
    proc = recipe(copy, check=False, **{**sample, "NUM_NODES": "2", "NUM_GPUS": "2", "WORKERS": "12",
                                        "BATCH_PER_DEVICE": "4",  # the 32 sequences of an update on 4 GPUs
                                        "PATH": f"{SLURM}{os.pathsep}{BIN}{os.pathsep}{os.environ['PATH']}",
                                        "SLURM_JOB_ID": "7", "SRUN_RECORD": str(record), "SRUN_RECORD_ONLY": "1"})
    assert proc.returncode != 0 and proc.stderr.count("skipped: ") == 3  # the corpus stages were done
    assert "2 GPU(s) x 2 machine(s), update frequency 2" in proc.stderr
    srun, = [json.loads(line) for line in record.read_text().splitlines()]
    options, train = srun[:srun.index("biofairseq-train")], srun[srun.index("biofairseq-train"):]
    assert options == ["--nodes", "2", "--ntasks-per-node", "1", "--gpus-per-node", "2",
                                                     "--cpus-per-task", "12", "--kill-on-bad-exit", "1"]
    assert train[train.index("--distributed-world-size") + 1] == "4" and "--distributed-port" in train
    assert "--fp16" in train and "--cpu" not in train and train[train.index("--update-freq") + 1] == "2"
    printed = next(c for c in commands(proc.stderr) if c[0] == "srun")
    assert printed[1:] == srun  # the command the recipe printed is the one it ran

    # that srun line, started by the stand-in up to fairseq's own Slurm start-up on the recorded arguments
    started = subprocess.run([str(SLURM / "srun"), *options, str(BIN / "python"), "-c",
                              SLURM_START_UP, *train[1:]], cwd=REPO, capture_output=True, text=True, timeout=300,
                             env={**os.environ, "PATH": f"{SLURM}{os.pathsep}{os.environ['PATH']}", "SLURM_JOB_ID": "7",
                                  "PYTHONWARNINGS": "ignore"})
    assert started.returncode == 0, started.stderr[-3000:]
    tasks = sorted((json.loads(line) for line in started.stdout.splitlines()), key=lambda t: t["rank"])
    gpus = tasks[0]["gpus"]  # fairseq counts each machine's GPUs: none here
    assert [t["rank"] for t in tasks] == [0, gpus] and all(t["world"] == 2 * gpus for t in tasks)
    assert all(t["init"] == "tcp://127.0.0.1:12345" and t["spawns"] == gpus for t in tasks)  # a process per GPU
    assert all(t["cpus"] == "12" for t in tasks)


SLURM_START_UP = """
import json, os, sys, torch
from fairseq import options
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.distributed.utils import infer_init_method
from biofairseq.train import add_arguments
args = options.parse_args_and_arch(options.get_training_parser(), sys.argv[1:], modify_parser=add_arguments)
cfg = convert_namespace_to_omegaconf(args).distributed_training
infer_init_method(cfg)
print(json.dumps({"init": cfg.distributed_init_method, "rank": cfg.distributed_rank, "world": cfg.distributed_world_size,
                  "spawns": None if cfg.distributed_no_spawn else cfg.distributed_num_procs,
                  "gpus": torch.cuda.device_count(), "cpus": os.environ["SLURM_CPUS_PER_TASK"]}))
"""


def test_a_run_shorter_than_the_log_interval_is_reported(run, tmp_path):
    """No training step logged (MAX_UPDATE below LOG_INTERVAL): the last validation says how far it went."""
    from biofairseq.recipe.report import _pretraining_lines, pretraining

    run_dir, _ = run
    folder = tmp_path / "pretrain"
    shutil.copytree(run_dir / "pretrain", folder, ignore=shutil.ignore_patterns("checkpoints", "tensorboard"))
    log = folder / "train.log"
    steps = lambda line: '"num_updates"' in line and "valid_loss" not in line  # best_checkpoint.records' train_inner
    log.write_text("".join(line for line in log.read_text().splitlines(True) if not steps(line)))
    p = pretraining(folder)
    assert p["train"] == [] and p["updates"] == p["validations"][-1]["update"] == 20
    assert "`bio_roberta_tiny`, masked LM, 20 updates." in _pretraining_lines(p, "pretrain")[0]


def test_the_report_plots_every_model_and_its_twin_on_one_axis(run):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from biofairseq.finetune.report import collect, plot_dev_f1

    run_dir, _ = run
    groups, _ = collect(sorted((run_dir / "ner" / "pharmaconer").glob("model=*")))
    fig, ax = plt.subplots()
    plot_dev_f1(ax, "pharmaconer", groups)
    labels = [text.get_text() for text in ax.get_legend().get_texts()]
    plt.close(fig)
    assert labels == ["model=bsc_bio_es, lr 0.001", "model=random_init, lr 0.001"]


PILOT = {"SOURCES": f"cases={EXAMPLES / 'clinical_cases.jsonl.gz'}", "NER_DATA": f"pharmaconer={EXAMPLES / 'pharmaconer'}",
         "NUM_GPUS": "0", "PRESET": "pilot", "STOP_AFTER": "settings"}
# what every recipe's pilot shares: the schedule of the measured masked-LM pilot and one NER setting, fixed before any run
PILOT_SHARED = {"VALID_DOCS": "100", "VOCAB_SIZE": "8000", "TOKENS_PER_SAMPLE": "128", "SEQUENCES_PER_UPDATE": "64",
                "WARMUP_UPDATES": "250", "FAST_PATH": "1", "PRECISION": "bf16", "NER_LRS": "1e-3", "NER_SEEDS": "1,2,3",
                "NER_EPOCHS": "10", "NER_MAX_LENGTH": "128", "NER_BATCH": "32", "NER_WARMUP_RATIO": "0.1",
                "NER_LAYERWISE_DECAY": "1", "NER_EXTRA": "", "BASELINE": "random-init", "WEAK_PRETRAINING": "continue"}
PILOTS = {  # recipe: what its pilot sets of its own
    "bsc_bio_es": {"ARCH": "bio_roberta_tiny", "PEAK_LR": "1e-3", "MAX_UPDATE": "5000", "CLIP_NORM": "0.0"},
    "beto": {"ARCH": "bio_roberta_tiny", "PEAK_LR": "1e-3", "MAX_UPDATE": "5000", "PHASE2_SHARE": "0",
             "WEIGHT_DECAY_EXCLUDE": "norm_and_bias"},
    "biomegatron": {"ARCH": "bio_megatron_tiny", "VOCAB_SIZES": "8000", "NER_LABELLINGS": "whole-word", "MAX_UPDATE": "5000"},
    "bio_lm": {"BASE_ARCH": "bio_roberta_tiny", "LARGE_ARCH": "bio_roberta_small", "BASE_LR": "1e-3", "MAX_UPDATE": "5000",
               "LARGE_MAX_UPDATE": "5000", "DISTIL_UPDATES": "1000"},
    "bioelectra": {"ARCH": "electra_tiny", "PHASE2_SHARE": "0", "EMBEDDING_SHARING": "tied", "MAX_UPDATE": "3000",
                   "PEAK_LR": "5e-4", "SAMPLING_TEMPERATURE": "2", "GENERATOR_FRACTION": "0.25",
                   "WEIGHT_DECAY_EXCLUDE": "norm_and_bias"},
    "modernbert": {"ARCH": "bio_modernbert_tiny", "PEAK_LR": "1e-3", "MAX_UPDATE": "3300", "WARMUP_UPDATES": "165",
                   "MASK_PROB": "0.3", "PHASE2_SHARE": "0", "WEIGHT_DECAY_EXCLUDE": "norm_and_bias"},
}


@pytest.mark.fast
@pytest.mark.parametrize("name", PILOTS)
def test_every_recipe_has_a_pilot_with_the_shared_schedule_and_ner_settings(name, tmp_path):
    """STOP_AFTER=settings prints the resolved settings and does nothing else."""
    proc = recipe(tmp_path / "run", script=REPO / "recipes" / f"{name}.sh", **PILOT)
    settings = dict(line.split("=", 1) for line in proc.stdout.splitlines())
    assert settings["RECIPE"] == name and settings["PRESET"] == "pilot"
    assert {k: settings[k] for k in {**PILOT_SHARED, **PILOTS[name]}} == {**PILOT_SHARED, **PILOTS[name]}
    assert proc.stderr.strip().endswith("STOP_AFTER=settings: stopped before any work") and not (tmp_path / "run").exists()


@pytest.mark.fast
@pytest.mark.parametrize("name", PILOTS)
def test_a_pilot_needs_the_users_corpus_and_ner_data(name, tmp_path):
    proc = recipe(tmp_path / "run", check=False, script=REPO / "recipes" / f"{name}.sh", PRESET="pilot", NUM_GPUS="0")
    assert proc.returncode == 1 and f"{name}.sh: error: PRESET=pilot needs SOURCES=" in proc.stderr.strip().splitlines()[-1]
