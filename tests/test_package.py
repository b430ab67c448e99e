"""The package is a cheap, valid fairseq user dir and loads checkpoints only the safe way."""

import json
import os
import subprocess
import sys

import pytest

from biofairseq.samples import REPO

pytestmark = pytest.mark.fast  # make test-fast

MEASURE_IMPORT = """
import json, sys
import fairseq.tasks, fairseq.models, fairseq.criterions
before = set(sys.modules)
import biofairseq
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def test_import_pulls_in_no_heavy_library(tmp_path):
    out = subprocess.run([sys.executable, "-c", MEASURE_IMPORT], cwd=tmp_path, capture_output=True, text=True, check=True)
    added = {m.split(".")[0] for m in json.loads(out.stdout.strip().splitlines()[-1])}
    assert "biofairseq" in added
    assert not added & {"transformers", "tokenizers", "sklearn", "sentencepiece", "scipy"}


def test_corpus_tools_start_without_fairseq_and_registration_follows_it(tmp_path):
    """The corpus scripts never import fairseq (4 s); whoever imports it later finds biofairseq registered."""
    script = (
        "import sys; import biofairseq.corpus.encode, biofairseq.corpus.vocab, biofairseq.corpus.pipeline; "
        "print('fairseq' in sys.modules, 'torch' in sys.modules); "
        "from fairseq.tasks import TASK_REGISTRY; from fairseq import checkpoint_utils; "
        "print('document_mlm' in TASK_REGISTRY, getattr(checkpoint_utils.load_checkpoint_to_cpu, 'biofairseq_guarded', False))"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False", "True", "True"]


# Modules whose import loads fairseq from inside a biofairseq import: the registration it triggers must wait for that
# import to finish (the two that once failed: a dataset the criterions import, and a criterion).
FIRST_IMPORTS = ["biofairseq.data.packing", "biofairseq.criterions.electra"]


def test_any_module_imports_first_in_a_fresh_process(tmp_path):
    check = ("import importlib, sys; importlib.import_module(sys.argv[1]); "
             "from fairseq.tasks import TASK_REGISTRY; from fairseq.models import ARCH_MODEL_REGISTRY; "
             "print('document_mlm' in TASK_REGISTRY, 'electra_tiny' in ARCH_MODEL_REGISTRY)")
    procs = {m: subprocess.Popen([sys.executable, "-c", check, m], cwd=tmp_path, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for m in FIRST_IMPORTS}
    results = {m: p.communicate() for m, p in procs.items()}
    failed = {m: err.strip().splitlines()[-1] for m, (out, err) in results.items() if out.split() != ["True", "True"]}
    assert not failed


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
