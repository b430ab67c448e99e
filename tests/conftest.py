import json
import os
import socket
import subprocess

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
    return build_corpus(tmp_path_factory.mktemp("sentencepiece"), "sentencepiece")


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
