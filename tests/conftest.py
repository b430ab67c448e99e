import json
import os
import socket
import subprocess
import sys

# Nothing in the tests may reach the network: transformers and huggingface_hub read these at import.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import pytest  # noqa: E402

from corpus import BIN, CLINICAL_CASES, REPO, build_corpus  # noqa: E402


def pytest_configure(config):
    if not CLINICAL_CASES.is_file():
        raise pytest.UsageError(f"{CLINICAL_CASES}: real data missing; set BIOFAIRSEQ_SHARED to the shared/ folder")


@pytest.fixture(scope="session")
def bytebpe_corpus(tmp_path_factory):
    return build_corpus(tmp_path_factory.mktemp("bytebpe"), "bytebpe")


@pytest.fixture(scope="session")
def spm_corpus(tmp_path_factory):
    # Large enough a vocabulary that numbers get digit-only pieces ("10", "200", "1000") of their own.
    return build_corpus(tmp_path_factory.mktemp("sentencepiece"), "sentencepiece", train_docs=300, vocab_size=6000)


TINY = [
    "--user-dir", "biofairseq", "--task", "document_mlm", "--criterion", "masked_lm_accuracy",
    "--arch", "bio_roberta_tiny", "--tokens-per-sample", "128", "--batch-size", "16",
    "--optimizer", "adam", "--adam-betas", "(0.9,0.98)", "--adam-eps", "1e-6", "--weight-decay", "0.01",
    "--lr", "1e-3", "--lr-scheduler", "polynomial_decay", "--warmup-updates", "10",
    "--cpu", "--num-workers", "0", "--seed", "1", "--log-format", "json", "--log-interval", "1",
    "--no-epoch-checkpoints",
]


def bpe_flags(data_bin):
    """What the README and the recipe add to fairseq-train: the data-bin's BPE, recorded in every checkpoint."""
    out = subprocess.run([sys.executable, "-m", "biofairseq.bpe_flags", str(data_bin)], capture_output=True, text=True, check=True)
    return out.stdout.split("\n")[:-1]


@pytest.fixture(scope="session")
def trained_bytebpe(bytebpe_corpus, tmp_path_factory):
    """(save dir, fairseq's log): the session's one trained byte-level BPE model, 3 epochs with validation."""
    save_dir = tmp_path_factory.mktemp("trained")
    proc = run_fairseq(
        "fairseq-train", bytebpe_corpus.data_bin, *TINY, "--max-epoch", "3", "--total-num-update", "204",
        "--save-dir", save_dir, *bpe_flags(bytebpe_corpus.data_bin),
    )
    return save_dir, proc.stdout + proc.stderr


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_fairseq(command, *args, cwd=REPO, check=True):
    """Runs a fairseq console script (fairseq-train, fairseq-validate) of this environment."""
    proc = subprocess.run(
        [str(BIN / command), *map(str, args)], cwd=cwd, capture_output=True, text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"},
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"{command} failed ({proc.returncode}):\n{proc.stderr[-4000:]}\n{proc.stdout[-2000:]}")
    return proc


def json_logs(output, tag):
    """fairseq --log-format json records whose line carries ``| tag |``, as dicts."""
    records = []
    for line in output.splitlines():
        if f"| {tag} |" in line:
            records.append(json.loads(line[line.index("{"):]))
    return records
