"""The package is a cheap, valid fairseq user dir and loads checkpoints only the safe way."""

import json
import os
import subprocess
import sys

from conftest import REPO

MEASURE_IMPORT = """
import json, sys, time
import fairseq.tasks, fairseq.models, fairseq.criterions
before = set(sys.modules)
start = time.perf_counter()
import biofairseq
print(json.dumps({"seconds": time.perf_counter() - start, "added": sorted(set(sys.modules) - before)}))
"""


def test_import_is_cheap_and_pulls_in_no_heavy_library(tmp_path):
    runs = []
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", MEASURE_IMPORT], cwd=tmp_path, capture_output=True, text=True, check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    assert min(r["seconds"] for r in runs) < 0.3
    heavy = {"transformers", "tokenizers", "sklearn", "sentencepiece", "scipy"}
    assert not {m.split(".")[0] for m in runs[0]["added"]} & heavy


def test_corpus_tools_start_without_fairseq_and_registration_follows_it(tmp_path):
    script = (
        "import sys, time; start = time.perf_counter(); import biofairseq.corpus.encode, biofairseq.corpus.vocab; "
        "print(time.perf_counter() - start, 'fairseq' in sys.modules); "
        "from fairseq.tasks import TASK_REGISTRY; print('document_mlm' in TASK_REGISTRY); "
        "biofairseq.corpus.vocab.fairseq_bpe_args(sys.argv[1]); print('document_mlm' in TASK_REGISTRY)"
    )
    vocab = tmp_path / "vocab"
    vocab.mkdir()
    (vocab / "vocab_info.json").write_text(json.dumps({"type": "bytelevel-bpe", "files": {"vocab": "vocab.json", "merges": "merges.txt"}}))
    (vocab / "vocab.json").write_text("{}")
    (vocab / "merges.txt").write_text("")
    out = subprocess.run([sys.executable, "-c", script, str(vocab)], cwd=tmp_path, capture_output=True, text=True, check=True)
    seconds, loaded, before, after = out.stdout.split()
    assert loaded == "False" and float(seconds) < 2  # importing fairseq alone takes about 4 s
    assert (before, after) == ("False", "True")  # the from_pretrained helper registers document_mlm


def test_user_dir_prints_the_installed_package(tmp_path):
    out = subprocess.run([sys.executable, "-m", "biofairseq.user_dir"], cwd=tmp_path, capture_output=True, text=True, check=True)
    path = out.stdout.strip()
    assert os.path.isfile(os.path.join(path, "__init__.py")) and os.path.isdir(os.path.join(path, "tasks"))


def test_weights_only_loading_is_never_switched_off():
    flag = "TORCH_FORCE_NO_WEIGHTS_ONLY" + "_LOAD"  # spelled apart so this file does not match itself
    assert flag not in os.environ
    offenders = []
    for folder in ["biofairseq", "preprocess", "recipes", "examples", "benchmarks", "tests", ".ci"]:
        for root, _, files in os.walk(REPO / folder):
            for name in files:
                path = os.path.join(root, name)
                if name.endswith((".py", ".sh", ".cfg", ".yaml", ".md", "run")):
                    with open(path, encoding="utf-8", errors="ignore") as f:
                        if flag in f.read():
                            offenders.append(path)
    for name in ["Makefile", "setup.py"]:
        if flag in (REPO / name).read_text():
            offenders.append(name)
    assert offenders == []
