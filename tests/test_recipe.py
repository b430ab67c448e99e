"""recipes/bsc_bio_es.sh end to end on a slice of the bundled sample: every stage, on CPU, with the real tools.

The sample is shrunk (fewer documents, fewer updates and epochs), not the stages: cleaning, BPE, binarizing,
fairseq-train --task document_mlm, the best checkpoint, conversion, the random-init baseline, the NER sweep
and the report all run. bash runs the recipe; the commands it starts run in this process (served: the recipe's
wiring is what is tested; each command's start as a process is test_package.py's and test_mistakes.py's).
"""

import datetime
import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

import command_server
from recipe_preview import run_records

from biofairseq.recipe import settings
from biofairseq.recipe.plan import Plan
from biofairseq.recipe.presets import RECIPES
from biofairseq.dev.samples import BIN, RECIPE_SMALL, REPO, recipe_sample

RECIPE = REPO / "recipes" / "bsc_bio_es.sh"
SMALL = RECIPE_SMALL


def recipe(run_dir, check=True, script=RECIPE, served=False, cwd=REPO, **variables):
    """The recipe run by bash from cwd; served: its commands run in this process (tests/command_server.py), not as
    processes."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PYTHON": str(BIN / "python"),
           "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore", "RUN_DIR": str(run_dir), **variables}
    if served:
        proc = command_server.completed(["bash", script], env, cwd=cwd)
    else:
        proc = subprocess.run(["bash", str(script)], cwd=cwd, env=env, capture_output=True, text=True)
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
    return run_dir, recipe(run_dir, served=True, **sample)


AS_FAIRSEQ = "biofairseq-train: as fairseq-train "


def commands(stderr):
    """The commands the recipe printed, parsed as a shell would; a biofairseq-train command as fairseq got it, where
    biofairseq-train said how it read our folders (its data-bin's shards and --bpe, --init-from's flags)."""
    found = []
    for line in stderr.splitlines():
        if line.startswith("+ "):
            found.append(shlex.split(line[2:]))
        elif line.startswith(AS_FAIRSEQ):
            at = max(i for i, c in enumerate(found) if "biofairseq-train" in c)
            found[at] = ["biofairseq-train", *shlex.split(line[len(AS_FAIRSEQ):])]
    return found


def test_the_preview_script_makes_what_the_recipe_makes(run, sample, tmp_path):
    """STOP_AFTER=settings prints the command of every stage as a bash script; run with the same settings into
    another folder, it makes what the recipe made (the data-bin, every validation, the model's weights, the NER
    scores), and the recipe then finds every stage done."""
    run_dir, _ = run
    other = tmp_path / "tiny"
    preview = recipe(other, STOP_AFTER="settings", **sample)
    assert not other.exists() and preview.stdout.startswith("#!/usr/bin/env bash\n")
    (tmp_path / "run.sh").write_text(preview.stdout)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    proc = command_server.completed(["bash", tmp_path / "run.sh"], env, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name in ("data-bin/train.bin", "data-bin/dict.txt", "hf/bsc_bio_es/model.safetensors", "hf/random_init/model.safetensors"):
        assert (other / name).read_bytes() == (run_dir / name).read_bytes(), name
    def report(folder):  # report.json without its folder and its timings
        def strip(x):
            if isinstance(x, dict):
                return {k: strip(v) for k, v in x.items() if not any(t in k for t in ("second", "minute", "wall"))}
            return [strip(v) for v in x] if isinstance(x, list) else x
        return strip(json.loads((folder / "report.json").read_text().replace(str(folder), "RUN_DIR")))

    ours, its = report(other), report(run_dir)
    assert ours["pretraining"]["validations"] == its["pretraining"]["validations"] and ours["ner"] == its["ner"]
    assert ours == its
    again = recipe(other, served=True, **sample)
    assert again.stderr.count("skipped: ") == 10 and not commands(again.stderr), again.stderr[-3000:]


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
    # the converted model's card carries the corpus language, and the fine-tuned models' cards inherit it
    best = ner[0]["best_on_dev"]
    for card in (run_dir / "hf" / "bsc_bio_es" / "README.md", Path(best["path"]) / "model" / "README.md"):
        assert "\nlanguage:\n- es\n" in card.read_text(encoding="utf-8"), card
    # the report says where the best run on dev is, with its seed, relative to the run's folder
    folder = Path(best["path"]).relative_to(run_dir.resolve())
    assert f"- model=bsc_bio_es: best on dev, lr {best['lr']:g}, seed {best['seed']}: `{folder}/`" in proc.stdout


def test_a_rerun_from_the_inputs_folder_with_fewer_seeds_then_force_ner_keeps_pretraining(run, sample, tmp_path):
    """The same inputs named relative to another working folder are the same settings; a sweep shrunk to one seed
    reports that seed's runs, trained before; FORCE=ner fine-tunes again and leaves the corpus, pretraining and model."""
    run_dir = tmp_path / "tiny"
    shutil.copytree(run[0], run_dir, symlinks=True)
    inputs = Path(sample["SOURCES"].split("=", 1)[1]).parent
    relative = {**sample, "SOURCES": "cases=cases.jsonl", "NER_DATA": "pharmaconer=ner", "NER_SEEDS": "2"}
    proc = recipe(run_dir, served=True, cwd=inputs, **relative)
    assert proc.stderr.count("another grid of learning rates and seeds is asked for") == 2
    assert [c[0] for c in commands(proc.stderr) if c[0].startswith("biofairseq")] == ["biofairseq-ner"] * 2
    assert "NER_SEEDS=2 (was 1,2): the sweep keeps its finished runs" in proc.stderr
    assert proc.stderr.count("finished earlier, skipped") == 2
    ner = json.loads((run_dir / "report.json").read_text())["ner"]["pharmaconer"]
    assert [(s["runs"], s["seeds"]) for s in ner] == [(1, [2]), (1, [2])]
    kept = {p: p.stat().st_mtime_ns for p in (run_dir / "pretrain" / "checkpoints").iterdir()}
    proc = recipe(run_dir, served=True, cwd=inputs, FORCE="ner", **{**relative, "NER_EPOCHS": "2"})
    printed = commands(proc.stderr)
    assert not [c for c in printed if c[0] in ("biofairseq-train", "biofairseq-convert")]
    removed = sorted(Path(c[-1]).name for c in printed if c[0] == "rm")
    assert "ner" in removed and set(removed) <= {"ner", "breakout", "report.md", "report.json", "report.png"}, removed
    assert proc.stderr.count("finished earlier, skipped") == 0 and "NER_EPOCHS=2 (was 1): its stage is redone" in proc.stderr
    assert {p: p.stat().st_mtime_ns for p in (run_dir / "pretrain" / "checkpoints").iterdir()} == kept
    metrics = json.loads((run_dir / "ner" / "pharmaconer" / "model=bsc_bio_es" / "lr=0.001" / "seed=2" / "metrics.json").read_text())
    assert [h["epoch"] for h in metrics["history"]][-1] == 2  # trained again, with NER_EPOCHS=2


def test_the_vocabulary_folder_has_the_umasks_mode_like_the_others(run):
    """tempfile.mkdtemp makes its folder 0700, which shut teammates out of a shared run folder's vocabulary."""
    umask = os.umask(0)
    os.umask(umask)
    assert (run[0] / "vocab").stat().st_mode & 0o777 == 0o777 & ~umask


def test_a_rerun_skips_every_finished_stage(run, sample):
    run_dir, _ = run
    report = (run_dir / "report.md").stat().st_mtime_ns
    proc = recipe(run_dir, served=True, **sample)
    assert not commands(proc.stderr)  # nothing ran
    assert proc.stderr.count("skipped: ") == 10  # 8 stages, the random-init baseline and its NER sweep
    assert (run_dir / "report.md").stat().st_mtime_ns == report


@pytest.mark.parametrize("name, value, stage, force", [("VALID_DOCS", "11", "stage 1 (clean the sources)", "clean"),
                                                       ("NER_EPOCHS", "3", "stage 7 (fine-tune on NER)", "ner")])
def test_a_rerun_with_a_setting_that_finished_stages_did_not_use_stops_in_one_line(run, sample, name, value, stage, force):
    run_dir, _ = run
    env = (run_dir / "recipe.env").read_text()
    proc = recipe(run_dir, check=False, served=True, **{**sample, name: value})
    assert proc.returncode == 1 and not commands(proc.stderr)
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"bsc_bio_es.sh: error: {name}={value}, but {stage} already made {run_dir}/")
    assert last.endswith(f"with {name}={sample[name]}; give {name}={sample[name]} to go on, FORCE={force} to redo from "
                         f"{stage.split(' (')[0]} on, or a new RUN_DIR")
    assert (run_dir / "recipe.env").read_text() == env and not (run_dir / "recipe.changes").exists()


def test_a_setting_of_a_stage_not_yet_run_may_change_and_the_report_says_when(run, sample, tmp_path):
    from biofairseq.recipe import report

    run_dir = tmp_path / "tiny"
    run_dir.mkdir()
    for made in ("recipe.env", "clean", "vocab", "data-bin"):  # the corpus stages done, pretraining not started
        (shutil.copytree if (run[0] / made).is_dir() else shutil.copy)(run[0] / made, run_dir / made)
    proc = recipe(run_dir, served=True, **{**sample, "MAX_UPDATE": "30", "STOP_AFTER": "binarize"})
    assert "note: MAX_UPDATE=30 (was 20): no stage made with it has run yet" in proc.stderr
    assert "MAX_UPDATE=30\n" in (run_dir / "recipe.env").read_text()
    (when, name, before, after), = report.settings_changes(run_dir)
    assert (name, before, after) == ("MAX_UPDATE", "20", "30") and when.startswith(str(datetime.date.today()))
    rows = [[cell.strip() for cell in row.split("|")[1:-1]] for row in "\n".join(report.changes_lines(run_dir)).splitlines()]
    assert [when, "MAX_UPDATE", "20", "30"] in rows


def test_stop_after_binarize_ends_before_pretraining(run, sample):
    run_dir, _ = run
    proc = recipe(run_dir, served=True, **sample, STOP_AFTER="binarize")
    assert not commands(proc.stderr) and proc.stderr.count("skipped: ") == 3  # clean, vocabulary, data-bin
    assert proc.stderr.strip().splitlines()[-1].startswith("bsc_bio_es.sh: STOP_AFTER=binarize: stopped after the corpus stages")


SLURM = REPO / "tests" / "slurm"  # stand-ins for Slurm's commands: its variables, local processes


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


def test_the_sbatch_template_previews_its_cluster_run(tmp_path):
    """examples/slurm/bsc_bio_es.sbatch as its header previews it, from a folder of the user's (STOP_AFTER=settings,
    the allocation's variables, CLONE): its settings resolve on 2 machines x 4 GPUs (--gpus-per-node as Slurm gives
    it, TYPE:COUNT) with each machine's cores as WORKERS, and the job's commands come out with the srun line."""
    sample = REPO / "examples" / "data" / "clinical_cases.jsonl.gz"
    environ = {**os.environ, "STOP_AFTER": "settings", "SLURM_JOB_NUM_NODES": "2", "SLURM_CPUS_PER_TASK": "8",
               "SLURM_GPUS_PER_NODE": "h100:4",
               "SOURCES": " ".join(f"c{n}={sample}" for n in range(5)), "NER_DATA": f"pharmaconer={REPO / 'examples' / 'data' / 'pharmaconer'}",
               "RUN_DIR": str(tmp_path / "run"), "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(["bash", str(REPO / "examples" / "slurm" / "bsc_bio_es.sbatch")], cwd=tmp_path,
                          env={**environ, "CLONE": str(REPO)}, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "pretraining on 2 machine(s) x 4 GPU(s), world size 8" in proc.stderr and "note: WORKERS" not in proc.stderr
    assert "\nPRESET=paper\n" in proc.stdout and "WORKERS=8" not in proc.stdout  # recorded: what, not where or how fast
    train = next(shlex.split(line)[1:] for line in proc.stdout.splitlines() if line.startswith("    run srun "))
    assert train[:12] == ["srun", "--nodes", "2", "--ntasks-per-node", "1", "--gpus-per-node", "4", "--cpus-per-task", "8",
                          "--kill-on-bad-exit", "1", "biofairseq-train"]
    assert train[train.index("--distributed-world-size") + 1] == "8" and "--fp16" in train
    assert not (tmp_path / "run").exists()


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

    from biofairseq.finetune.sweep_report import collect, plot_dev_f1

    run_dir, _ = run
    groups, _ = collect(sorted((run_dir / "ner" / "pharmaconer").glob("model=*")))
    fig, ax = plt.subplots()
    plot_dev_f1(ax, "pharmaconer", groups)
    labels = [text.get_text() for text in ax.get_legend().get_texts()]
    plt.close(fig)
    assert labels == ["model=bsc_bio_es, lr 0.001", "model=random_init, lr 0.001"]


@pytest.mark.parametrize("recipe", RECIPES)
def test_bash_stops_in_the_steps_one_line_and_writes_nothing(recipe, tmp_path):
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PYTHON": str(BIN / "python"), "NUM_GPUS": "0",
           "MAX_UPDATE": "08"}
    proc = subprocess.run(["bash", str(REPO / "recipes" / f"{recipe}.sh")], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1 and proc.stderr == f"{recipe}.sh: error: MAX_UPDATE=08: write it without leading zeros, as 8\n"
    assert not any(tmp_path.iterdir())


def test_bash_names_a_missing_tool_before_the_step(tmp_path):
    env = {**os.environ, "PATH": "/usr/bin:/bin", "PYTHON": str(BIN / "python")}
    proc = subprocess.run(["bash", str(REPO / "recipes" / "bsc_bio_es.sh")], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1 and proc.stderr == ("bsc_bio_es.sh: error: biofairseq-train: not found; run 'make install' "
                                                    "and 'source .venv/bin/activate' (or 'make demo'), then run this again\n")


def test_force_removes_every_stage_output_before_the_first_stage_runs(tmp_path):
    """FORCE=1 STOP_AFTER=binarize used to redo stages 1-3 alone and leave the earlier run's pretraining, model and
    report, which the next run (without STOP_AFTER) then skipped to as if they were this run's."""
    made = ["clean", "vocab", "data-bin", "pretrain/finished", "hf/bsc_bio_es", "ner/x", "report.md", "recipe.env"]
    for name in made:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).touch()
    for force, kept in (("ner", ["clean", "data-bin", "hf", "pretrain", "recipe.env", "vocab"]), ("1", ["recipe.env"])):
        run, _ = settings.prepare("bsc_bio_es", {"NUM_GPUS": "0", "RUN_DIR": str(tmp_path), "FORCE": force,
                                                 "STOP_AFTER": "settings"}, REPO, "bsc_bio_es.sh", say=lambda line: None)
        plan = Plan(run, stop_after="none")  # its lines up to the first stage: FORCE's removals
        proc = run_records(plan, tmp_path.parent, {"PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}, fake_run=False)
        assert proc.returncode == 0, proc.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == kept
