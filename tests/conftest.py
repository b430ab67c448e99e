import fcntl
import json
import os
import pickle
import socket
import subprocess

# Nothing in the tests may reach the network: transformers and huggingface_hub read these at import.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
# One thread per pytest-xdist worker: the workers already fill the cores, and torch's default (a thread per core) in
# each made the in-process tests wait on each other (the subprocesses the tests start get OMP_NUM_THREADS=1 too).
if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ["OMP_NUM_THREADS"] = "1"

import pytest  # noqa: E402

import command_server  # noqa: E402
import inprocess  # noqa: E402
from biofairseq.bpe_flags import flags as bpe_flags  # noqa: E402  (what `python -m biofairseq.bpe_flags` prints)
from biofairseq.dev.samples import BIN, REPO, build_corpus  # noqa: E402


@pytest.fixture(scope="session")
def once(tmp_path_factory, worker_id):
    """once(name, build): build(folder) made by one pytest-xdist worker and read by the others (xdist's recipe for
    session fixtures), so that the session's corpora and trained model are made once per run, not per worker.
    What it returns must pickle; the tests only read what it made."""

    def get(name, build):
        if worker_id == "master":  # no xdist: this process is the session
            return build(tmp_path_factory.mktemp(name))
        root = tmp_path_factory.getbasetemp().parent / "shared"  # one folder per run, beside the workers' own
        root.mkdir(exist_ok=True)
        with open(root / f"{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # the other worker waits here while this one builds
            made = root / f"{name}.pickle"
            if not made.is_file():
                (root / name).mkdir()
                made.write_bytes(pickle.dumps(build(root / name)))
            return pickle.loads(made.read_bytes())

    return get


@pytest.fixture(scope="session")
def bytebpe_corpus(once):
    return once("bytebpe", lambda folder: build_corpus(folder, "bytebpe", run=command_server.script))


@pytest.fixture(scope="session")
def spm_corpus(once):
    # Large enough a vocabulary that numbers get digit-only pieces ("10", "200", "1000") of their own.
    return once("sentencepiece", lambda folder: build_corpus(folder, "sentencepiece", train_docs=300, vocab_size=6000,
                                                                run=command_server.script))


@pytest.fixture(scope="session")
def standins(once):
    """{family: folder} of tiny published-family stand-ins made offline (biofairseq.dev.samples.standin), on one cased
    WordPiece vocabulary learned from the sample: bert, bert-pretraining, megatron-bert, electra (with its generator),
    electra-discriminator (without) and bert-headless (a BertModel, tokenizer.json alone)."""
    from biofairseq.dev.samples import read_documents, standin, wordpiece_vocab

    def build(folder):
        vocab = wordpiece_vocab(folder / "vocab.txt", [p for doc in read_documents(0, 300) for p in doc])
        return {family: standin(family, folder / family, vocab)
                for family in ("bert", "bert-pretraining", "megatron-bert", "electra", "electra-discriminator",
                                                                  "bert-headless")}

    return once("standins", build)


TINY = [
    "--user-dir", "biofairseq", "--task", "document_mlm", "--criterion", "masked_lm_accuracy",
    "--arch", "bio_roberta_tiny", "--tokens-per-sample", "128", "--batch-size", "16",
    "--optimizer", "adam", "--adam-betas", "(0.9,0.98)", "--adam-eps", "1e-6", "--weight-decay", "0.01",
    "--lr", "1e-3", "--lr-scheduler", "polynomial_decay", "--warmup-updates", "10",
    "--cpu", "--num-workers", "0", "--seed", "1", "--log-format", "json", "--log-interval", "1",
    "--no-epoch-checkpoints",
]


@pytest.fixture(autouse=True)
def fast_tests_start_no_process(request, monkeypatch):
    """A test marked fast runs in this process: a process of its own (seconds of imports) would not fit the edit-test
    loop's minute. Forks (a pool's workers) are not processes started anew and pass, and so does matplotlib's fc-list,
    which lists the machine's fonts once, into its cache, at the first plot on a machine."""
    if request.node.get_closest_marker("fast"):
        execute_child = subprocess.Popen._execute_child

        def refuse(self, args, *rest, **kwargs):
            if list(args)[:1] == ["fc-list"]:
                return execute_child(self, args, *rest, **kwargs)
            raise AssertionError(f"a test marked fast starts a process ({args}): run it in-process (tests/inprocess.py) "
                                 "or drop the mark")
        monkeypatch.setattr(subprocess.Popen, "_execute_child", refuse)


@pytest.fixture(scope="session")
def trained_bytebpe(bytebpe_corpus, once):
    """(save dir, fairseq's log): the session's one trained byte-level BPE model, 102 updates (1.5 epochs), validated
    and saved every 34, by biofairseq-train (the recipes' trainer)."""

    def train(save_dir):
        proc = inprocess.run(
            "biofairseq-train", bytebpe_corpus.data_bin, *TINY, "--max-update", "102", "--total-num-update", "102",
            "--validate-interval-updates", "34", "--save-interval-updates", "34", "--keep-interval-updates", "1",
            "--save-dir", save_dir, *bpe_flags(bytebpe_corpus.data_bin), cwd=REPO,
        )
        return save_dir, proc.stdout + proc.stderr

    return once("trained", train)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train_two_processes(*args, cwd=REPO, command="fairseq-train", both=False):
    """fairseq-train (or biofairseq-train) as two CPU ranks (gloo, legacy DDP), one process each: rank 0's output (both
    ranks' with both=True), both having succeeded."""
    port = free_port()
    ranks = [
        subprocess.Popen(
            [str(BIN / command), *map(str, args), "--distributed-world-size", "2", "--distributed-rank", str(rank),
             "--distributed-no-spawn", "--distributed-init-method", f"tcp://127.0.0.1:{port}",
             "--distributed-backend", "gloo", "--ddp-backend", "legacy_ddp"],
            cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        for rank in range(2)
    ]
    outputs = [p.communicate(timeout=300)[0] for p in ranks]
    assert [p.returncode for p in ranks] == [0, 0], outputs[0][-3000:]
    return outputs if both else outputs[0]


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


# Test files by their time on 2 cores, longest first (from make test's --durations). pytest-xdist (--dist loadfile
# --no-loadscope-reorder) hands whole files to the workers in this order as each finishes; longest first keeps the two
# workers' loads even. Every test file is listed (test_package.py checks it).
LONGEST_FIRST = (
    "test_corpus_preparation.py", "test_convert.py", "test_electra.py", "test_recipe.py", "test_pretrain_speed.py",
    "test_recipe_modernbert.py", "test_training.py", "test_recipe_bio_lm.py", "test_fast_path.py",
    "test_recipe_biomegatron.py", "test_recipe_continued.py", "test_journey_english.py", "test_ner.py", "test_package.py", "test_distillation.py", "test_recipe_bioelectra.py",
    "test_kill_anywhere.py", "test_corpus_boundaries.py", "test_masking.py", "test_recipe_beto.py",
    "test_modernbert.py", "test_dedup_bound.py", "test_presets.py", "test_quick_starts.py", "test_electra_convert.py",
    "test_families.py", "test_packing.py", "test_cleaning_identical.py", "test_host_syncs.py", "test_document_blocks.py",
    "test_earlier_checkpoints.py", "test_index_cache.py", "test_mistakes.py", "test_recipe_settings.py", "test_docs.py",
    "test_recipe_inputs.py", "test_langid_mixture.py", "test_ner_formats.py", "test_vocab_extension.py",
)


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONGEST_FIRST)))  # stable within a file
