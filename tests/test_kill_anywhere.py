"""Kill anywhere, lose nothing (benchmarks/kill_anywhere.py runs the whole recipe; these are its cheap cases): the real
scripts in real processes, SIGKILLed to their whole process group mid-work, then run again to the end."""

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import command_server
import inprocess
from biofairseq.recipe import settings
from biofairseq.recipe.plan import Plan
from recipe_preview import run_records
from biofairseq.dev.samples import BIN, REPO, _write_documents, clinical_lines, kill_group, read_documents

ENV = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PYTHON": sys.executable,
       "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"}
STAGES = REPO / "recipes" / "lib" / "stages.sh"


def start(args):
    """A script of the repository in its own session, its stderr read line by line as it comes."""
    proc = subprocess.Popen(args, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    proc.lines = []
    proc.reader = threading.Thread(target=lambda: proc.lines.extend(proc.stderr), daemon=True)
    proc.reader.start()
    return proc


def kill_when(proc, condition, timeout=120, signal_number=None):
    """SIGKILL to proc's process group as soon as condition() holds (or ``signal_number``, which the group may
    handle); fails if proc ends first."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, f"ended (exit {proc.returncode}) before the kill point:\n{''.join(proc.lines)[-3000:]}"
        assert time.monotonic() < deadline, "the kill point was never reached"
        time.sleep(0.002)
    if signal_number is None:
        kill_group(proc, timeout=5)
    else:
        os.killpg(proc.pid, signal_number)
        proc.wait(30)
    proc.reader.join(10)


def run(args):
    proc = subprocess.run(args, env=ENV, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def tree(folder, skip=()):
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(Path(folder).rglob("*"))
            if p.is_file() and p.name not in skip}


# ---- preprocess/clean_corpus.py

def clean(cases, out):
    return [sys.executable, str(REPO / "preprocess" / "clean_corpus.py"), "--source", f"cases={cases}", "--output-dir",
            str(out), "--lang", "es", "--valid-docs", "10", "--workers", "2", "--shard-size", "4000"]


@pytest.fixture(scope="module")
def cleaned(tmp_path_factory):
    """120 clinical cases cleaned in ~100 shards, uninterrupted: the reference."""
    root = tmp_path_factory.mktemp("clean")
    (root / "cases.jsonl").write_text("".join(clinical_lines(0, 120)), encoding="utf-8")
    inprocess.run("python", *clean(root / "cases.jsonl", root / "reference")[1:], "--quiet")
    return root


def test_clean_corpus_killed_mid_shard_resumes_to_the_same_text(cleaned, tmp_path):
    out = tmp_path / "clean"
    proc = start(clean(cleaned / "cases.jsonl", out))
    shards = out / "work" / "shards" / "cases"

    def some_shards_done():
        plan = out / "work" / "plan.json"
        if not plan.is_file():
            return False
        done = len(list(shards.glob("*.json")))
        return 0 < done < len(json.loads(plan.read_text())["shards"]) - 4 and any(shards.glob("*.tmp"))

    kill_when(proc, some_shards_done)
    assert not (out / "stats.json").exists() and not (out / "train.txt").exists()
    rerun = run(clean(cleaned / "cases.jsonl", out))
    resumed = next(line for line in rerun.stderr.splitlines() if line.startswith("resuming:"))
    assert int(resumed.split()[1]) >= 1, resumed  # "resuming: K of N shards already cleaned"
    reference = tree(cleaned / "reference", skip={"timing.json"})
    assert set(reference) == {"train.txt", "valid.txt", "stats.json"}
    assert tree(out, skip={"timing.json"}) == reference  # the work folder, and every temporary, gone


def test_clean_corpus_interrupted_ends_in_its_own_line_after_its_workers_stop(cleaned, tmp_path):
    """Ctrl-C reaches the whole process group, the pool's workers too: they leave it to the parent, which ends them and
    says in one line what is kept (exit status 130), after its progress bar, not under a traceback per worker."""
    import signal

    out = tmp_path / "clean"
    proc = start(clean(cleaned / "cases.jsonl", out))
    kill_when(proc, lambda: any(out.glob("work/shards/cases/*.json")), signal_number=signal.SIGINT)
    assert proc.returncode == 130
    assert proc.lines[-1].strip() == ("clean_corpus.py: interrupted; finished shards are kept; the same command cleans "
                                      "only the shards left")
    assert not [line for line in proc.lines if "Traceback" in line or "KeyboardInterrupt" in line]


# ---- preprocess/binarize.sh

SHARD_MB = "0.1"  # 2 shards of the 40 documents' encoded text


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Clean text and a vocabulary (preprocess/train_vocab.py) for binarize.sh."""
    root = tmp_path_factory.mktemp("binarize")
    (root / "clean").mkdir()
    _write_documents(root / "clean" / "train.txt", read_documents(0, 40))
    _write_documents(root / "clean" / "valid.txt", read_documents(40, 5))
    inprocess.run("python", REPO / "preprocess" / "train_vocab.py", "--input", root / "clean" / "train.txt",
                  "--type", "bytelevel-bpe", "--vocab-size", "500", "--output-dir", root / "vocab", "--workers", "1")
    return root


def served(args):
    """args run by bash, the Python steps served in this process (tests/command_server.py): what is tested of a run
    that is not killed is what it leaves."""
    proc = command_server.completed(args, ENV)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]


def binarize(root, data_bin):
    return ["bash", str(REPO / "preprocess" / "binarize.sh"), str(root / "clean"), str(root / "vocab"), str(data_bin), "1",
            SHARD_MB]


def test_binarize_killed_mid_encoding_reruns_to_the_same_data_bin_and_leaves_no_temporary(corpus, tmp_path):
    reference = tmp_path / "reference" / "data-bin"
    reference.parent.mkdir()
    served(binarize(corpus, reference))  # uninterrupted
    out = tmp_path / "killed"
    out.mkdir()
    data_bin = out / "data-bin"
    proc = start(binarize(corpus, data_bin))

    def encoding():  # the ranges being encoded into parts, before any shard is assembled
        return any(any((tmp / "parts").glob("train*.bin")) for tmp in out.glob("data-bin.tmp.*"))

    kill_when(proc, encoding)
    assert not data_bin.exists()
    killed = [p.name for p in out.iterdir()]
    # what the rerun must leave alone: a temporary of a live process (this one) and one of another host (it cannot
    # tell whether that process lives: a shared file system)
    others = [f"data-bin.tmp.{os.uname().nodename}.{os.getpid()}", "data-bin.tmp.another-host.1"]
    for name in others:
        (out / name).mkdir()
    served(binarize(corpus, data_bin))  # the rerun
    assert sorted(p.name for p in reference.iterdir()) == ["shard0", "shard1"]
    # preprocess.log names the temporary paths fairseq-preprocess read: not compared
    assert tree(data_bin, skip={"preprocess.log"}) == tree(reference, skip={"preprocess.log"})
    assert sorted(p.name for p in out.iterdir()) == sorted(["data-bin", *others]), killed  # the killed run's is gone


# ---- recipes/lib/stages.sh: what a rerun finds after a kill, stage by stage

def stages(script, **env):
    """bash: script after recipes/lib/stages.sh is sourced, as a recipe sources it; run() prints instead of running."""
    prelude = f"set -euo pipefail; RECIPE=test FORCE=0; source {STAGES}; run() {{ echo \"RUN $*\" >&2; }}\n"
    proc = subprocess.run(["bash", "-c", prelude + script], env={**ENV, **env}, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stderr


def test_a_stage_killed_outright_starts_again_without_its_temporaries(tmp_path):
    # what SIGKILL leaves (benchmarks/kill_anywhere.py found them): train_vocab.py's mkdtemp, biofairseq.atomic's
    # staging folders and temporary files (conversion, the random-init twin, JSON files, reports)
    left = [".vocab.k2j4x9qz", "hf/.bsc_bio_es.tmp-4242", "hf/.random_init.tmp-4243", ".report.md.tmp-4244"]
    kept = ["vocab.txt", ".lock", "hf/other", "pretrain/.check.json.tmp-1"]  # not temporaries; one of a stage done
    for name in left + kept:
        (tmp_path / name).mkdir(parents=True)
    (tmp_path / "pretrain" / "check.json").touch()
    log = stages(f'for out in vocab hf/bsc_bio_es report.md pretrain/check.json; do stage 0 test "{tmp_path}/$out" || true; done')
    assert not [name for name in left if (tmp_path / name).exists()], log
    assert all((tmp_path / name).exists() for name in kept), log


def test_pretraining_killed_after_its_last_checkpoint_is_not_trained_again_and_a_cut_copy_is_mended(tmp_path):
    """biofairseq-train's start (biofairseq.train_inputs), which a recipe's stage 4 runs again after a kill."""
    import torch

    from biofairseq.train_inputs import expand

    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    torch.save({"optimizer_history": [{"num_updates": 20}], "model": torch.zeros(1000)}, checkpoints / "checkpoint_3_20.pt")
    whole = (checkpoints / "checkpoint_3_20.pt").read_bytes()
    # fairseq copies checkpoint_3_20.pt to checkpoint_last.pt in place: a kill mid-copy leaves its first bytes
    (checkpoints / "checkpoint_last.pt").write_bytes(whole[: len(whole) // 2])
    argv, said = ["data", "--save-dir", str(checkpoints)], []
    assert expand(argv, "data", checkpoints, 20, say=said.append) is None  # fairseq would train update 21
    assert (checkpoints / "checkpoint_last.pt").read_bytes() == whole
    assert "at update 20 already" in said[-1]
    said.clear()
    assert expand(argv, "data", checkpoints, 30, say=said.append) == argv  # not yet at the end: resumed, and it says so
    assert said == [f"resuming: {checkpoints}/checkpoint_last.pt is at update 20 of 30"]
    said.clear()
    assert expand(argv, "data", tmp_path / "new", 20, say=said.append) == argv and not said  # no checkpoint: starts


def test_an_interrupt_ends_a_recipe_in_one_line_naming_the_stage_and_the_command_that_resumes(tmp_path):
    """Ctrl-C (SIGINT to the recipe's process group) and a scheduler's SIGTERM, mid-stage: the command running stops
    (here one that only waits), and the recipe ends in one line: the stage it was in, that finished stages are kept and
    the same command resumes; exit status 130 and 143, as a shell reports a signal. A command of ours says what it kept
    in a line of its own (test_training.py)."""
    import signal

    # the signal is sent once the command has started: one that comes between bash's fork and the command's exec can
    # leave bash 5.2 spinning, the child a zombie it never reaps (seen once in 60 tries), and the test out of time
    script = (f"set -euo pipefail; RECIPE=demo; source {STAGES}; stage 4 'pretrain bio_roberta_tiny' {tmp_path}/out && "
              f"run {sys.executable} -c 'import sys, time; print(\"waiting\", file=sys.stderr, flush=True); "
              f"time.sleep(60)'")
    for sig, status in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
        proc = start(["bash", "-c", script])
        kill_when(proc, lambda: "waiting\n" in proc.lines, signal_number=sig)
        assert proc.wait(30) == status
        last = proc.lines[-1].strip()
        assert last.startswith("demo.sh: interrupted in stage 4 (pretrain bio_roberta_tiny); finished stages are kept")
        assert "run the same command again" in last


def test_a_sweep_whose_report_was_cut_short_or_whose_model_changed_is_run_again(tmp_path):
    """Stage 7 is done when the sweep's report is whole and of the model's current weights (model.sha256); a model
    pretrained again (its weights changed, as FORCE=1 makes them) has its sweep run again, the other model's not."""
    from biofairseq.finetune.fingerprint import weights_sha256

    models = {name: tmp_path / name for name in ("m", "twin")}
    for name, model in models.items():
        model.mkdir()
        (model / "model.safetensors").write_bytes(name.encode())
        sweep = tmp_path / "ner" / "pharmaconer" / f"model={name}"
        sweep.mkdir(parents=True)
        (sweep / "model.sha256").write_text(weights_sha256(model) + "\n")
        for report in ("report.json", "report.md", "dev_f1.png"):
            (sweep / report).write_text("x")
    sweep = tmp_path / "ner" / "pharmaconer" / "model=m"
    run, _ = settings.prepare("bsc_bio_es", {"NUM_GPUS": "0", "STOP_AFTER": "settings", "RUN_DIR": str(tmp_path),
                                             "NER_LRS": "1e-3", "NER_SEEDS": "1", "NER_EPOCHS": "1"}, REPO, "test.sh",
                              say=lambda line: None)

    def stages(seeds="1"):
        run.ner_sets, run.values["NER_SEEDS"] = [("pharmaconer", "t", "d", "")], seeds
        plan = Plan(run, stop_after="none")
        plan.ner(list(models.values()))
        proc = run_records(plan, tmp_path, ENV)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stderr

    assert "RUN" not in stages()  # whole reports of these models: done
    (sweep / "dev_f1.png").unlink()  # report.md and dev_f1.png come after report.json: killed in between
    log = stages()
    assert "its report was cut short" in log and log.count("RUN biofairseq-ner sweep") == 1, log
    assert not (sweep / "report.json").exists()
    (sweep / "report.json").write_text("x")
    (sweep / "dev_f1.png").write_text("x")
    (models["m"] / "model.safetensors").write_bytes(b"pretrained again")
    log = stages()
    assert f"{models['m']} changed since {sweep} was run" in log and log.count("RUN biofairseq-ner sweep") == 1, log
    assert f"--model {models['m']} " in log
    # NER_SEEDS grown (or shrunk) since: both sweeps run again, keeping their finished runs (the sweep's to skip)
    (sweep / "report.json").write_text("x")
    (sweep / "model.sha256").write_text(weights_sha256(models["m"]) + "\n")
    for name in models:
        (tmp_path / "ner" / "pharmaconer" / f"model={name}" / "grid.json").write_text('["lr=0.001/seed=1"]')
    assert "RUN" not in stages()
    log = stages("1,2")
    assert log.count("another grid of learning rates and seeds is asked for") == 2, log
    assert log.count("RUN biofairseq-ner sweep") == 2 and "--seeds 1,2 " in log, log


# ---- biofairseq/finetune/training.py

def test_a_checkpoint_cut_short_is_dropped_before_a_run_resumes(tmp_path):
    """transformers writes checkpoint-N in place, trainer_state.json last; killed while saving, the run left one without
    it (benchmarks/kill_anywhere.py: an empty checkpoint-4), and resuming from it failed at every rerun ("Can't find a
    valid checkpoint"). biofairseq-ner train (and so each run of a sweep) removes it; a complete checkpoint stays."""
    from transformers.trainer_utils import get_last_checkpoint

    from biofairseq.finetune import training

    checkpoints = tmp_path / "checkpoints"
    (checkpoints / "checkpoint-2").mkdir(parents=True)
    (checkpoints / "checkpoint-2" / "trainer_state.json").write_text('{"global_step": 2}')
    (checkpoints / "checkpoint-4").mkdir()  # being saved at the kill
    (checkpoints / "checkpoint-6").mkdir()
    (checkpoints / "checkpoint-6" / "trainer_state.json").write_text('{"global_')  # cut mid-write
    said = []
    training.drop_cut_checkpoints(checkpoints, said.append)
    assert sorted(p.name for p in checkpoints.iterdir()) == ["checkpoint-2"] and len(said) == 2
    assert get_last_checkpoint(str(checkpoints)).endswith("checkpoint-2")


def test_an_interrupted_run_under_force_says_to_resume_without_it():
    """'Run the same command again' with FORCE=ner in it would remove what the interrupted run had made."""
    proc = subprocess.run(["bash", "-c", f"RECIPE=test; source {STAGES}; FORCE=ner STAGE_NOW='7 (fine-tune)'; on_interrupt 130"],
                          env=ENV, capture_output=True, text=True)
    assert proc.returncode == 130 and proc.stderr.strip().startswith("test.sh: interrupted in stage 7 (fine-tune); ")
    assert "run the same command again without FORCE=ner [" in proc.stderr
