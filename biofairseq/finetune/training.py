"""Fine-tuning a linear token-classification head on any transformers encoder, with transformers' ``Trainer``.

What is ours: the data (``data``, ``windows``), evaluation at the word level through the windows, layer-wise
learning-rate decay, length-grouped batches, and an output folder that is complete only when ``metrics.json``
is in it. The rest (optimiser, schedule, fp16/bf16, gradient accumulation, clipping, checkpoints, best-on-dev
selection, resuming) is ``Trainer``'s.
"""

import json
import math
import os
import re
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from biofairseq.atomic import staged_folder, write_text
from biofairseq.finetune import NERFormatError, brat, conll, data, head, iob2, metrics, windows
from biofairseq.finetune.fingerprint import weights_sha256

ROBERTA_POSITIONS = ("roberta", "xlm-roberta", "camembert", "roberta-prelayernorm", "xlm-roberta-xl")


@dataclass
class TrainOptions:
    """Defaults are the bsc-bio-es fine-tuning values (Carrino et al. 2022, Table 4)."""

    lr: float = 5e-5
    seed: int = 1
    epochs: float = 20
    batch_size: int = 32
    gradient_accumulation: int = 2
    eval_batch_size: int = 64
    weight_decay: float = 0.0
    adam_epsilon: float = 1e-8
    adam_betas: tuple = (0.9, 0.999)
    max_grad_norm: float = 1.0
    warmup_ratio: float = 0.0
    layerwise_lr_decay: float = 1.0
    max_length: int = 512
    window_overlap: int = 128
    label_scheme: str = "first-subtoken"
    num_fc_layers: int = 1  # BioMegatron's head options (finetune.head)
    fc_hidden_size: int = 0  # 0: the encoder's width
    fc_dropout: float = None  # None: the encoder's hidden dropout (transformers' default)
    eval_steps: int = 0  # 0: evaluate on dev at the end of each epoch
    logging_steps: int = 50
    precision: str = "auto"
    save_model: bool = True
    keep_checkpoints: bool = False


def load_tokenizer(model_dir):
    """The model's tokenizer, with a space before every word as RoBERTa saw words inside sentences in pretraining."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir, add_prefix_space=True)


def position_limit(config, asked):
    """The longest input the model can embed: RoBERTa-family positions start after the padding index."""
    limit = config.max_position_embeddings
    if config.model_type in ROBERTA_POSITIONS:
        limit -= config.pad_token_id + 1
    return min(asked, limit)


def model_folder(path):
    """A transformers folder: the given one, or the ``model/`` that ``biofairseq-ner train`` saves."""
    path = Path(path)
    for candidate in (path, path / "model"):
        if (candidate / "config.json").is_file():
            return candidate
    raise NERFormatError(f"{path}: no config.json; give a transformers model folder (biofairseq-convert to-hf writes one) or a train output folder")


def precision_flags(precision):
    import torch

    cuda = torch.cuda.is_available()
    if precision == "auto":
        precision = ("bf16" if torch.cuda.is_bf16_supported() else "fp16") if cuda else "fp32"
    if precision == "fp16" and not cuda:
        raise NERFormatError("--precision fp16: needs a GPU; use --precision fp32 (or bf16) on CPU")
    return precision, {"fp16": precision == "fp16", "bf16": precision == "bf16", "use_cpu": not cuda}


def _trainer_class():
    import torch
    from transformers import Trainer

    class NERTrainer(Trainer):
        """``Trainer`` with word-order evaluation batches and optional layer-wise learning-rate decay."""

        layerwise_lr_decay = 1.0
        warmup_ratio = 0.0

        def create_scheduler(self, num_training_steps, optimizer=None):
            # transformers reads warmup_steps below 1 as a ratio and 1 and above as steps: 1.0 would be one step.
            self.args.warmup_steps = math.ceil(self.warmup_ratio * num_training_steps)
            return super().create_scheduler(num_training_steps, optimizer)

        def _get_eval_sampler(self, eval_dataset):
            # Predictions are matched to windows by position; length grouping would shuffle them.
            return torch.utils.data.SequentialSampler(eval_dataset)

        def create_optimizer(self, model=None):
            if self.optimizer is not None or self.layerwise_lr_decay == 1.0:
                return super().create_optimizer(model)
            model = model or self.model
            optimizer_cls, kwargs = self.get_optimizer_cls_and_kwargs(self.args, model)
            self.optimizer = optimizer_cls(layerwise_groups(model, self.args, self.layerwise_lr_decay, self.get_decay_parameter_names(model)), **kwargs)
            return self.optimizer

    return NERTrainer


def layerwise_groups(model, args, decay, decay_names):
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

    def __init__(self, dataset, tokenizer, labels, max_length, options):
        self.data, self.labels = dataset, labels
        self.windows = windows.build(dataset.sentences, tokenizer, {l: i for i, l in enumerate(labels)},
                                     max_length, options.label_scheme, options.window_overlap)
        # Longest first, so that each evaluation batch holds windows of similar length (little padding).
        self.windows.sort(key=lambda w: -len(w.input_ids))
        self.inputs = [{"input_ids": w.input_ids, "attention_mask": [1] * len(w.input_ids), "labels": w.labels} for w in self.windows]

    def tags(self, predictions):
        """Predicted tags per word, repaired by conlleval's rule so that seqeval and the BRAT files read the same entities."""
        return [iob2.repair(t) for t in windows.word_tags(self.windows, predictions, self.labels, len(self.data.sentences))]

    def predict(self, trainer):
        # Trainer's compute_metrics scores the dev set; on other inputs it would index past the dev windows.
        compute, trainer.compute_metrics = trainer.compute_metrics, None
        try:
            return self.tags(trainer.predict(self.inputs).predictions)
        finally:
            trainer.compute_metrics = compute

    def scores(self, tags, written=None):
        """Scores of the annotated sentences (None when there are none).

        BRAT data are scored as the shared tasks' official scorers do, from the BRAT predictions ``written``
        against every gold mention of the .ann files (nested and overlapping ones included); seqeval's score
        of the flattened BIO tags is kept beside it as ``seqeval``. CoNLL data: seqeval's."""
        annotated = [(s.tags, t) for s, t in zip(self.data.sentences, tags) if s.tags is not None]
        if not annotated:
            return None
        seqeval = metrics.scores(*map(list, zip(*annotated)))
        if not self.data.is_brat or written is None:
            return seqeval
        gold = brat.mentions(self.data.documents)  # as read, before flattening
        documents = {d.id for d in self.data.documents if d.annotated}
        predicted = {m for m in brat.mentions(brat.read_folder(written, [])) if m[0] in documents}
        return {**metrics.mention_scores(gold, predicted), "scorer": "brat", "seqeval": seqeval}

    def write(self, tags, out):
        """BRAT ``.ann`` files (character offsets) for BRAT input, a CoNLL file otherwise."""
        out.mkdir(parents=True, exist_ok=True)
        if self.data.is_brat:
            entities = {}
            for sentence, predicted in zip(self.data.sentences, tags):
                entities.setdefault(sentence.doc, []).extend(data.entity_offsets(sentence, predicted))
            brat.write_folder(out, self.data.documents, entities)
        else:
            conll.write_file(out / "predictions.conll", [(s.tokens, t) for s, t in zip(self.data.sentences, tags)])


def _argmax(logits, labels):
    return logits.argmax(-1)


def _read(path, role):
    dataset = data.read(path)
    if not dataset.annotated:
        raise NERFormatError(f"{path}: the {role} set has no annotations (.ann files or a tag column); give annotated data")
    return dataset


def make_trainer(model, tokenizer, options, checkpoints, train_inputs, eval_inputs=None, compute_metrics=None, callbacks=()):
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
        compute_metrics=compute_metrics, preprocess_logits_for_metrics=_argmax, callbacks=list(callbacks),
    )
    trainer.layerwise_lr_decay = options.layerwise_lr_decay
    trainer.warmup_ratio = options.warmup_ratio
    return trainer


def train(model_dir, train_path, dev_path, test_path, output_dir, options, overwrite=False, log=print):
    """Fine-tunes, keeps the best-on-dev model, scores dev and test with it, and returns ``metrics.json``'s content."""
    import torch
    import transformers
    from torch.utils.tensorboard import SummaryWriter
    from transformers.integrations import TensorBoardCallback
    from transformers.trainer_utils import get_last_checkpoint

    output_dir = Path(output_dir)
    if (output_dir / "metrics.json").exists() and not overwrite:
        raise NERFormatError(f"{output_dir}: holds a finished run (metrics.json); choose another --output-dir or pass --overwrite")
    model_dir = model_folder(model_dir)
    fingerprint = weights_sha256(model_dir)
    precision, _ = precision_flags(options.precision)
    sets = {"train": _read(train_path, "training"), "dev": _read(dev_path, "dev")}
    if test_path:
        sets["test"] = _read(test_path, "test")
    labels = iob2.label_list(set().union(*(d.types() for d in sets.values())))
    if not sets["train"].types():
        raise NERFormatError(f"{train_path}: the training set has no entities; give annotated data")

    transformers.set_seed(options.seed)
    tokenizer = load_tokenizer(model_dir)
    model = head.build(model_dir, labels, options.num_fc_layers, options.fc_hidden_size, options.fc_dropout)
    max_length = position_limit(model.config, options.max_length)
    predictors = {name: Predictor(d, tokenizer, labels, max_length, options) for name, d in sets.items()}
    train_windows = predictors["train"].inputs
    train_tokens = sum(len(w["input_ids"]) for w in train_windows)
    for name, p in predictors.items():
        log(f"{name}: {len(p.data.sentences):,} sentences, {len(p.windows):,} windows of at most {max_length} tokens, "
            f"{sum(len(s.tokens) for s in p.data.sentences):,} words, {sum(p.data.statistics()['entities_per_type'].values()):,} entities")

    recorded = output_dir / "model.sha256"
    if overwrite:  # only once the data and the model have loaded
        shutil.rmtree(output_dir, ignore_errors=True)
    elif recorded.is_file() and recorded.read_text().strip() != fingerprint:
        log(f"{output_dir}: started with another model than {model_dir}; its checkpoints are removed and the run starts afresh")
        shutil.rmtree(output_dir, ignore_errors=True)
    output_dir.mkdir(parents=True, exist_ok=True)
    write_text(recorded, fingerprint + "\n")
    predictor = predictors["dev"]

    def compute_metrics(prediction):
        s = predictor.scores(predictor.tags(prediction.predictions))
        return {"f1": s["f1"], "precision": s["precision"], "recall": s["recall"]}

    checkpoints = output_dir / "checkpoints"
    trainer = make_trainer(model, tokenizer, options, checkpoints, train_windows, predictor.inputs, compute_metrics,
                           [TensorBoardCallback(SummaryWriter(str(output_dir / "tensorboard"))), _progress(log)])
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
        "model": str(model_dir), "model_sha256": fingerprint, "train": str(train_path), "dev": str(dev_path), "test": str(test_path) if test_path else None,
        "options": asdict(options), "precision": precision, "labels": labels, "max_length": max_length,
        "best": best, "history": history, "train_seconds": round(seconds, 1), "train_loss": result.training_loss,
        "train_tokens_per_epoch": train_tokens, "train_tokens_per_second": round(train_tokens * options.epochs / result.metrics["train_runtime"], 1),
    }
    predictions_dir = output_dir / "predictions"
    for name in ("dev", "test"):
        if name in predictors:
            tags = predictors[name].predict(trainer)
            with staged_folder(predictions_dir / name, True, NERFormatError) as staging:
                predictors[name].write(tags, staging)
            report[name] = predictors[name].scores(tags, predictions_dir / name)
            log(metrics.line(name, report[name]))
    if options.save_model:
        trainer.save_model(str(output_dir / "model"))
    if not options.keep_checkpoints:
        shutil.rmtree(checkpoints, ignore_errors=True)
    write_text(output_dir / "metrics.json", json.dumps(report, indent=1) + "\n")
    return report


def _progress(log):
    """A callback that prints each dev evaluation."""
    from transformers import TrainerCallback

    class Progress(TrainerCallback):
        def on_evaluate(self, args, state, control, metrics=None, **kwargs):
            log(f"epoch {state.epoch:.2f}, step {state.global_step}: dev F1 {100 * metrics['eval_f1']:.2f} "
                f"(P {100 * metrics['eval_precision']:.2f}, R {100 * metrics['eval_recall']:.2f})")

    return Progress()


def predict(model_dir, input_path, output_dir, options, overwrite=False, log=print):
    """Tags a BRAT folder or a CoNLL file with a fine-tuned model; scores it too when it is annotated."""
    import transformers

    model_dir = model_folder(model_dir)
    dataset = data.read(input_path)
    tokenizer = load_tokenizer(model_dir)
    model = head.load(model_dir)
    labels = [model.config.id2label[i] for i in range(model.config.num_labels)]
    unknown = dataset.types() - {l[2:] for l in labels if l != "O"}
    if unknown:
        raise NERFormatError(f"{input_path}: entity types {sorted(unknown)} are not among the model's labels {labels}; give data with the model's types")
    predictor = Predictor(dataset, tokenizer, labels, position_limit(model.config, options.max_length), options)
    transformers.logging.set_verbosity_error()
    with staged_folder(output_dir, overwrite, NERFormatError) as staging:
        trainer = make_trainer(model, tokenizer, options, staging / "unused", None)
        started = time.time()
        tags = predictor.predict(trainer)
        seconds = time.time() - started
        shutil.rmtree(staging / "unused", ignore_errors=True)
        predictor.write(tags, staging / "predictions")
        report = {"model": str(model_dir), "input": str(input_path), "seconds": round(seconds, 2),
                  "words": sum(len(s.tokens) for s in dataset.sentences), "windows": len(predictor.windows)}
        scores = predictor.scores(tags, staging / "predictions")
        if scores is not None:
            report["scores"] = scores
            report["scored_documents"] = sum(d.annotated for d in dataset.documents) if dataset.is_brat else None
            log(metrics.line("input" if dataset.annotated else "the annotated part of the input", scores))
        write_text(staging / "metrics.json", json.dumps(report, indent=1) + "\n")
    return report
