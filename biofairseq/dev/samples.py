"""Small real corpora, data-bins and models built from the data the repository ships (NOTICE): what the tests and
the benchmarks build on, from a clone (``pip install -e .``, as ``make`` installs it).

The vocabularies and data-bins come from the preprocess/ scripts; each token also gets the whitespace word
it came from (by character offsets), so masking can be checked against the text. Models, tasks and criteria are
built in this process as fairseq-train builds them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional

if TYPE_CHECKING:
    from fairseq.criterions import FairseqCriterion
    from fairseq.models import BaseFairseqModel
    from fairseq.tasks import FairseqTask
    from fairseq.trainer import Trainer
    from omegaconf import DictConfig

    from biofairseq.corpus.vocab import Encoder

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]
# the demo's sample: 1,000 clinical case reports (JSON lines), 100 / 40 / 40 PharmaCoNER documents (BRAT)
CLINICAL_CASES = REPO / "examples" / "data" / "clinical_cases.jsonl.gz"
PHARMACONER = REPO / "examples" / "data" / "pharmaconer"
# the tests' own excerpts: NCBI-disease's first 300 / 300 / 200 sentences (CoNLL), its next 1,000 training sentences
# as English pretraining text (a sentence a line), and the PharmaCoNER training document whose official offsets
# disagree with its text
NCBI = REPO / "tests" / "data" / "ncbi_disease"
NCBI_TEXT = REPO / "tests" / "data" / "ncbi_disease_text" / "sentences.txt"
PHARMACONER_MISALIGNED = REPO / "tests" / "data" / "pharmaconer_misaligned"


def clinical_lines(first: int, count: int, cases: str | Path = CLINICAL_CASES) -> list[str]:
    """Lines ``first`` to ``first + count`` of the clinical cases (JSON lines, each ending in a newline; compressed or not)."""
    from biofairseq.corpus.sources import open_compressed

    # bytes split at b"\n" only: the texts hold U+2028 and other characters that str.splitlines takes for line ends
    with open_compressed(cases) as f:
        lines = [line.decode("utf-8") for i, line in zip(range(first + count), f) if i >= first]
    if len(lines) < count:
        raise ValueError(f"{cases}: holds fewer than the {first + count} documents asked for; use fewer, or the full "
                         "corpus (benchmarks: BIOFAIRSEQ_SHARED)")
    return lines


def recipe_sample(root: str | Path) -> dict[str, str]:
    """The recipe tests' and benchmarks' slice of the bundled sample in root: 120 clinical cases (cases.jsonl) and
    8/4/4 PharmaCoNER documents (ner/train, valid, test); returns the recipes' SOURCES and NER_DATA for it."""
    import shutil

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    (root / "cases.jsonl").write_text("".join(clinical_lines(0, 120)), encoding="utf-8")
    for split, count in (("train", 8), ("valid", 4), ("test", 4)):
        (root / "ner" / split).mkdir(parents=True)
        for txt in sorted((PHARMACONER / split).glob("*.txt"))[:count]:
            for path in (txt, txt.with_suffix(".ann")):
                shutil.copy(path, root / "ner" / split)
    return {"SOURCES": f"cases={root / 'cases.jsonl'}", "NER_DATA": f"pharmaconer={root / 'ner'}"}


# the recipe tests' and the kill-anywhere benchmark's settings for that slice: a few minutes of the demo's work in
# about a minute
RECIPE_SMALL = {
    "VALID_DOCS": "10", "VOCAB_SIZE": "2000", "MAX_UPDATE": "20", "WARMUP_UPDATES": "10", "SAVE_INTERVAL_UPDATES": "10",
    "LOG_INTERVAL": "5", "NER_LRS": "1e-3", "NER_SEEDS": "1,2", "NER_EPOCHS": "1", "NUM_GPUS": "0",
    "WEAK_PRETRAINING": "continue",  # 20 updates do not beat word frequencies; the check says so and goes on
}


def kill_group(proc: subprocess.Popen, timeout: float = 30) -> None:
    """SIGKILL to the process group proc leads (a Popen started in a session of its own), then waits for proc and
    until none of the group's processes is left (fairseq-preprocess's, a pool's)."""
    import signal
    import time

    pid = proc.pid
    os.killpg(pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.01)
    raise AssertionError(f"process group {pid} alive {timeout} s after SIGKILL")


def read_documents(first: int, count: int, cases: str | Path = CLINICAL_CASES) -> list[list[str]]:
    """Documents of the corpus as lists of non-empty paragraphs (one paragraph per line)."""
    return [[p.strip() for p in json.loads(line)["text"].split("\n") if p.strip()] for line in clinical_lines(first, count, cases)]


@dataclass
class EncodedLine:
    symbols: list  # the strings written to the fairseq-lm text (BPE ids or pieces)
    words: list  # per token: index of the whitespace word it belongs to


@dataclass
class Corpus:
    data_bin: Path
    vocab_type: str
    vocab_file: Path  # vocab.json (bytebpe) or sentencepiece.model
    documents: dict = field(default_factory=dict)  # split -> [[EncodedLine]]


def _word_of_char(text: str) -> list[int]:
    word_of = [-1] * (len(text) + 1)
    for w, m in enumerate(re.finditer(r"\S+", text)):
        for c in range(m.start(), m.end()):
            word_of[c] = w
    nxt = -1
    for c in range(len(text), -1, -1):  # spaces belong to the word that follows them
        if word_of[c] == -1:
            word_of[c] = nxt
        nxt = word_of[c]
    return word_of


def _write_documents(path: str | Path, docs: Iterable[list[str]]) -> None:
    """Cleaned-corpus layout: one paragraph per line, a blank line after each document."""
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join("\n".join(doc) + "\n\n" for doc in docs))


def _encode_with_words(encoder: Encoder, text: str) -> EncodedLine:
    """The symbols encode.py writes for ``text``, with the whitespace word of each token (from offsets)."""
    word_of = _word_of_char(text)
    if encoder.type == "bytelevel-bpe":
        enc = encoder.tok.encode(text)
        return EncodedLine([str(i) for i in enc.ids], [word_of[s] for s, _ in enc.offsets])
    pieces = encoder.sp.encode(text, return_type="proto").pieces
    raw = text.encode("utf-8")
    # sentencepiece offsets are bytes of the input; map them to characters.
    return EncodedLine(
        [p.piece for p in pieces], [word_of[len(raw[: p.begin].decode("utf-8", errors="ignore"))] for p in pieces]
    )


def build_corpus(out_dir: str | Path, vocab_type: str = "bytebpe", train_docs: int = 160, valid_docs: int = 20,
                 vocab_size: int = 2000, cases: str | Path = CLINICAL_CASES,
                 run: Optional[Callable[..., object]] = None) -> Corpus:
    """Real clinical cases -> preprocess/train_vocab.py -> preprocess/binarize.sh -> data-bin. The scripts run as
    run(script, *args) runs them: run_script's processes by default (the tests run them in their own process)."""
    from biofairseq.corpus.vocab import Encoder

    out_dir = Path(out_dir)
    clean = out_dir / "clean"
    clean.mkdir(parents=True, exist_ok=True)
    splits = {"train": read_documents(0, train_docs, cases), "valid": read_documents(train_docs, valid_docs, cases)}
    for split, docs in splits.items():
        _write_documents(clean / f"{split}.txt", docs)
    vocab = out_dir / "vocab"
    kind = "bytelevel-bpe" if vocab_type == "bytebpe" else "sentencepiece"
    run = run or run_script
    run("preprocess/train_vocab.py", "--input", clean / "train.txt", "--type", kind,
        "--vocab-size", vocab_size, "--output-dir", vocab, "--workers", 2)
    corpus = Corpus(out_dir / "data-bin", vocab_type, vocab / ("vocab.json" if kind == "bytelevel-bpe" else "sentencepiece.model"))
    run("preprocess/binarize.sh", clean, vocab, corpus.data_bin, 2)
    encoder = Encoder(vocab)
    for split, docs in splits.items():
        corpus.documents[split] = [[_encode_with_words(encoder, p) for p in doc] for doc in docs]
    return corpus


def script_env() -> dict[str, str]:
    """The environment a preprocess/ script runs in: this environment's tools first on PATH, and its Python."""
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PYTHON": sys.executable, "PYTHONWARNINGS": "ignore"}


def run_script(script: str, *args: object, check: bool = True, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """Runs a preprocess/ script of the repository with this environment's tools on PATH."""
    cmd = ["bash" if script.endswith(".sh") else sys.executable, str(REPO / script), *map(str, args)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=script_env(), **kwargs)
    if check and proc.returncode != 0:
        raise AssertionError(f"{script} failed ({proc.returncode}):\n{proc.stderr[-4000:]}\n{proc.stdout[-2000:]}")
    return proc


def expected_parameters(vocabulary: int, layers: int, width: int, ffn: int, pre_ln: bool, positions: int = 514) -> int:
    """A RoBERTa shape's parameter count, counted by hand (the presets' test and the memory benchmark check against
    it). Token and position tables; per layer Q, K, V, output (weights and biases), two FFN matrices with biases,
    two LayerNorms; one LayerNorm on the embeddings (post-LN) or after the last layer (pre-LN); the LM head's
    dense layer, LayerNorm and output bias (its matrix is the token table)."""
    embeddings = (vocabulary + positions) * width
    layer = 4 * (width * width + width) + 2 * width * ffn + ffn + width + 2 * 2 * width
    head = width * width + width + 2 * width + vocabulary
    return embeddings + layers * layer + 2 * width + head


# ---- in this process, as fairseq-train builds them

_CONFIGS = {}


def fairseq_train_config(data_bin: str | Path, *flags: object) -> DictConfig:
    """The configuration fairseq-train builds from ``DATA_BIN --user-dir biofairseq FLAGS`` (checkpoints.training_config
    is the conversion's, of a document_mlm model). Composing it (fairseq's convert_namespace_to_omegaconf, through
    hydra) takes about 0.4 s, most of building a tiny model, so each is composed once a process and every call gets
    its own copy."""
    import copy
    from argparse import Namespace

    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf, omegaconf_no_object_check
    from omegaconf import open_dict

    from biofairseq.user_dir import USER_DIR

    args = options.parse_args_and_arch(options.get_training_parser(), [str(data_bin), "--user-dir", USER_DIR, *map(str, flags)])
    key = repr(sorted(vars(args).items()))
    if key not in _CONFIGS:
        _CONFIGS[key] = convert_namespace_to_omegaconf(args)
    cfg = copy.deepcopy(_CONFIGS[key])
    with omegaconf_no_object_check(), open_dict(cfg):  # the legacy groups are Namespaces, which deepcopy shares
        for name in list(cfg):
            if isinstance(cfg[name], Namespace):
                cfg[name] = copy.deepcopy(cfg[name])
    return cfg


def _built_in_process(data_bin: str | Path, flags: Iterable[object],
                      split: str) -> tuple[DictConfig, FairseqTask, BaseFairseqModel, FairseqCriterion]:
    """(cfg, task, model, criterion) as fairseq-train builds them from these flags (after --user-dir biofairseq), the
    model seeded with 0, with this split loaded."""
    import torch
    from fairseq import tasks

    cfg = fairseq_train_config(data_bin, *flags)
    task = tasks.setup_task(cfg.task)
    torch.manual_seed(0)
    model = task.build_model(cfg.model)
    task.load_dataset(split)
    return cfg, task, model, task.build_criterion(cfg.criterion)


def build_in_process(data_bin: str | Path, *flags: object) -> tuple[FairseqTask, BaseFairseqModel, FairseqCriterion]:
    """(task, model, criterion) as fairseq-train builds them from these flags, the model seeded with 0, with the
    valid split loaded."""
    return _built_in_process(data_bin, flags, "valid")[1:]


def trainer_in_process(data_bin: str | Path, *flags: object, trainer: Optional[type[Trainer]] = None,
                       split: str = "valid") -> Trainer:
    """A fairseq Trainer (biofairseq-train's MeteredTrainer unless another class is given) around what
    ``build_in_process`` builds, with this split loaded."""
    from biofairseq.train import MeteredTrainer

    return (trainer or MeteredTrainer)(*_built_in_process(data_bin, flags, split))


def valid_batch(task: FairseqTask, start: int = 0, size: int = 8) -> dict[str, Any]:
    dataset = task.dataset("valid")
    return dataset.collater([dataset[i] for i in range(start, start + size)])


# ---- published model families, as tiny stand-ins made offline (tests, benchmarks): their families' real defaults

BERT_SPECIALS = ["[PAD]", *(f"[unused{i}]" for i in range(99)), "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# each stand-in's shape: bio_roberta_tiny's (2 x 128, FFN 512, 2 heads), so that from-hf names a preset
TINY_SHAPE = dict(num_hidden_layers=2, hidden_size=128, num_attention_heads=2, intermediate_size=512)


def wordpiece_vocab(path: str | Path, texts: Iterable[str], size: int = 3000, lowercase: bool = False) -> Path:
    """A WordPiece vocab.txt learned by ``tokenizers`` from texts, in a published BERT folder's layout: [PAD] 0,
    [unused0] to [unused98], [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103, then the learned tokens."""
    from tokenizers import BertWordPieceTokenizer

    learner = BertWordPieceTokenizer(lowercase=lowercase)
    learner.train_from_iterator(texts, vocab_size=size, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
                                show_progress=False)
    learned = [t for t, _ in sorted(learner.get_vocab().items(), key=lambda item: item[1]) if t not in BERT_SPECIALS]
    Path(path).write_text("".join(t + "\n" for t in BERT_SPECIALS + learned), encoding="utf-8")
    return Path(path)


def _perturbed(model, seed):
    """Every weight moved off its initial value (LayerNorms off 1, biases off 0), so that a swapped tensor shows."""
    import torch

    torch.manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.02 * torch.randn_like(parameter))
    return model


def standin(family: str, folder: str | Path, vocab_txt: str | Path, lowercase: bool = False, seed: int = 0,
            strip_accents: Optional[bool] = None, **config: Any) -> Path:
    """A tiny random model of a published family, saved as the hub has it: config.json at the family's defaults
    (LayerNorm epsilon 1e-12, two token types, 512 positions) but for TINY_SHAPE and ``config``, the weights, and the
    tokenizer of ``vocab_txt`` (tokenizer.json, with vocab.txt beside it). family: bert, bert-pretraining,
    megatron-bert, electra (the discriminator, its generator in generator/, one embedding module between them, as
    ELECTRA trains them), electra-discriminator (without a generator) or bert-headless (a BertModel without an MLM
    head and with tokenizer.json alone, as sentence-transformers folders come)."""
    import shutil

    import torch
    import transformers

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(vocab_txt, folder / "vocab.txt")
    size = sum(1 for _ in open(vocab_txt, encoding="utf-8"))
    settings = {**TINY_SHAPE, "vocab_size": size, **config}
    torch.manual_seed(seed)
    if family.startswith("electra"):
        discriminator = _perturbed(transformers.ElectraForPreTraining(
            transformers.ElectraConfig(embedding_size=settings["hidden_size"], **settings)), seed)
        discriminator.save_pretrained(folder)
        if family == "electra":
            width = settings["hidden_size"] // 2
            generator = _perturbed(transformers.ElectraForMaskedLM(transformers.ElectraConfig(**{
                **settings, "embedding_size": settings["hidden_size"], "hidden_size": width,
                "num_attention_heads": max(1, width // 64), "intermediate_size": 4 * width})), seed + 1)
            shared = {k: v for k, v in discriminator.state_dict().items() if k.startswith("electra.embeddings.")}
            generator.load_state_dict(shared, strict=False)
            generator.save_pretrained(folder / "generator")
    else:
        classes = {"bert": ("BertForMaskedLM", "BertConfig"), "bert-pretraining": ("BertForPreTraining", "BertConfig"),
                   "bert-headless": ("BertModel", "BertConfig"),
                   "megatron-bert": ("MegatronBertForMaskedLM", "MegatronBertConfig")}
        model_class, config_class = classes[family]
        model = getattr(transformers, model_class)(getattr(transformers, config_class)(**settings))
        _perturbed(model, seed).save_pretrained(folder)
    # transformers 5 builds BertTokenizerFast(vocab_file=...) of the special tokens alone: load the folder's vocab.txt
    tokenizer = transformers.BertTokenizer.from_pretrained(folder, do_lower_case=lowercase, strip_accents=strip_accents)
    for target in [folder] + ([folder / "generator"] if (folder / "generator").is_dir() else []):
        tokenizer.save_pretrained(target)
        shutil.copyfile(vocab_txt, target / "vocab.txt")
    if family == "bert-headless":
        (folder / "vocab.txt").unlink()
    return folder
