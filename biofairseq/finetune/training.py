"""Fine-tuning a linear token-classification head on any transformers encoder, with transformers' ``Trainer``.

What is ours: the data (``data``, ``windows``), evaluation at the word level through the windows, layer-wise
learning-rate decay, length-grouped batches, and an output folder that is complete only when ``metrics.json``
is in it. The rest (optimiser, schedule, fp16/bf16, gradient accumulation, clipping, checkpoints, best-on-dev
selection, resuming) is ``Trainer``'s.
"""

import contextlib
import json
import math
import os
import re
import shutil
import sys
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from biofairseq.arguments import first_line
from biofairseq.atomic import staged_folder, write_text
from biofairseq.finetune import NERFormatError, brat, conll, data, head, iob2, metrics, sweep_folder, windows
from biofairseq.finetune.fingerprint import model_fingerprint

if TYPE_CHECKING:
    import numpy as np
    import torch
    from torch import nn
    from transformers import (EvalPrediction, PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase, Trainer,
                              TrainerCallback, TrainerControl, TrainerState, TrainingArguments)

ROBERTA_POSITIONS = ("roberta", "xlm-roberta", "camembert", "roberta-prelayernorm", "xlm-roberta-xl")


def option(default: Any, help: str, prediction: bool = False, **flag: Any) -> Any:
    """A field of TrainOptions with what its biofairseq-ner flag says (biofairseq.finetune.cli makes the flags from
    them); prediction: predict takes it too."""
    return field(default=default, metadata={"help": help, "prediction": prediction, **flag})


@dataclass
class TrainOptions:
    """Defaults are the bsc-bio-es fine-tuning values (Carrino et al. 2022, Table 4)."""

    lr: float = option(5e-5, "peak learning rate (linear decay to 0)")
    seed: int = option(1, "seed of the head's initialisation and the batch order")
    epochs: float = option(20, "passes over the training set")
    batch_size: int = option(32, "sequences per device and step")
    gradient_accumulation: int = option(2, "steps per update: an update holds batch-size x this sequences (per device)")
    eval_batch_size: int = option(64, "windows per evaluation step", prediction=True)
    weight_decay: float = option(0.0, "AdamW's, on all but LayerNorm weights and biases")
    adam_epsilon: float = option(1e-8, "Adam's epsilon")
    adam_betas: tuple = option((0.9, 0.999), "Adam's two betas, as 0.9,0.999")
    max_grad_norm: float = option(1.0, "gradient clipping (0: none)")
    warmup_ratio: float = option(0.0, "linear warm-up over this share of the updates")
    layerwise_lr_decay: float = option(
        1.0, "ELECTRA's layer-wise decay (BioELECTRA: 0.8): the head at the full learning rate, the last layer at this "
        "squared, each layer below this times less, the embeddings at this ** (layers + 2); 1 turns it off")
    max_length: int = option(512, "sub-tokens per window, special tokens included (capped by the model's positions)",
                             prediction=True)
    window_overlap: int = option(128, "sub-tokens shared by consecutive windows of a sentence longer than --max-length",
                                 prediction=True)
    # document: each BRAT document's sentences as one sequence (data.by_document)
    context: str = option("sentence", "what a window holds: one sentence (cut into windows if longer), or a whole BRAT "
                          "document (its sentences in order, cut into windows of --max-length: up to the model's "
                          "context, e.g. 8192 for ModernBERT)", prediction=True, choices=["sentence", "document"])
    label_scheme: str = option("first-subtoken", "which sub-tokens of a word carry its label in training (prediction "
                               "reads the first)", choices=["first-subtoken", "all-subtokens"])
    # BioMegatron's head options (finetune.head)
    num_fc_layers: int = option(1, "the head: 1, a linear layer (transformers'); 2, Linear + ReLU + Linear "
                                "(BioMegatron's, NeMo's)", choices=[1, 2])
    fc_hidden_size: int = option(0, "width of a 2-layer head's hidden layer (BioMegatron: 512 or 1024; 0: the "
                                 "encoder's width)")
    fc_dropout: float = option(None, "dropout on the encoder's output before the head (BioMegatron: 0.5; default: the "
                               "encoder's hidden dropout)", type=float)
    eval_steps: int = option(0, "evaluate on dev every N updates (0: every epoch)")
    logging_steps: int = option(50, "log the training loss every N updates")
    precision: str = option("auto", "auto: bf16 on GPUs that have it, else fp16 on GPU, fp32 on CPU", prediction=True,
                            choices=["auto", "fp32", "fp16", "bf16"])
    save_model: bool = option(True, "keep metrics and predictions only (default: the best model and its card are saved "
                              "in model/)", flag="--no-save-model")
    keep_checkpoints: bool = option(False, "keep Trainer's checkpoints (optimizer state) after a run")
    allow_unseen_types: bool = option(False, "go on when the dev, test or input data have entity types that training never "
                                      "saw (stopped otherwise: a typo, another data set's types): the model has no label "
                                      "for them, so their gold mentions count as missed; the results name them",
                                      prediction=True)


def load_tokenizer(model_dir: str | Path) -> "PreTrainedTokenizerBase":
    """The model's tokenizer, with a space before every word as RoBERTa saw words inside sentences in pretraining."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(model_dir, add_prefix_space=True)
    except (OSError, ValueError) as error:  # a model folder without its tokenizer's files
        raise NERFormatError(f"--model {model_dir}: its tokenizer does not load ({first_line(error)[:200]}); give a folder with the tokenizer files (biofairseq-convert to-hf writes them)") from None
    if tokenizer.pad_token_id is None:  # a tokenizer.json of the vocabulary alone (no special tokens): batches need one
        raise NERFormatError(f"--model {model_dir}: its tokenizer has no padding token (nor the other special tokens its "
                             "model was pretrained with, <s> </s> or [CLS] [SEP]); save the model's own tokenizer in the "
                             "folder (biofairseq-convert to-hf writes it; tokenizer.save_pretrained of the one it was "
                             "pretrained with)")
    return tokenizer


def position_limit(config: "PretrainedConfig", asked: int) -> int:
    """The longest input the model can embed: RoBERTa-family positions start after the padding index."""
    limit = config.max_position_embeddings
    if config.model_type in ROBERTA_POSITIONS:
        limit -= config.pad_token_id + 1
    return min(asked, limit)


def model_folder(path: str | Path) -> Path:
    """A transformers folder: the given one, or the ``model/`` that ``biofairseq-ner train`` saves."""
    path = Path(path)
    for candidate in (path, path / "model"):
        if (candidate / "config.json").is_file():
            return candidate
    if (path / "metrics.json").is_file():
        raise NERFormatError(f"--model {path}: a run trained with --no-save-model (no model/ folder); give a run that saved its model, or train again without --no-save-model")
    runs = sweep_folder.runs(path)
    if runs:
        raise NERFormatError(f"--model {path}: a biofairseq-ner sweep folder ({len(runs)} run{'s' if len(runs) > 1 else ''}, "
                             f"lr=X/seed=Y), not a model; {sweep_folder.which_model(path, runs)}")
    raise NERFormatError(f"--model {path}: a folder without config.json, not a model; give a transformers model folder (biofairseq-convert to-hf writes one) or a train output folder")


# A Hub id: "name" or "owner/name", letters, digits, "-", "_", "." inside (huggingface_hub's validate_repo_id).
HUB_ID = re.compile(r"[A-Za-z0-9](?:[\w.-]*[A-Za-z0-9])?(?:/[A-Za-z0-9](?:[\w.-]*[A-Za-z0-9])?)?")


def resolve_model(text: str) -> Path | str:
    """What transformers loads for ``--model``: a local folder (a train output folder: its ``model/``), or a Hugging
    Face Hub id, passed to transformers as it is (offline, from the cache). Anything else stops here in one line, before
    a model is loaded or a folder is made."""
    path = Path(text)
    if path.exists():
        if not path.is_dir():
            hint = f" (a fairseq checkpoint: biofairseq-convert to-hf {text} DIR first)" if path.suffix == ".pt" else ""
            raise NERFormatError(f"--model {text}: a file, not a model folder{hint}; give the folder biofairseq-convert to-hf writes, or a Hub id")
        return model_folder(path)
    text = str(text)
    if not HUB_ID.fullmatch(text) or ".." in text or "--" in text:
        raise NERFormatError(f"--model {text}: no such folder; give a transformers model folder (biofairseq-convert to-hf writes one) or a Hub id such as PlanTL-GOB-ES/bsc-bio-es")
    from huggingface_hub import constants
    from transformers.utils import cached_file

    try:
        cached_file(text, "config.json")
    except (OSError, ValueError) as error:
        if constants.HF_HUB_OFFLINE:
            variable = "HF_HUB_OFFLINE" if os.environ.get("HF_HUB_OFFLINE") else "TRANSFORMERS_OFFLINE"
            raise NERFormatError(f"--model {text}: not a local folder, and the Hub cannot be reached ({variable} is set); "
                                 f"download it first (hf download {text}, with network) or give a local folder") from None
        raise NERFormatError(f"--model {text}: not a local folder, and the Hub does not give it ({first_line(error)}); check the id or give a local folder") from None
    return text


def check_options(options: TrainOptions) -> None:
    """One line naming the flag for a value that cannot train: found here, before anything loads."""
    rules = [
        ("lr", options.lr > 0, "a positive learning rate, as 5e-5"),
        ("epochs", options.epochs > 0, "a positive number of epochs"),
        ("batch_size", options.batch_size >= 1, "at least 1"),
        ("gradient_accumulation", options.gradient_accumulation >= 1, "at least 1"),
        ("eval_batch_size", options.eval_batch_size >= 1, "at least 1"),
        ("weight_decay", options.weight_decay >= 0, "0 or more"),
        ("adam_epsilon", options.adam_epsilon > 0, "positive, as 1e-8"),
        ("adam_betas", len(options.adam_betas) == 2 and all(0 <= b < 1 for b in options.adam_betas), "two values in [0, 1), as 0.9,0.999"),
        ("max_grad_norm", options.max_grad_norm >= 0, "0 or more (0: no clipping)"),
        ("warmup_ratio", 0 <= options.warmup_ratio <= 1, "a share of the updates, from 0 to 1"),
        ("layerwise_lr_decay", 0 < options.layerwise_lr_decay <= 1, "in (0, 1] (1: no decay)"),
        ("max_length", options.max_length >= 8, "at least 8 sub-tokens (the special tokens and some words)"),
        ("window_overlap", options.window_overlap >= 0, "0 or more"),
        ("fc_hidden_size", options.fc_hidden_size >= 0, "0 (the encoder's width) or more"),
        ("fc_dropout", options.fc_dropout is None or 0 <= options.fc_dropout < 1, "in [0, 1)"),
        ("eval_steps", options.eval_steps >= 0, "0 (every epoch) or more"),
        ("logging_steps", options.logging_steps >= 1, "at least 1"),
    ]
    for name, ok, rule in rules:
        if not ok:
            value = getattr(options, name)
            value = ",".join(f"{v:g}" for v in value) if isinstance(value, (tuple, list)) else f"{value:g}"
            raise NERFormatError(f"--{name.replace('_', '-')} {value}: must be {rule}")


def check_output_dir(output_dir: str | Path) -> None:
    if Path(output_dir).exists() and not Path(output_dir).is_dir():
        raise NERFormatError(f"--output-dir {output_dir}: a file; give a folder (it is created)")


@contextlib.contextmanager
def created_folder(folder: str | Path, keep: Callable[[], bool] = lambda: False) -> Iterator[Path]:
    """Makes ``folder`` (and its missing parents); an error inside the block removes what it made, unless ``keep()``
    (a checkpoint to resume from), so that a rerun finds nothing half-made in its way."""
    folder = Path(folder)
    top = next((p for p in [*reversed(folder.parents), folder] if not p.exists()), None)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        yield folder
    except BaseException:
        if top is not None and not keep():
            shutil.rmtree(top, ignore_errors=True)
        raise


def stderr(line: str) -> None:
    print(f"biofairseq-ner: {line}", file=sys.stderr, flush=True)


def precision_flags(precision: str) -> tuple[str, dict[str, bool]]:
    import torch

    cuda = torch.cuda.is_available()
    if precision == "auto":
        precision = ("bf16" if torch.cuda.is_bf16_supported() else "fp16") if cuda else "fp32"
    if precision == "fp16" and not cuda:
        raise NERFormatError("--precision fp16: needs a GPU; use --precision fp32 (or bf16) on CPU")
    return precision, {"fp16": precision == "fp16", "bf16": precision == "bf16", "use_cpu": not cuda}


def _trainer_class() -> "type[Trainer]":
    import torch
    from transformers import Trainer

    class NERTrainer(Trainer):
        """``Trainer`` with word-order evaluation batches and optional layer-wise learning-rate decay."""

        layerwise_lr_decay = 1.0
        warmup_ratio = 0.0

        def create_scheduler(self, num_training_steps: int, optimizer: "torch.optim.Optimizer | None" = None
                             ) -> "torch.optim.lr_scheduler.LRScheduler":
            # transformers reads warmup_steps below 1 as a ratio and 1 and above as steps: 1.0 would be one step.
            self.args.warmup_steps = math.ceil(self.warmup_ratio * num_training_steps)
            return super().create_scheduler(num_training_steps, optimizer)

        def _get_eval_sampler(self, eval_dataset):
            # Predictions are matched to windows by position; length grouping would shuffle them.
            return torch.utils.data.SequentialSampler(eval_dataset)

        def create_optimizer(self, model: "nn.Module | None" = None) -> "torch.optim.Optimizer":
            if self.optimizer is not None or self.layerwise_lr_decay == 1.0:
                return super().create_optimizer(model)
            model = model or self.model
            optimizer_cls, kwargs = self.get_optimizer_cls_and_kwargs(self.args, model)
            self.optimizer = optimizer_cls(layerwise_groups(model, self.args, self.layerwise_lr_decay, self.get_decay_parameter_names(model)), **kwargs)
            return self.optimizer

    return NERTrainer


def layerwise_groups(model: "PreTrainedModel", args: "TrainingArguments", decay: float,
                     decay_names: Collection[str]) -> list[dict[str, Any]]:
    """Parameter groups whose learning rate is ``lr * decay ** (layers + 2 - depth)``: ELECTRA's reference
    (google-research/electra, ``_get_layer_lrs``), which puts the embeddings (and their projection) at depth 0, layer
    i at depth i + 1 and the task head at depth layers + 2. So the head gets the full rate, the last layer
    ``decay ** 2`` times it and the embeddings ``decay ** (layers + 2)``. Anything else above the layers (a pre-LN
    encoder's final LayerNorm) counts as the head.
    """
    layers = model.config.num_hidden_layers
    groups = {}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        found = re.search(r"\.layers?\.(\d+)\.", name)
        depth = 0 if "embeddings" in name else int(found.group(1)) + 1 if found else layers + 2
        weight_decay = args.weight_decay if name in decay_names else 0.0
        group = groups.setdefault((depth, weight_decay), {"params": [], "weight_decay": weight_decay,
                                                          "lr": args.learning_rate * decay ** (layers + 2 - depth)})
        group["params"].append(p)
    return list(groups.values())


class Predictor:
    """Word-level predictions of a data set through a ``Trainer``: windows in, one tag per word out."""

    def __init__(self, dataset: data.NERData, tokenizer: "PreTrainedTokenizerBase", labels: Sequence[str],
                 max_length: int, options: TrainOptions) -> None:
        self.data, self.labels = dataset, labels
        ids = {l: i for i, l in enumerate(labels)}
        # gold of a type the model has no label for (--allow-unseen-types): no loss on it; it stays gold in the scores
        ids.update({f"{p}-{t}": windows.IGNORE for t in dataset.types() if f"B-{t}" not in ids for p in "BI"})
        self.windows = windows.build(dataset.sentences, tokenizer, ids, max_length, options.label_scheme, options.window_overlap)
        # Longest first, so that each evaluation batch holds windows of similar length (little padding).
        self.windows.sort(key=lambda w: -len(w.input_ids))
        self.inputs = [{"input_ids": w.input_ids, "attention_mask": [1] * len(w.input_ids), "labels": w.labels} for w in self.windows]

    def tags(self, predictions: "Sequence[Sequence[Sequence[float]]] | np.ndarray") -> list[list[str]]:
        """Predicted tags per word, repaired by conlleval's rule so that seqeval and the BRAT files read the same entities."""
        return self.tagged(predictions)[0]

    def tagged(self, predictions: "Sequence[Sequence[Sequence[float]]] | np.ndarray"
               ) -> tuple[list[list[str]], list[list[float]]]:
        """(the tags per word, as ``tags``; the probability of each word's predicted label), from the (label index,
        probability) of each window position (``_best_label``)."""
        per_word = windows.word_values(self.windows, predictions, len(self.data.sentences))  # (index, probability)
        tags = [iob2.repair([self.labels[int(i)] for i, _ in s]) for s in per_word]
        return tags, [[float(p) for _, p in s] for s in per_word]

    def predict(self, trainer: "Trainer",
                callbacks: "Sequence[TrainerCallback]" = ()) -> tuple[list[list[str]], list[list[float]]]:
        """(tags, probabilities) of every word; ``callbacks``: the Trainer's for this prediction alone (progress)."""
        if not self.inputs:  # empty or whitespace-only notes: no window, and Trainer.predict has no predictions to give
            return self.tagged([])
        # Trainer's compute_metrics scores the dev set; on other inputs it would index past the dev windows.
        compute, trainer.compute_metrics = trainer.compute_metrics, None
        for callback in callbacks:
            trainer.add_callback(callback)
        try:
            return self.tagged(trainer.predict(self.inputs).predictions)
        finally:
            trainer.compute_metrics = compute
            for callback in callbacks:
                trainer.remove_callback(callback)

    def scores(self, tags: Sequence[Sequence[str]], written: str | Path | None = None) -> dict[str, Any] | None:
        """Scores of the annotated sentences (None when there are none).

        BRAT data are scored as the shared tasks' official scorers do, from the BRAT predictions ``written``
        against every gold mention of the .ann files (nested and overlapping ones included); seqeval's score
        of the flattened BIO tags is kept beside it as ``seqeval``. CoNLL data: seqeval's."""
        annotated = [(s.tags, t) for s, t in zip(self.data.sentences, tags) if s.tags is not None]
        if not annotated:
            return None
        seqeval = metrics.scores(*map(list, zip(*annotated)))
        if not self.data.has_documents or written is None:
            return seqeval
        gold = brat.mentions(self.data.documents)  # as read, before flattening
        documents = {d.id for d in self.data.documents if d.annotated}
        predicted = {m for m in brat.mentions(brat.read_folder(written, [])) if m[0] in documents}
        return {**metrics.mention_scores(gold, predicted), "scorer": "brat", "seqeval": seqeval}

    def write(self, tags: Sequence[Sequence[str]], out: Path) -> None:
        """BRAT ``.ann`` files (character offsets) for BRAT input, a CoNLL file otherwise."""
        out.mkdir(parents=True, exist_ok=True)
        if self.data.has_documents:
            entities = {}
            for sentence, predicted in zip(self.data.sentences, tags):
                entities.setdefault(sentence.doc, []).extend(data.entity_offsets(sentence, predicted))
            brat.write_folder(out, self.data.documents, entities)
        else:
            conll.write_file(out / "predictions.conll", [(s.tokens, t) for s, t in zip(self.data.sentences, tags)])


def _best_label(logits: "torch.Tensor", labels: "torch.Tensor") -> "torch.Tensor":
    """Each position's most probable label and its probability, in place of the logits: what tags and confidences
    need, in a sliver of the logits' memory (the Trainer gathers every evaluation window's)."""
    import torch

    best = logits.float().softmax(-1).max(-1)
    return torch.stack([best.indices.float(), best.values], dim=-1)


def read_annotated(path: str | Path, role: str, warn: Callable[[str], None] = stderr) -> data.NERData:
    """An annotated data set, its reading problems said on stderr (``warn``)."""
    dataset = data.annotated_part(data.read(path), path, role, warn)
    for line in dataset.warnings(role):
        warn(line)
    return dataset


def unseen_types(sets: Mapping[str, data.NERData], paths: Mapping[str, str | Path], allowed: bool,
                 warn: Callable[[str], None] = stderr,
                 accept: str = "pass --allow-unseen-types") -> dict[str, list[str]]:
    """{split: its gold entity types that no training entity has}. The model gets labels for the types it trains on
    only; the others' mentions stay gold, so they count as missed, as the official scorers count them. Unasked for, such
    types are a typo or another data set's, which would be scored 0 in silence: they stop here, before any training,
    unless ``allowed``; ``accept`` says how to allow them where the flag comes from (the recipes' NER_EXTRA)."""
    trained = sets["train"].types()
    if not trained:
        raise NERFormatError(f"{paths['train']}: the training set has no entities; give annotated data")
    unseen = {name: sorted(d.gold_types() - trained) for name, d in sets.items() if name != "train" and d.gold_types() - trained}
    if unseen and not allowed:
        (name, types), *others = unseen.items()
        also = "".join(f"; the {other} set {paths[other]} too: {', '.join(more)}" for other, more in others)
        raise NERFormatError(f"{paths[name]}: {name} entity types never seen in training: {', '.join(types)} (the training set "
                             f"{paths['train']} has {', '.join(sorted(trained))}){also}; fix the type names, or {accept} "
                             "to keep them (the model gets no label for them: their mentions count as missed)")
    for name, types in unseen.items():
        warn(f"note: {name} {paths[name]}: entity types never seen in training: {', '.join(types)}; the model has no label "
             "for them, so their gold mentions count as missed (--allow-unseen-types)")
    return unseen


def make_trainer(model: "PreTrainedModel", tokenizer: "PreTrainedTokenizerBase", options: TrainOptions,
                 checkpoints: str | Path, train_inputs: list[dict[str, list[int]]] | None,
                 eval_inputs: list[dict[str, list[int]]] | None = None,
                 compute_metrics: "Callable[[EvalPrediction], dict[str, float]] | None" = None,
                 callbacks: "Iterable[TrainerCallback]" = ()) -> "Trainer":
    """The ``Trainer`` ``train`` uses: length-grouped batches, and best-on-dev checkpoints when ``compute_metrics`` is given."""
    from transformers import DataCollatorForTokenClassification, TrainingArguments

    precision, precision_args = precision_flags(options.precision)
    if compute_metrics is None:
        selection = {"eval_strategy": "no", "save_strategy": "no"}
    elif options.eval_steps:
        selection = {"eval_strategy": "steps", "eval_steps": options.eval_steps, "save_strategy": "steps", "save_steps": options.eval_steps}
    else:
        selection = {"eval_strategy": "epoch", "save_strategy": "epoch"}
    if compute_metrics is not None:
        selection.update(eval_on_start=True, load_best_model_at_end=True, metric_for_best_model="f1", greater_is_better=True, save_total_limit=1)
    args = TrainingArguments(
        output_dir=str(checkpoints), learning_rate=options.lr, seed=options.seed, num_train_epochs=options.epochs,
        per_device_train_batch_size=options.batch_size, gradient_accumulation_steps=options.gradient_accumulation,
        per_device_eval_batch_size=options.eval_batch_size, weight_decay=options.weight_decay, adam_epsilon=options.adam_epsilon,
        adam_beta1=options.adam_betas[0], adam_beta2=options.adam_betas[1], max_grad_norm=options.max_grad_norm,
        lr_scheduler_type="linear", train_sampling_strategy="group_by_length",
        logging_steps=options.logging_steps, report_to="none", disable_tqdm=not os.isatty(2), **selection, **precision_args,
    )
    trainer = _trainer_class()(
        model=model, args=args, train_dataset=train_inputs, eval_dataset=eval_inputs, processing_class=tokenizer,
        data_collator=DataCollatorForTokenClassification(tokenizer, pad_to_multiple_of=8 if precision != "fp32" else None),
        compute_metrics=compute_metrics, preprocess_logits_for_metrics=_best_label, callbacks=list(callbacks),
    )
    trainer.layerwise_lr_decay = options.layerwise_lr_decay
    trainer.warmup_ratio = options.warmup_ratio
    return trainer


def drop_cut_checkpoints(checkpoints: str | Path, log: Callable[[str], None]) -> None:
    """transformers writes a checkpoint-N folder in place, trainer_state.json last: one without it (or with it cut
    short) was being saved when the run was killed, and resuming from it fails ("Can't find a valid checkpoint"), at
    every rerun. It is removed: the run resumes from the checkpoint before, or starts afresh."""
    for checkpoint in sorted(Path(checkpoints).glob("checkpoint-*")):
        try:
            json.loads((checkpoint / "trainer_state.json").read_text())
        except (OSError, ValueError):
            log(f"{checkpoint}: cut short (the run was killed while saving it); removed")
            shutil.rmtree(checkpoint)


def train(model_dir: str | Path, train_path: str | Path, dev_path: str | Path, test_path: str | Path | None,
          output_dir: str | Path, options: TrainOptions, overwrite: bool = False, log: Callable[[str], None] = print,
          warn: Callable[[str], None] = stderr, card: Mapping[str, str | None] | None = None) -> dict[str, Any]:
    """Fine-tunes, keeps the best-on-dev model, scores dev and test with it, and returns ``metrics.json``'s content.

    ``model_dir``: a local folder or a Hub id (``resolve_model``). ``card``: the model card's language, license and
    dataset, where the user gives them (``card.write``). Every mistake of the user's is found before ``output_dir`` is
    made; an error after that removes it unless it holds a checkpoint to resume from."""
    import torch
    import transformers
    from torch.utils.tensorboard import SummaryWriter
    from transformers.integrations import TensorBoardCallback
    from transformers.trainer_utils import get_last_checkpoint

    output_dir = Path(output_dir)
    check_output_dir(output_dir)
    if (output_dir / "metrics.json").exists() and not overwrite:
        raise NERFormatError(f"{output_dir}: holds a finished run (metrics.json); choose another --output-dir or pass --overwrite")
    check_options(options)
    source = resolve_model(str(model_dir))
    precision, _ = precision_flags(options.precision)
    paths = {"train": train_path, "dev": dev_path, **({"test": test_path} if test_path else {})}
    sets = {name: read_annotated(path, {"train": "training"}.get(name, name), warn) for name, path in paths.items()}
    if options.context == "document":
        sets = {name: data.by_document(d, paths[name]) for name, d in sets.items()}
    unseen = unseen_types(sets, paths, options.allow_unseen_types, warn)
    labels = iob2.label_list(sets["train"].types())  # what the model can learn; unseen types stay gold only

    transformers.set_seed(options.seed)
    tokenizer = load_tokenizer(source)
    model = head.build(source, labels, options.num_fc_layers, options.fc_hidden_size, options.fc_dropout)
    fingerprint = model_fingerprint(source)
    max_length = position_limit(model.config, options.max_length)
    predictors = {name: Predictor(d, tokenizer, labels, max_length, options) for name, d in sets.items()}
    train_windows = predictors["train"].inputs
    train_tokens = sum(len(w["input_ids"]) for w in train_windows)
    for name, p in predictors.items():
        log(f"{name}: {p.data.format_name}, {len(p.data.sentences):,} {'documents' if options.context == 'document' else 'sentences'}, {len(p.windows):,} windows of at most {max_length} tokens, "
            f"{sum(len(s.tokens) for s in p.data.sentences):,} words, {sum(p.data.statistics()['entities_per_type'].values()):,} entities")

    recorded = output_dir / "model.sha256"
    if overwrite:  # only once the data and the model have loaded
        shutil.rmtree(output_dir, ignore_errors=True)
    elif recorded.is_file() and recorded.read_text().strip() != fingerprint:
        log(f"{output_dir}: started with another model than {source}; its checkpoints are removed and the run starts afresh")
        shutil.rmtree(output_dir, ignore_errors=True)
    checkpoints = output_dir / "checkpoints"
    with created_folder(output_dir, keep=lambda: checkpoints.is_dir() and get_last_checkpoint(str(checkpoints)) is not None):
        write_text(recorded, fingerprint + "\n")
        predictor = predictors["dev"]

        def compute_metrics(prediction: "EvalPrediction") -> dict[str, float]:
            s = predictor.scores(predictor.tags(prediction.predictions))
            return {"f1": s["f1"], "precision": s["precision"], "recall": s["recall"]}

        trainer = make_trainer(model, tokenizer, options, checkpoints, train_windows, predictor.inputs, compute_metrics,
                               [TensorBoardCallback(SummaryWriter(str(output_dir / "tensorboard"))), _progress(log)])
        drop_cut_checkpoints(checkpoints, log)
        resume = get_last_checkpoint(str(checkpoints)) if checkpoints.is_dir() else None
        if resume:
            log(f"resuming from {resume}")
        log(f"training on {'GPU' if torch.cuda.is_available() else 'CPU'} in {precision}: {len(train_windows):,} windows, "
            f"{train_tokens:,} tokens per epoch, {options.epochs:g} epochs, lr {options.lr:g}, seed {options.seed}")
        started = time.time()
        result = trainer.train(resume_from_checkpoint=resume)
        seconds = time.time() - started

        # Trainer's log (restored with a checkpoint, so a resumed run keeps its earlier evaluations).
        history = [{"epoch": round(e["epoch"], 2), "step": e["step"], **{k: e[f"eval_{k}"] for k in ("f1", "precision", "recall", "loss")}}
                   for e in trainer.state.log_history if "eval_f1" in e]
        # The checkpoint Trainer kept and loaded; step 0 (the untrained head, evaluated on start) is never a candidate.
        best = next((h for h in history if h["step"] == trainer.state.best_global_step), None)
        report = {
            "model": str(source), "model_sha256": fingerprint, "train": str(train_path), "dev": str(dev_path), "test": str(test_path) if test_path else None,
            "options": asdict(options), "precision": precision, "labels": labels, "max_length": max_length,
            "window_overlap": windows.overlap_used(tokenizer, max_length, options.window_overlap),  # what windows got
            "best": best, "history": history, "train_seconds": round(seconds, 1), "train_loss": result.training_loss,
            "train_tokens_per_epoch": train_tokens, "train_tokens_per_second": round(train_tokens * options.epochs / result.metrics["train_runtime"], 1),
            # what reading the data changed (entities dropped, kept by their offsets, trimmed...), as the warnings said
            "data_problems": {name: d.problem_counts() for name, d in sets.items()},
            "data_read": {name: d.reading() for name, d in sets.items()},  # each set's format and what reading counted
            "unseen_types": unseen,  # dev and test types training never saw (--allow-unseen-types): never predicted
        }
        predictions_dir = output_dir / "predictions"
        for name in ("dev", "test"):
            if name in predictors:
                tags, _ = predictors[name].predict(trainer)
                with staged_folder(predictions_dir / name, True, NERFormatError) as staging:
                    predictors[name].write(tags, staging)
                report[name] = predictors[name].scores(tags, predictions_dir / name)
                log(metrics.line(name, report[name]) + (f"; never seen in training, so missed: {', '.join(unseen[name])}" if name in unseen else ""))
        if options.save_model:
            from biofairseq.finetune import card as model_card

            trainer.save_model(str(output_dir / "model"))
            model_card.write(output_dir / "model", report, source, card or {}, {"train": train_path, "dev": dev_path, "test": test_path})
        if not options.keep_checkpoints:
            shutil.rmtree(checkpoints, ignore_errors=True)
        write_text(output_dir / "metrics.json", json.dumps(report, indent=1) + "\n")
    return report


def _tagging_progress(windows: int, log: Callable[[str], None], every: float = 0.1,
                      least: int = 2000) -> "TrainerCallback":
    """A callback that says how far tagging is, every tenth of an input of many windows (a note of megabytes)."""
    from transformers import TrainerCallback

    class Progress(TrainerCallback):
        done, said = 0, 0.0

        def on_prediction_step(self, args: "TrainingArguments", state: "TrainerState", control: "TrainerControl",
                               **kwargs: Any) -> None:
            self.done += args.per_device_eval_batch_size
            if windows >= least and self.done / windows >= self.said + every:
                self.said = min(1.0, self.done / windows)
                log(f"tagged {100 * self.said:.0f}% of {windows:,} windows")

    return Progress()


def _progress(log: Callable[[str], None]) -> "TrainerCallback":
    """A callback that prints each dev evaluation."""
    from transformers import TrainerCallback

    class Progress(TrainerCallback):
        def on_evaluate(self, args: "TrainingArguments", state: "TrainerState", control: "TrainerControl",
                        metrics: dict[str, float] | None = None, **kwargs: Any) -> None:
            log(f"epoch {state.epoch:.2f}, step {state.global_step}: dev F1 {100 * metrics['eval_f1']:.2f} "
                f"(P {100 * metrics['eval_precision']:.2f}, R {100 * metrics['eval_recall']:.2f})")

    return Progress()


def _trained_windows(source: str | Path) -> tuple[str, int | None] | None:
    """(context, max length) a ``biofairseq-ner train`` run fine-tuned its model with (its metrics.json beside the
    model/ folder), or None."""
    recorded = Path(str(source)).parent / "metrics.json"
    if not recorded.is_file():
        return None
    run = json.loads(recorded.read_text())
    return run.get("options", {}).get("context", "sentence"), run.get("max_length")


def predict(model_dir: str | Path, input_path: str | Path, output_dir: str | Path, options: TrainOptions,
            overwrite: bool = False, log: Callable[[str], None] = print, warn: Callable[[str], None] = stderr,
            formats: Sequence[str] | None = None, max_length_given: bool = True) -> dict[str, Any]:
    """Tags a BRAT folder, a .txt file, a CoNLL file or JSON (``data.read``) with a fine-tuned model; scores it too when it is annotated.
    ``formats``: of ``outputs.FORMATS`` (default brat, jsonl, conll); ``max_length_given``: --max-length was given (else the model's
    own fine-tuning length, where its run recorded one)."""
    from biofairseq.finetune import outputs
    import transformers
    from transformers import AutoConfig

    check_output_dir(output_dir)
    if Path(output_dir).exists() and not overwrite:
        raise NERFormatError(f"--output-dir {output_dir}: already exists; choose another or pass --overwrite")
    check_options(options)
    source = resolve_model(str(model_dir))
    labels = AutoConfig.from_pretrained(source).id2label
    labels = [labels[i] for i in range(len(labels))]
    if not all(iob2.is_tag(l) for l in labels):
        raise NERFormatError(f"--model {model_dir}: its labels ({', '.join(labels[:4])}{', ...' if len(labels) > 4 else ''}) are not BIO tags, "
                             f"so it is not a fine-tuned NER model; give a biofairseq-ner train output folder (or its model/)")
    dataset = data.read(input_path)
    log(f"input: {dataset.format_name}, {len(dataset.documents) if dataset.has_documents else len(dataset.sentences):,} "
        f"{'documents' if dataset.has_documents else 'sentences'}")
    for line in dataset.warnings("input"):
        warn(line)
    if options.context == "document":
        dataset = data.by_document(dataset, input_path)
    unknown = sorted(dataset.gold_types() - {l[2:] for l in labels if l != "O"})
    if unknown and not options.allow_unseen_types:
        raise NERFormatError(f"{input_path}: entity types {unknown} are not among the model's labels {labels}; give data with the model's types, "
                             "or pass --allow-unseen-types to score them as missed")
    if unknown:
        warn(f"note: input {input_path}: entity types never seen in training: {', '.join(unknown)}; the model has no label "
             "for them, so their gold mentions count as missed (--allow-unseen-types)")
    tokenizer = load_tokenizer(source)
    model = head.load(source)
    trained = _trained_windows(source)
    if not max_length_given and trained:  # as the model learned: its run's windows
        options = replace(options, max_length=trained[1])
    limit = position_limit(model.config, options.max_length)
    said = ("--max-length as given" if max_length_given else "its fine-tuning run's (metrics.json)" if trained
            else "the default (no fine-tuning run recorded beside the model)")
    capped = f", capped by the model's {limit} positions" if limit < options.max_length else ""
    log(f"windows of {limit} sub-tokens: {said}{capped}")
    if trained and trained != (options.context, limit):
        warn(f"note: {source} was fine-tuned with --context {trained[0]} --max-length {trained[1]}; it tags with "
             f"--context {options.context} --max-length {limit} as asked (give the former to tag as it learned)")
    predictor = Predictor(dataset, tokenizer, labels, limit, options)
    transformers.logging.set_verbosity_error()
    with staged_folder(output_dir, overwrite, NERFormatError) as staging:
        trainer = make_trainer(model, tokenizer, options, staging / "unused", None)
        started = time.time()
        tags, probabilities = predictor.predict(trainer, [_tagging_progress(len(predictor.inputs), log)])
        seconds = time.time() - started
        shutil.rmtree(staging / "unused", ignore_errors=True)
        types = sorted({l[2:] for l in labels if l != "O"})
        written = outputs.write(staging / "predictions", dataset, tags, probabilities, formats or outputs.DEFAULT_FORMATS, types,
                                Path(str(model_dir)).name)
        sub_tokens = sum(len(w.input_ids) for w in predictor.windows)
        report = {"model": str(source), "input": str(input_path), "seconds": round(seconds, 2),
                  "words": sum(len(s.tokens) for s in dataset.sentences), "windows": len(predictor.windows),
                  "sub_tokens": sub_tokens, "sub_tokens_per_second": round(sub_tokens / max(seconds, 1e-9), 1),
                  "max_length": limit, "max_length_from": said, "outputs": written,
                  "data_problems": dataset.problem_counts(), "data_read": dataset.reading(), "unseen_types": unknown}
        scored = staging / "predictions"  # BRAT gold is scored from BRAT predictions, as the official scorers read them
        if dataset.has_documents and "brat" not in (formats or outputs.DEFAULT_FORMATS):
            scored = staging / "brat-scored"
            outputs.write(scored, dataset, tags, probabilities, ["brat"], types)
        scores = predictor.scores(tags, scored)
        if scored.name == "brat-scored":
            shutil.rmtree(scored)
        if scores is not None:
            report["scores"] = scores
            report["scored_documents"] = sum(d.annotated for d in dataset.documents) if dataset.has_documents else None
            log(metrics.line("input" if dataset.annotated else "the annotated part of the input", scores))
        write_text(staging / "metrics.json", json.dumps(report, indent=1) + "\n")
    return report
