"""The package is a cheap, valid fairseq user dir and loads checkpoints only the safe way."""

import os
import subprocess
import sys

import pytest

from biofairseq.dev.samples import REPO


def test_corpus_tools_start_without_fairseq_and_registration_follows_it_without_heavy_libraries(tmp_path):
    """The corpus scripts never import fairseq (4 s); whoever imports it later finds biofairseq registered, and the
    registration pulls in none of the libraries only conversion and NER need."""
    script = (
        "import sys; import biofairseq.corpus.encode, biofairseq.corpus.vocab, biofairseq.corpus.pipeline; "
        "print('fairseq' in sys.modules, 'torch' in sys.modules); "
        "from fairseq.tasks import TASK_REGISTRY; from fairseq import checkpoint_utils; import fairseq.models, fairseq.criterions; "
        "print('document_mlm' in TASK_REGISTRY, getattr(checkpoint_utils.load_checkpoint_to_cpu, 'biofairseq_guarded', False)); "
        "print(*sorted({m.split('.')[0] for m in sys.modules} & {'transformers', 'tokenizers', 'sentencepiece'}))"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.stdout.split("\n") == ["False False", "True True", "", ""], out.stdout


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


@pytest.mark.fast
def test_user_dir_prints_the_installed_package(tmp_path):
    import inprocess

    path = inprocess.run("python", "-m", "biofairseq.user_dir", cwd=tmp_path).stdout.strip()
    assert os.path.isfile(os.path.join(path, "__init__.py")) and os.path.isdir(os.path.join(path, "tasks"))


@pytest.mark.fast
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


# ---- the install: what `pip install .` (and its extras) must bring, read from setup.py without running it

def setup_lists():
    """INSTALL_REQUIRES, EXTRAS and CONSOLE_SCRIPTS as setup.py declares them (literals, read with ast)."""
    import ast

    found = {}
    for node in ast.parse((REPO / "setup.py").read_text()).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id in ("INSTALL_REQUIRES", "EXTRAS", "CONSOLE_SCRIPTS"):
                found[node.targets[0].id] = ast.literal_eval(node.value)
    return found


def requirement_name(requirement):
    import re

    return re.split(r"[<>=!~;\[ ]", requirement, 1)[0].lower().replace("_", "-")


def imported_top_modules(folders):
    """Top-level module -> files, for every import (lazy ones inside functions too) of the .py files in folders."""
    import ast

    found = {}
    for folder in folders:
        for path in sorted((REPO / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else []
                for name in names:
                    found.setdefault(name.split(".")[0], set()).add(str(path.relative_to(REPO)))
    return found


@pytest.mark.fast
def test_every_imported_third_party_module_is_declared_in_setup_py():
    """pip install '.[all]' (and fairseq-fixed, --no-deps) brings every module the package and preprocess/ import."""
    import importlib.metadata

    declared = setup_lists()
    names = {requirement_name(r) for r in declared["INSTALL_REQUIRES"]}
    names |= {requirement_name(r) for extra in declared["EXTRAS"].values() for r in extra}
    distributions = importlib.metadata.packages_distributions()
    undeclared = {}
    for module, files in imported_top_modules(["biofairseq", "preprocess"]).items():
        if module in sys.stdlib_module_names or module in ("biofairseq", "fairseq", "fairseq_cli"):
            continue  # fairseq and fairseq_cli: fairseq-fixed, installed by hand (README)
        dists = {d.lower().replace("_", "-") for d in distributions.get(module, [module])}
        if not dists & names:
            undeclared[module] = sorted(files)[:2]
    assert undeclared == {}
    assert not {"fairseq", "apex"} & names  # fairseq would replace fairseq-fixed; PyPI's apex is another project


@pytest.mark.fast
def test_fairseq_fixed_runtime_requirements_are_ours_and_training_needs_no_extra():
    """fairseq-fixed is installed --no-deps: its requirements (less torchaudio, for its speech tasks only) must be in
    install_requires, with what biofairseq-train imports itself (the data index: xxhash)."""
    import importlib.metadata

    install = {requirement_name(r) for r in setup_lists()["INSTALL_REQUIRES"]}
    fairseq_needs = {requirement_name(r) for r in importlib.metadata.requires("fairseq-fixed") if "extra ==" not in r}
    assert fairseq_needs - {"torchaudio"} - install == set()
    assert {"torch", "xxhash", "tensorboard", "regex", "tokenizers", "sentencepiece"} <= install


BLOCK_FAIRSEQ = """
import importlib, importlib.abc, sys

class NoFairseq(importlib.abc.MetaPathFinder):
    '''This environment without fairseq-fixed: fairseq and fairseq_cli are not found.'''
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('fairseq', 'fairseq_cli'):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoFairseq())
module, function = sys.argv[1].split(':')
sys.argv = [sys.argv[2], *sys.argv[3:]]
sys.exit(getattr(importlib.import_module(module), function)())
"""


def test_a_missing_fairseq_is_one_line_naming_the_install_command(tmp_path):
    """Each console script of setup.py, run as pip's wrapper runs it, in a process where fairseq cannot be imported."""
    scripts = dict(s.split("=") for s in setup_lists()["CONSOLE_SCRIPTS"])
    checkpoint = REPO / "tests" / "data" / "packed_checkpoint_0" / "checkpoint_1_3.pt"
    brat = REPO / "examples" / "data" / "pharmaconer" / "test"
    runs = {
        "biofairseq-train": [str(REPO / "tests" / "data" / "packed_checkpoint_0" / "data-bin"), "--arch", "bio_roberta_tiny"],
        "biofairseq-convert": ["to-hf", str(checkpoint), str(tmp_path / "hf")],
        "biofairseq-ner": ["convert", str(brat), str(tmp_path / "test.conll")],  # needs no fairseq: it runs
    }
    procs = {name: subprocess.Popen([sys.executable, "-c", BLOCK_FAIRSEQ, scripts[name], name, *args], cwd=tmp_path,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name, args in runs.items()}
    results = {name: (p.communicate()[1], p.returncode)[::-1] for name, p in procs.items()}
    for name in ("biofairseq-train", "biofairseq-convert"):
        code, err = results[name]
        assert code == 1 and err.strip().splitlines() == [
            f"{name}: error: fairseq is not installed; install it with: "
            "pip install --no-build-isolation --no-deps fairseq-fixed==0.12.3.1"], err
    assert not (tmp_path / "hf").exists()
    assert results["biofairseq-ner"][0] == 0, results["biofairseq-ner"][1]
    assert (tmp_path / "test.conll").stat().st_size > 0


@pytest.mark.fast
def test_every_test_file_has_its_place_in_the_order_the_workers_take_them():
    from conftest import LONGEST_FIRST

    assert sorted(LONGEST_FIRST) == sorted(p.name for p in (REPO / "tests").glob("test_*.py"))
