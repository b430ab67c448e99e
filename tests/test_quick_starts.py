"""The README's quick starts as a new user runs them: the printed command lines, read from the README itself, run one
after another from a working folder outside the repository, on the user's own files given by relative paths (the
scripts of the clone by absolute ones). The Python command lines run in this process, split into words as bash splits
them; those that need a shell (bash scripts, $(...), environment prefixes) run in bash. They are scaled to a small
slice of the bundled sample through documented flags only (``SCALE``), and each ends as the README says it does."""

import gzip
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile

import pytest

import command_server
import inprocess
from biofairseq.dev.samples import BIN, CLINICAL_CASES, PHARMACONER, REPO

README = REPO / "README.md"

# flag -> the value that fits the slice and a few seconds; nothing else of a command is changed
SCALE = {
    "--valid-docs": "5", "--vocab-size": "1000", "--batch-size": "8", "--max-update": "4", "--total-num-update": "4",
    "--warmup-updates": "1", "--validate-interval-updates": "2", "--save-interval-updates": "2",
    "--lrs": "1e-3", "--seeds": "1", "--epochs": "1",
}
IN_PROCESS = ("python", "biofairseq-train", "biofairseq-convert", "biofairseq-ner")
NEEDS_SHELL = re.compile(r"^bash |^[A-Z_][A-Z0-9_]*=|\$\(|`|[|;&<>]")


def quick_start_blocks(title):
    """The bash blocks of the README's section ``### title``, each as its list of command lines (continuations joined)."""
    text = README.read_text(encoding="utf-8")
    section = re.search(rf"^### {re.escape(title)}\n(.*?)(?=^##)", text, re.M | re.S)
    assert section, f"README: no section '### {title}'"
    blocks = re.findall(r"```bash\n(.*?)```", section.group(1), re.S)
    return [[line for line in block.replace("\\\n", " ").splitlines() if line.strip() and not line.startswith("#")]
            for block in blocks]


def scaled(line):
    """The command line with SCALE's flags set to their scaled values and the clone's scripts named absolutely."""
    words = re.split(r"(\s+)", line)  # keeps the spacing, so that quoting and $(...) survive untouched
    for i, word in enumerate(words):
        if word in SCALE and i + 2 < len(words):
            words[i + 2] = SCALE[word]
        elif re.match(r"(preprocess|recipes)/\S+\.(py|sh)$", word):
            words[i] = str(REPO / word)
    return "".join(words)


def run(line, cwd):
    """The command line from cwd: a Python one in this process (inprocess.run), one that needs a shell in bash, the
    commands it starts served by this process (tests/command_server.py)."""
    words = shlex.split(line)
    if words[0] in IN_PROCESS and not NEEDS_SHELL.search(line):
        return inprocess.run(*words, cwd=cwd)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "OMP_NUM_THREADS": "1",
           "PYTHONWARNINGS": "ignore"}
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        code = command_server.run(["bash", "-c", line], env, out, err, cwd=cwd)
        out.seek(0)
        err.seek(0)
        proc = subprocess.CompletedProcess(line, code, out.read(), err.read())
    assert proc.returncode == 0, f"{line}\nfailed ({proc.returncode}):\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """The user's folder: raw notes (100 clinical cases, gzipped JSON lines: the pilot preset holds out 100 documents,
    and the settings step asks for at least as many to train on), NER data in BRAT folders, notes to tag."""
    work = tmp_path_factory.mktemp("user")
    (work / "raw").mkdir()
    with gzip.open(CLINICAL_CASES, "rt", encoding="utf-8", newline="\n") as f:
        lines = [next(f) for _ in range(100)]
    with gzip.open(work / "raw" / "notes.jsonl.gz", "wt", encoding="utf-8", newline="\n") as f:
        f.writelines(lines)
    for split, count in (("train", 4), ("valid", 2), ("test", 2)):
        (work / "data" / "pharmaconer" / split).mkdir(parents=True)
        for txt in sorted((PHARMACONER / split).glob("*.txt"))[:count]:
            shutil.copy(txt, work / "data" / "pharmaconer" / split)
            shutil.copy(txt.with_suffix(".ann"), work / "data" / "pharmaconer" / split)
    (work / "notes").mkdir()
    for txt in sorted((PHARMACONER / "test").glob("*.txt"))[-2:]:
        shutil.copy(txt, work / "notes")
    return work


@pytest.fixture(scope="module")
def pretrained(workdir):
    """The one-command-at-a-time pretraining block, as printed (scaled), in the user's folder."""
    blocks = quick_start_blocks("Pretrain on your own corpus")
    steps = next(block for block in blocks if any(line.startswith("biofairseq-train") for line in block)
                 and any("clean_corpus.py" in line for line in block))
    assert "--fp16" not in " ".join(steps), "the quick start that runs on a CPU must not ask for --fp16"
    for line in steps:
        run(scaled(line), workdir)
    return workdir


def test_pretraining_block_runs_as_printed_from_a_folder_of_ones_own(pretrained):
    assert (pretrained / "clean" / "train.txt").is_file() and (pretrained / "data-bin" / "dict.txt").is_file()
    assert (pretrained / "checkpoints" / "checkpoint_best.pt").is_file()
    # the checkpoint names its vocabulary by an absolute path, so that it converts from anywhere
    flags = inprocess.run("python", "-m", "biofairseq.bpe_flags", "data-bin", cwd=pretrained).stdout.split()
    assert all(os.path.isabs(flag) for flag in flags if flag.endswith((".json", ".txt", ".model")))


def test_the_gpu_block_says_it_needs_a_gpu():
    """The paper-size block asks for --fp16; the prose before it says it needs GPUs (on a CPU, --fp16 stops in one
    line: test_mistakes.py)."""
    text = README.read_text(encoding="utf-8")
    block = re.search(r"```bash\n(?:(?!```).)*--fp16(?:(?!```).)*```", text, re.S)
    assert block and "biofairseq-train" in block.group(0)
    assert re.search(r"needs? (a )?GPUs?", text[:block.start()][-600:]), "the prose before it must say it needs a GPU"


@pytest.fixture(scope="module")
def converted(pretrained):
    (block,) = quick_start_blocks("Convert to transformers")
    for line in block:
        run(scaled(line), pretrained)
    return pretrained


def test_conversion_runs_from_the_users_folder_and_writes_a_model_card(converted):
    from huggingface_hub import ModelCard

    folder = converted / "hf" / "my-model"
    assert (folder / "config.json").is_file() and (folder / "tokenizer.json").is_file()
    card = ModelCard.load(folder / "README.md")
    assert "fill-mask" in (card.data.tags or []) + [card.data.pipeline_tag]


def test_ner_sweep_report_and_predict_run_as_printed(converted):
    sweep, predict = quick_start_blocks("Fine-tune and evaluate NER")
    for line in sweep:
        run(scaled(line), converted)
    run_dir = converted / "runs" / "ner" / "pharmaconer" / "model=mine" / "lr=0.001" / "seed=1"
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert "test" in json.dumps(metrics)
    report = (converted / "reports" / "report.md").read_text()
    assert "F1" in report
    for line in predict:
        run(scaled(line), converted)
    tagged = sorted(p.name for p in (converted / "tagged").rglob("*.ann"))
    assert tagged == sorted(p.with_suffix(".ann").name for p in (converted / "notes").glob("*.txt"))


def test_the_recipe_quick_start_checks_its_settings_from_a_folder_of_ones_own(workdir):
    """The recipe line as printed, with the user's relative paths, up to its resolved settings (STOP_AFTER=settings):
    SOURCES and NER_DATA are accepted from where the user stands, and nothing is created."""
    (block,) = [b for b in quick_start_blocks("Pretrain on your own corpus") if "recipes/" in b[0]]
    (line,) = block
    (workdir / "raw" / "cases").mkdir(exist_ok=True)
    shutil.copy(workdir / "raw" / "notes.jsonl.gz", workdir / "raw" / "cases" / "more.jsonl.gz")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PYTHON": str(BIN / "python"),
           "STOP_AFTER": "settings"}
    proc = subprocess.run(["bash", "-c", scaled(line)], cwd=workdir, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "PRESET=pilot" in proc.stdout + proc.stderr
    assert not (workdir / "runs" / "bsc_bio_es").exists()
    words = shlex.split(line)
    assert words[0].startswith("PRESET=")
