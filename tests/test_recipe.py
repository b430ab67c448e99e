"""recipes/bsc_bio_es.sh end to end on a slice of the bundled sample: every stage, on CPU, with the real tools.

The sample is shrunk (fewer documents, fewer updates and epochs), not the stages: cleaning, BPE, binarizing,
fairseq-train --task document_mlm, the best checkpoint, conversion, the random-init baseline, the NER sweep
and the report all run.
"""

import gzip
import json
import os
import shlex
import shutil
import subprocess

import pytest

from corpus import BIN, REPO

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
    with gzip.open(EXAMPLES / "clinical_cases.jsonl.gz", "rt", encoding="utf-8", newline="\n") as f:
        lines = f.readlines()[:120]
    (root / "cases.jsonl").write_text("".join(lines), encoding="utf-8")
    for split, count in (("train", 8), ("valid", 4), ("test", 4)):
        (root / "ner" / split).mkdir(parents=True)
        for txt in sorted((EXAMPLES / "pharmaconer" / split).glob("*.txt"))[:count]:
            for path in (txt, txt.with_suffix(".ann")):
                shutil.copy(path, root / "ner" / split)
    return {"SOURCES": f"cases={root / 'cases.jsonl'}", "NER_DATA": f"pharmaconer={root / 'ner'}", **SMALL}


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
    changed = recipe(run_dir, **{**sample, "NER_EPOCHS": "3"})
    assert "settings differ from" in changed.stderr and "NER_EPOCHS=3" in changed.stderr


@pytest.mark.parametrize("variables, message", [
    ({"PRESET": "paper"}, "PRESET=paper needs SOURCES="),
    ({"PRESET": "one_gpu"}, "PRESET=one_gpu needs SOURCES="),
    ({"PRESET": "huge"}, "PRESET=huge: unknown; use PRESET=tiny, PRESET=one_gpu or PRESET=paper"),
    ({"FAST_PATH": "yes"}, "FAST_PATH=yes: unknown; use one of: 0 1"),
    ({"NER_DATA": "pharmaconer"}, "NER_DATA: 'pharmaconer': give NAME=DIR"),
    ({"SEQUENCES_PER_UPDATE": "48", "BATCH_PER_DEVICE": "32"}, "SEQUENCES_PER_UPDATE=48 is not a multiple of 1 device(s) x BATCH_PER_DEVICE=32"),
    ({"BASELINE": "randominit"}, "BASELINE=randominit: unknown; use one of: random-init none"),
    ({"PRECISION": "fp8"}, "PRECISION=fp8: unknown; use one of: fp16 bf16"),
    ({"NER_EPOCHS": "ten"}, "NER_EPOCHS=ten: not a number"),
    ({"NER_LRS": "5e-5;1e-4"}, "NER_LRS=5e-5;1e-4: give comma-separated numbers"),
    ({"MAX_UPDATE": "0"}, "MAX_UPDATE=0: must be at least 1"),
])
def test_mistakes_stop_with_one_line_before_any_work(variables, message, tmp_path):
    proc = recipe(tmp_path / "run", check=False, NUM_GPUS="0", **variables)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1].startswith("bsc_bio_es.sh: error: ") and message in proc.stderr
    assert not (tmp_path / "run" / "clean").exists()
