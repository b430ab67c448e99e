"""A catalogue of plausible user mistakes across the commands: each ends with a non-zero exit status and one line on
standard error that names the file or setting and the fix, before any work, and leaves no output behind that a
rerun would trip on. Run from a working folder outside the repository, with the user's relative paths.

The Python commands run in this process, as their console scripts call them (their checks come before any model or
worker is started, so one import of torch, fairseq and transformers serves them all); the shell scripts run in bash,
the Python commands they start served by this process too (tests/command_server.py), except a command that names its
interpreter by its path (a Python without the project). docs/development.md lists the catalogue."""

import gzip
import json
import os
import runpy
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import command_server
from test_docs import run_script

from biofairseq.dev.samples import BIN, CLINICAL_CASES, NCBI, PHARMACONER, REPO

CHECKPOINT = REPO / "tests" / "data" / "packed_checkpoint_0" / "checkpoint_1_3.pt"
DATA_BIN = REPO / "tests" / "data" / "packed_checkpoint_0" / "data-bin"
TRAIN = ["--task", "document_mlm", "--criterion", "masked_lm_accuracy", "--arch", "bio_roberta_tiny", "--optimizer", "adam",
         "--lr", "1e-4", "--max-update", "1", "--num-workers", "0", "--save-dir", "checkpoints"]


@dataclass
class Mistake:
    what: str
    command: list  # argv; "{X}" is formatted with the paths of PATHS
    says: str  # a fragment of the one line on stderr (or several, a tuple): the file or setting, and the fix
    leaves: str = None  # an output that must not exist afterwards
    env: dict = None
    cpu_only: bool = False  # a mistake only where torch sees no GPU


PATHS = {"repo": REPO, "python": BIN / "python", "cases": CLINICAL_CASES, "checkpoint": CHECKPOINT, "data_bin": DATA_BIN,
         "pharmaconer": PHARMACONER, "ncbi": NCBI}
CLEAN = ["python", "{repo}/preprocess/clean_corpus.py"]
VOCAB = ["python", "{repo}/preprocess/train_vocab.py"]
RECIPE = ["bash", "{repo}/recipes/bsc_bio_es.sh"]
NER = ["biofairseq-ner", "train"]
SPLITS = ["--train", "{pharmaconer}/train", "--dev", "{pharmaconer}/valid", "--output-dir", "out"]
SETTINGS = {"STOP_AFTER": "settings", "NUM_GPUS": "0", "RUN_DIR": "run"}

MISTAKES = [
    # corpus preparation
    Mistake("a source path that does not exist", [*CLEAN, "--source", "notes=raw/notes.jsonl", "--output-dir", "clean",
                                                  "--lang", "es"], "notes=raw/notes.jsonl: no such file", "clean"),
    Mistake("a language code fastText does not use", [*CLEAN, "--source", "notes={cases}", "--output-dir", "clean",
                                                      "--lang", "spa"], "use --lang es", "clean"),
    Mistake("a language name for a code", [*CLEAN, "--source", "notes={cases}", "--output-dir", "clean", "--lang",
                                           "spanish"], "use --lang es", "clean"),
    Mistake("a source without its name", [*CLEAN, "--source", "{cases}", "--output-dir", "clean", "--lang", "es"],
            "expected NAME=PATH", "clean"),
    Mistake("an empty corpus", [*CLEAN, "--source", "notes=empty.jsonl", "--output-dir", "clean", "--lang", "es"],
            "an empty file", "clean"),
    Mistake("an empty corpus folder", [*CLEAN, "--source", "notes=empty", "--output-dir", "clean", "--lang", "es"],
            "an empty folder", "clean"),
    Mistake("no workers", [*CLEAN, "--source", "notes={cases}", "--output-dir", "clean", "--lang", "es", "--workers", "0"],
            "--workers", "clean"),
    Mistake("job arrays where Slurm is not", [*CLEAN, "--source", "notes={cases}", "--output-dir", "clean", "--lang", "es",
                                               "--launcher", "slurm"], "--launcher slurm: sbatch not found", "clean"),
    Mistake("an output folder that is a file", [*CLEAN, "--source", "notes={cases}", "--output-dir", "a_file.txt",
                                                "--lang", "es"], "an existing file, not a folder"),
    Mistake("a flag meant for another command", [*CLEAN, "--source", "notes={cases}", "--output-dir", "clean", "--lang",
                                                 "es", "--vocab-size", "8000"], "--vocab-size", "clean"),
    Mistake("the vocabulary from raw text", [*VOCAB, "--input", "{cases}", "--output-dir", "vocab"],
            "a compressed file, not cleaned text", "vocab"),
    Mistake("the vocabulary from a folder", [*VOCAB, "--input", "empty", "--output-dir", "vocab"], "a folder", "vocab"),
    Mistake("the vocabulary from a missing file", [*VOCAB, "--input", "clean/train.txt", "--output-dir", "vocab"],
            "clean/train.txt: missing or empty; run preprocess/clean_corpus.py first", "vocab"),
    Mistake("NER columns as pretraining text", [*CLEAN, "--source", "notes=ner.tsv", "--output-dir", "clean", "--lang", "en"],
            ("notes=ner.tsv: CoNLL/IOB columns", "NER data goes to biofairseq-ner"), "clean"),
    Mistake("BRAT annotations as pretraining text", [*CLEAN, "--source", "notes=doc.ann", "--output-dir", "clean", "--lang",
                                                     "es"], ("notes=doc.ann: a BRAT annotation file", "give the .txt"), "clean"),
    Mistake("JSON lines without a text field", [*CLEAN, "--source", "notes=notes.jsonl", "--output-dir", "clean", "--lang",
                                                "en"], ('without a "text" string field (its first line has: id, body)',
                                                        "--text-field NAME"), "clean"),
    Mistake("a PDF as pretraining text", [*CLEAN, "--source", "notes=paper.txt", "--output-dir", "clean", "--lang", "en"],
            ("notes=paper.txt: a PDF, not text", "convert it to UTF-8 text"), "clean"),
    Mistake("a document a line read as one document", [*CLEAN, "--source", "notes=lines.txt", "--output-dir", "clean",
                                                       "--lang", "en"], ("no blank line, so one document", "--text-docs line"),
            "clean"),
    Mistake("a language without spaces and the word filter", [*CLEAN, "--source", "notes={cases}", "--output-dir", "clean",
                                                              "--lang", "zh"], "give --min-words 0", "clean"),
    Mistake("a vocabulary larger than the corpus allows", [*VOCAB, "--input", "lines.txt", "--type", "sentencepiece",
                                                           "--vocab-size", "8000", "--output-dir", "vocab"],
            ("--vocab-size 8000: lines.txt allows a SentencePiece unigram vocabulary of at most", "VOCAB_SIZE"), "vocab"),
    Mistake("a preprocess script without the environment", ["bash", "-c", "{python} -S {repo}/preprocess/clean_corpus.py "
                                                            "--source notes={cases} --output-dir clean --lang es"],
            "biofairseq not found; run 'make install' and 'source .venv/bin/activate'", "clean"),
    Mistake("binarizing a missing folder", ["bash", "{repo}/preprocess/binarize.sh", "clean", "vocab", "data-bin"],
            "clean: no such folder", "data-bin"),
    # the recipes
    Mistake("an unknown preset", RECIPE, "PRESET=gpu: unknown", "run", {**SETTINGS, "PRESET": "gpu"}),
    Mistake("the corpus stages as job arrays where Slurm is not", RECIPE, "CORPUS_LAUNCHER=slurm: sbatch not found", "run",
            {**SETTINGS, "STOP_AFTER": "binarize", "CORPUS_LAUNCHER": "slurm"}),
    Mistake("an NER folder without a valid split", RECIPE, "has no valid (or dev, devel) split", "run",
            {**SETTINGS, "NER_DATA": "pharmaconer=ner_no_valid"}),
    Mistake("an NER folder that does not exist", RECIPE, "no such folder", "run",
            {**SETTINGS, "NER_DATA": "pharmaconer=data/pharmaconer"}),
    Mistake("a source that does not exist", RECIPE, "SOURCES=notes=raw/notes.jsonl.gz: 'notes=raw/notes.jsonl.gz'", "run",
            {**SETTINGS, "SOURCES": "notes=raw/notes.jsonl.gz"}),
    Mistake("a corpus language the cleaning does not know", ["bash", "{repo}/recipes/beto.sh"], "use CORPUS_LANG=es", "run",
            {**SETTINGS, "CORPUS_LANG": "spanish"}),
    Mistake("a recipe run with sh", ["sh", "{repo}/recipes/bsc_bio_es.sh"], ("a bash script; run it with bash: bash ", "recipes/bsc_bio_es.sh"),
            "run", SETTINGS),
    Mistake("NER columns as a recipe's corpus", RECIPE, ("SOURCES: 'notes=ner.tsv': CoNLL/IOB columns", "NER_DATA"), "run",
            {**SETTINGS, "SOURCES": "notes=ner.tsv", "CORPUS_LANG": "en"}),
    Mistake("a document a line in a recipe's corpus", RECIPE, "give TEXT_DOCS=line", "run",
            {**SETTINGS, "SOURCES": "notes=lines.txt", "CORPUS_LANG": "en"}),
    Mistake("more validation documents than the corpus holds", RECIPE,
            ("VALID_DOCS=50, but SOURCES hold 5 documents", "give VALID_DOCS=1 (a tenth)"), "run",
            {**SETTINGS, "SOURCES": "notes=raw/cases.jsonl"}),
    Mistake("a stage to redo that the recipes do not have", RECIPE,
            "FORCE=train: unknown; use one of: 0 1 clean vocabulary binarize pretrain convert ner report", "run",
            {**SETTINGS, "FORCE": "train"}),
    Mistake("a corpus language written without spaces", RECIPE, "CORPUS_LANG=zh: written without spaces", "run",
            {**SETTINGS, "CORPUS_LANG": "zh"}),
    Mistake("a model whose vocabulary does not know the corpus language", RECIPE,
            ("INIT_FROM=hf/english-bert: its vocabulary leaves 90% of the tokens of the corpus's start unknown ([UNK]), so it cannot serve CORPUS_LANG=el"),
            "run", {**SETTINGS, "SOURCES": "notes=greek.txt", "CORPUS_LANG": "el", "INIT_FROM": "hf/english-bert"}),
    Mistake("a model folder without its tokenizer to continue", RECIPE, "hf/my-model: no tokenizer in the folder", "run",
            {**SETTINGS, "INIT_FROM": "hf/my-model"}),
    Mistake("English text with a Spanish recipe's default language", RECIPE,
            ("SOURCES: 'notes=lines.txt': 100 of its first 100 documents are identified as en", "set CORPUS_LANG=en"), "run",
            {**SETTINGS, "SOURCES": "notes=lines.txt", "TEXT_DOCS": "line"}),
    Mistake("a recipe's NER test set of another data set's types", RECIPE,
            ("NER_DATA: 'ner=ner_mixed': ner_mixed/test.tsv: test entity types never seen in training: Disease",
             "add --allow-unseen-types to NER_EXTRA"), "run", {**SETTINGS, "NER_DATA": "ner=ner_mixed"}),
    Mistake("English NER data for a model of Spanish text", RECIPE,
            ("NER_DATA: 'ncbi=ncbi': its training text is identified as en, not CORPUS_LANG=es", "CORPUS_LANG=en)"), "run",
            {**SETTINGS, "NER_DATA": "ncbi=ncbi"}),
    Mistake("the tiny preset's sample under another language", RECIPE,
            ("SOURCES is PRESET=tiny's es sample", "give your corpus, SOURCES=NAME=PATH"), "run",
            {**SETTINGS, "CORPUS_LANG": "en", "NER_DATA": ""}),
    Mistake("the tiny preset's NER data under another language", RECIPE,
            ("NER_DATA is PRESET=tiny's es data", "NER_DATA= to pretrain and convert only"), "run",
            {**SETTINGS, "CORPUS_LANG": "en", "SOURCES": "notes=lines.txt", "TEXT_DOCS": "line"}),
    Mistake("a model folder whose tokenizer transformers cannot load", RECIPE,
            "INIT_FROM=hf/odd: transformers cannot load its tokenizer", "run", {**SETTINGS, "INIT_FROM": "hf/odd"}),
    Mistake("a model of a family no recipe continues", RECIPE, ("INIT_FROM=hf/alien: a no_such_model_type model",
                                                                "from-hf converts the families"), "run",
            {**SETTINGS, "INIT_FROM": "hf/alien"}),
    Mistake("CoNLL splits named .txt", RECIPE, ("ncbi_txt/dev.txt: a split as a .txt file", "name a CoNLL file dev.conll, "
                                                ".tsv or .bio"), "run", {**SETTINGS, "NER_DATA": "ncbi=ncbi_txt"}),
    Mistake("a folder of CoNLL files as a recipe's corpus", RECIPE, ("SOURCES: 'notes=ncbi': a folder of CoNLL files",
                                                                     "NER_DATA"), "run", {**SETTINGS, "SOURCES": "notes=ncbi"}),
    Mistake("a quoted ~ in a path", RECIPE, "~ is not expanded inside quotes or after NAME=: write $HOME", "run",
            {**SETTINGS, "SOURCES": "notes=~/raw/notes.txt"}),
    Mistake("sources separated by a comma", RECIPE, "separate NAME=PATH pairs with spaces, not commas", "run",
            {**SETTINGS, "SOURCES": "a=raw/cases.jsonl,b=raw/cases.jsonl"}),
    # a run, not STOP_AFTER=settings (a preview may be made on a machine without the GPUs); a corpus that stops the
    # cleaning at once, should the check not come first
    Mistake("GPUs this machine does not have", RECIPE, ("NUM_GPUS=1: torch sees 0 GPU(s) here", "NUM_GPUS=0"), "run",
            {"RUN_DIR": "run", "NUM_GPUS": "1", "SOURCES": "notes=raw/cases.jsonl", "NER_DATA": ""}, cpu_only=True),
    Mistake("a GPU preset without a GPU", RECIPE, ("PRESET=one_gpu is for GPUs, and torch sees none", "NUM_GPUS=0"), "run",
            {"RUN_DIR": "run", "PRESET": "one_gpu", "SOURCES": "notes=raw/cases.jsonl", "NER_DATA": ""}, cpu_only=True),
    Mistake("a mistyped setting", RECIPE, "MAX_UPDATE", "run", {**SETTINGS, "MAX_UPDATE": "5k"}),
    # pretraining
    Mistake("--fp16 without a GPU", ["biofairseq-train", "{data_bin}", *TRAIN, "--fp16"],
            ("--fp16 needs a CUDA GPU", "drop --fp16 (fp32), or give --memory-efficient-fp16", "CUDA build of torch"),
            "checkpoints", cpu_only=True),
    Mistake("--bf16 without a GPU", ["biofairseq-train", "{data_bin}", *TRAIN, "--bf16"], "--bf16 needs a CUDA GPU",
            "checkpoints", cpu_only=True),
    Mistake("a data-bin that does not exist", ["biofairseq-train", "data-bin", *TRAIN], "data-bin: no such data-bin folder",
            "checkpoints"),
    Mistake("a folder that is not a data-bin", ["biofairseq-train", "empty", *TRAIN], "empty: no dict.txt", "checkpoints"),
    Mistake("a masked-LM task without its criterion",
            ["biofairseq-train", "{data_bin}", *(t for t in TRAIN if t not in ("--criterion", "masked_lm_accuracy"))],
            ("--criterion cross_entropy (fairseq-train's default): not a loss for --task document_mlm's batches",
             "use --criterion masked_lm_accuracy"), "checkpoints"),
    Mistake("a checkpoint to restore that does not exist", ["biofairseq-train", "{data_bin}", *TRAIN, "--restore-file",
                                                            "checkpoints/checkpoint_best.pt"], "no such checkpoint file",
            "checkpoints"),
    Mistake("BPE flags of a folder without a vocabulary", ["python", "-m", "biofairseq.bpe_flags", "empty"], "empty"),
    Mistake("BPE flags of a folder that does not exist", ["python", "-m", "biofairseq.bpe_flags", "data-bin"],
            "data-bin: no such folder; give the data-bin of preprocess/binarize.sh"),
    # conversion
    Mistake("a checkpoint that does not exist", ["biofairseq-convert", "to-hf", "checkpoints/checkpoint_best.pt", "converted"],
            "no such checkpoint file", "converted"),
    Mistake("a text file as a checkpoint", ["biofairseq-convert", "to-hf", "a_file.txt", "converted"], "not a PyTorch checkpoint",
            "converted"),
    Mistake("a folder as a checkpoint", ["biofairseq-convert", "to-hf", "empty", "converted"], "give the checkpoint file in it",
            "converted"),
    Mistake("an existing output folder", ["biofairseq-convert", "to-hf", "{checkpoint}", "existing"],
            "already exists; choose another output or pass --overwrite"),
    Mistake("a folder that is not a transformers model", ["biofairseq-convert", "from-hf", "empty", "fairseq"],
            "empty: no config.json", "fairseq"),
    Mistake("a flag of the other direction", ["biofairseq-convert", "from-hf", "empty", "fairseq", "--language", "es"],
            "--language", "fairseq"),
    Mistake("a model of a family from-hf does not convert", ["biofairseq-convert", "from-hf", "hf/alien", "fairseq"],
            ("hf/alien: a no_such_model_type model", "from-hf converts the families", "BERT (bert)"), "fairseq"),
    Mistake("a model folder without its tokenizer", ["biofairseq-convert", "from-hf", "hf/no-tokenizer", "fairseq"],
            ("hf/no-tokenizer: no tokenizer", "tokenizer.json", "tokenizer.save_pretrained"), "fairseq"),
    # NER
    Mistake("a model folder that is not a model", [*NER, "--model", "empty", *SPLITS], "a folder without config.json",
            "out"),
    Mistake("a model whose tokenizer has no special tokens", [*NER, "--model", "hf/bare-tokenizer", *SPLITS],
            ("--model hf/bare-tokenizer: its tokenizer has no padding token", "save the model's own tokenizer"), "out"),
    Mistake("a Hub model id without network", [*NER, "--model", "PlanTL-GOB-ES/bsc-bio-es", *SPLITS],
            ("--model PlanTL-GOB-ES/bsc-bio-es", "HF_HUB_OFFLINE"), "out", {"HF_HUB_OFFLINE": "1"}),
    Mistake("NER data that does not exist", ["biofairseq-ner", "sweep", "--model", "hf/my-model", "--train",
                                             "pharmaconer/train", "--dev", "{pharmaconer}/valid", "--output-dir", "out"],
            "pharmaconer/train: no such file or folder", "out"),
    Mistake("a data set's folder for its train split", [*NER, "--model", "hf/my-model", "--train", "{pharmaconer}",
                                                        "--dev", "{pharmaconer}/valid", "--output-dir", "out"],
            "holds the splits train/, valid/, test/", "out"),
    Mistake("a BRAT annotation file alone", [*NER, "--model", "hf/my-model", "--train", "{pharmaconer}/train/"
                                             "S0004-06142005000900013-1.ann", "--dev", "{pharmaconer}/valid",
                                             "--output-dir", "out"], "a BRAT annotation file alone", "out"),
    Mistake("a file of the wrong kind as NER data", [*NER, "--model", "hf/my-model", "--train", "{pharmaconer}/LICENSE",
                                                     "--dev", "{pharmaconer}/valid", "--output-dir", "out"],
            "not NER data", "out"),
    Mistake("a flag of another sub-command", [*NER, "--model", "hf/my-model", *SPLITS, "--lrs", "1e-3"],
            "--lrs is a flag of 'biofairseq-ner sweep'", "out"),
    Mistake("learning rates that are not numbers", ["biofairseq-ner", "sweep", "--model", "hf/my-model", *SPLITS,
                                                    "--lrs", "1e-3,x"], "'x' in '1e-3,x' is not a number", "out"),
    Mistake("zero epochs", [*NER, "--model", "hf/my-model", *SPLITS, "--epochs", "0"], "--epochs 0", "out"),
    Mistake("an existing output folder for predictions", ["biofairseq-ner", "predict", "--model", "hf/my-model",
                                                          "--input", "{pharmaconer}/valid", "--output-dir", "existing"],
            "--output-dir existing: already exists"),
    Mistake("a report of a folder without runs", ["biofairseq-ner", "report", "empty"], "empty: no finished run"),
    Mistake("an NER test set of another data set's types", [*NER, "--model", "hf/my-model", *SPLITS, "--test",
                                                           "{ncbi}/test.tsv"],
            ("test entity types never seen in training: Disease", "--allow-unseen-types"), "out"),
    Mistake("a sweep folder as the model to tag with", ["biofairseq-ner", "predict", "--model", "sweep", "--input",
                                                        "{pharmaconer}/valid", "--output-dir", "tagged"],
            ("--model sweep: a biofairseq-ner sweep folder", "sweep/lr=5e-05/seed=1/model"), "tagged"),
    Mistake("a CoNLL file named as text", ["biofairseq-ner", "convert", "{pharmaconer}/valid", "valid.txt"],
            ".conll, .tsv or .bio", "valid.txt"),
]


def formatted(command):
    return [part.format(**PATHS) for part in command]


def run_python(argv, env):
    """argv run in this process as its console script or `python ...` runs it: its exit status (what it printed is
    the test's to capture)."""
    from biofairseq import commands

    entry = {"biofairseq-train": commands.train, "biofairseq-convert": commands.convert, "biofairseq-ner": commands.ner}
    saved = sys.argv, dict(os.environ)
    os.environ.update(env or {})
    try:
        if argv[0] in entry:
            sys.argv = argv
            code = entry[argv[0]]()
        elif argv[1] == "-m":
            sys.argv = argv[2:]
            runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
            code = 0
        else:
            run_script(Path(argv[1]), *argv[2:])
            code = 0
    except SystemExit as exit:
        code = exit.code
    finally:
        sys.argv = saved[0]
        os.environ.clear()
        os.environ.update(saved[1])
    if isinstance(code, str):  # sys.exit("message"): the interpreter prints it on stderr, status 1
        print(code, file=sys.stderr)
        code = 1
    return code or 0


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A user's working folder, outside the repository, with the files the mistakes name."""
    work = tmp_path_factory.mktemp("mistakes")
    (work / "empty.jsonl").write_text("")
    (work / "empty").mkdir()
    (work / "a_file.txt").write_text("not a checkpoint, not a folder\n")
    (work / "existing").mkdir()
    (work / "existing" / "config.json").write_text("{}")
    for split in ("train", "test"):
        shutil.copytree(PHARMACONER / split, work / "ner_no_valid" / split)
    (work / "hf" / "my-model").mkdir(parents=True)  # as far as a model is looked at before the data are
    (work / "hf" / "my-model" / "config.json").write_text('{"model_type": "roberta"}')
    (work / "sweep" / "lr=5e-05" / "seed=1" / "model").mkdir(parents=True)  # a biofairseq-ner sweep's folder of runs
    (work / "sweep" / "lr=5e-05" / "seed=1" / "model" / "config.json").write_text('{"model_type": "roberta"}')
    (work / "ner.tsv").write_text((REPO / "tests" / "data" / "ncbi_disease" / "train.tsv").read_text()[:3000])
    (work / "doc.ann").write_text("T1\tNORMALIZABLES 10 19\tbleomicina\nT2\tPROTEINAS 40 43\tPSA\n")
    (work / "notes.jsonl").write_text('{"id": 1, "body": "Patient with fever."}\n')
    (work / "paper.txt").write_bytes(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n")
    (work / "lines.txt").write_text("".join(f"Sentence {i} of an abstract about disease {i % 7}.\n" for i in range(120)))
    (work / "greek.txt").write_text("Ο ασθενής παρουσίασε πυρετό και βήχα για τρεις ημέρες.\n" * 20)
    (work / "hf" / "english-bert").mkdir(parents=True)
    (work / "hf" / "english-bert" / "config.json").write_text('{"model_type": "bert"}')
    (work / "hf" / "english-bert" / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                                                                        *"abcdefghijklmnopqrstuvwxyz.,"]) + "\n")
    (work / "hf" / "odd").mkdir(parents=True)  # a BERT whose tokenizer file is not one
    (work / "hf" / "odd" / "config.json").write_text('{"model_type": "bert", "architectures": ["BertForMaskedLM"]}')
    (work / "hf" / "odd" / "tokenizer.json").write_text("{not json")
    bare = work / "hf" / "bare-tokenizer"  # a RoBERTa whose tokenizer.json is its BPE alone: no <s>, </s>, <pad>
    bare.mkdir(parents=True)
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = json.loads((DATA_BIN / "vocab.json").read_text(encoding="utf-8"))
    merges = [tuple(line.split()) for line in (DATA_BIN / "merges.txt").read_text(encoding="utf-8").splitlines()[1:] if line]
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(vocab, merges))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    PreTrainedTokenizerFast(tokenizer_object=tokenizer).save_pretrained(bare)
    (bare / "config.json").write_text('{"model_type": "roberta", "architectures": ["RobertaForMaskedLM"]}')
    (work / "hf" / "alien").mkdir(parents=True)  # a model type transformers does not know
    (work / "hf" / "alien" / "config.json").write_text('{"model_type": "no_such_model_type"}')
    (work / "ncbi").symlink_to(NCBI, target_is_directory=True)
    (work / "ncbi_txt").mkdir()  # CoNLL files named as text
    for split, name in (("train", "train"), ("devel", "dev")):
        shutil.copy(NCBI / f"{split}.tsv", work / "ncbi_txt" / f"{name}.txt")
    (work / "ner_mixed").mkdir()  # links to PharmaCoNER's train and valid, and NCBI-disease's test
    for split in ("train", "valid"):
        (work / "ner_mixed" / split).symlink_to(PHARMACONER / split, target_is_directory=True)
    (work / "ner_mixed" / "test.tsv").symlink_to(NCBI / "test.tsv")
    (work / "raw").mkdir()
    with gzip.open(CLINICAL_CASES, "rb") as f:
        (work / "raw" / "cases.jsonl").write_bytes(b"".join(next(f) for _ in range(5)))
    tiny_roberta(work / "hf")
    return work


def tiny_roberta(folder, **settings):
    """A tiny model of transformers' default RobertaConfig (layer_norm_eps 1e-12, type_vocab_size 2) but for
    ``settings``, with its tokenizer (the data-bin's 500-token BPE), and the same model saved without one."""
    from transformers import RobertaConfig, RobertaForMaskedLM, RobertaTokenizer

    config = RobertaConfig(vocab_size=500, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                           intermediate_size=64, **settings)
    model = RobertaForMaskedLM(config)
    for name in ("default-roberta", "no-tokenizer"):
        model.save_pretrained(folder / name)
    RobertaTokenizer(str(DATA_BIN / "vocab.json"), str(DATA_BIN / "merges.txt")).save_pretrained(folder / "default-roberta")


@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.what for m in MISTAKES])
def test_a_mistake_ends_in_one_line_that_names_it_and_leaves_nothing(mistake, workdir, capfd, monkeypatch):
    if mistake.cpu_only:
        import torch

        if torch.cuda.is_available():
            pytest.skip("a GPU machine trains with it")
    monkeypatch.chdir(workdir)
    before = sorted(p.name for p in workdir.iterdir())
    argv = formatted(mistake.command)
    if argv[0] in ("bash", "sh"):
        env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PYTHON": str(BIN / "python"),
               **(mistake.env or {})}
        proc = command_server.completed(argv, env, cwd=workdir)  # its Python commands served in this process
        code, err = proc.returncode, proc.stderr
    else:
        code = run_python(argv, mistake.env)
        err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code != 0 and len(lines) == 1, f"exit {code}, stderr:\n{err[-3000:]}"
    says = (mistake.says,) if isinstance(mistake.says, str) else mistake.says
    assert all(fragment in lines[0] for fragment in says), lines[0]
    if mistake.leaves:
        assert not (workdir / mistake.leaves).exists()
    assert sorted(p.name for p in workdir.iterdir()) == before


def test_the_catalogue_is_listed_in_the_docs():
    listed = (REPO / "docs" / "development.md").read_text(encoding="utf-8")
    assert len(MISTAKES) >= 25
    assert [m.what for m in MISTAKES if f"| {m.what} |" not in listed] == []
