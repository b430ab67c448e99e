"""Reading a fairseq RoBERTa (or ELECTRA) checkpoint into a model, and writing one that ``fairseq-train --restore-file`` takes.

What training (the distillation teacher), conversion, the benchmarks and the tests read and write checkpoints with.
It imports fairseq and our models, not transformers; every read goes through the safe loader
(``biofairseq.models.safe_checkpoints``).
"""

import contextlib
import copy
import os
import pickle
from argparse import Namespace
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

import torch
from fairseq import checkpoint_utils, options
from fairseq.data import Dictionary
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_NAME_REGISTRY, ARCH_MODEL_REGISTRY, MODEL_DATACLASS_REGISTRY
from fairseq.models import BaseFairseqModel
from fairseq.models.roberta import RobertaModel
from fairseq.tasks import FairseqTask
from omegaconf import DictConfig, OmegaConf, open_dict

from biofairseq.arguments import first_line
from biofairseq.models.bio_roberta import BioRobertaModel
from biofairseq.models.safe_checkpoints import UnsafeCheckpointError
from biofairseq.user_dir import USER_DIR

# biofairseq/__init__ has registered our tasks and architectures, which checkpoints name, whatever the import order.


class CheckpointError(Exception):
    """A checkpoint or dictionary the user gave cannot be read or does not fit; the message names the file and the fix."""


EMBED_TOKENS = "embed_tokens.weight"  # RoBERTa: encoder.sentence_encoder.…; ELECTRA: embeddings.…


class DictionaryTask(FairseqTask):
    """What building a RoBERTa model needs from its masked-LM task: the dictionary, and whether rows hold several
    documents (``biofairseq.models.documents.packed_bos``)."""

    def __init__(self, dictionary: Dictionary, pack_documents: bool = False) -> None:
        super().__init__(Namespace(pack_documents=pack_documents))
        self.dictionary = dictionary

    @property
    def source_dictionary(self) -> Dictionary:
        return self.dictionary

    @property
    def target_dictionary(self) -> Dictionary:
        return self.dictionary


def load_dictionary(path: str | Path) -> Dictionary:
    """dict.txt as fairseq's masked_lm and document_mlm tasks load it: <mask> added when it is not there."""
    try:
        dictionary = Dictionary.load(str(path))
    except (OSError, ValueError, RuntimeError) as error:
        raise CheckpointError(f"{path}: not a fairseq dict.txt ({first_line(error)})") from None
    dictionary.add_symbol("<mask>")
    dictionary.path = str(path)  # for messages
    return dictionary


@dataclass
class FairseqRoberta:
    model: BaseFairseqModel  # a RobertaModel, or electra's, bio_modernbert's
    args: object  # the model's configuration (cfg.model)
    dictionary: Dictionary
    data_dir: Optional[str]  # the data-bin the checkpoint names (as recorded: see ``locate``), or None
    bpe: object  # the checkpoint's --bpe settings, or None
    heads: list  # classification heads the checkpoint holds (fine-tuning), left out of the model
    model_name: str = "bio_roberta"  # the registered fairseq model: roberta, bio_roberta, electra, bio_modernbert
    training: Optional[dict] = None  # what the checkpoint records of its training (``training_summary``)
    continued_from: Optional[dict] = None  # the conversion it started from (``continued_from``), or None

    @property
    def electra(self) -> bool:
        return self.model_name == "electra"


def _data_dir(cfg: DictConfig) -> Optional[str]:
    data = getattr(cfg.get("task") or {}, "data", None) if hasattr(cfg, "get") else None
    return str(data).split(os.pathsep)[0] if data else None


def locate(recorded: str | Path, checkpoint: str | Path) -> list[Path]:
    """Where a path recorded in a checkpoint (its data-bin, its --bpe files) may be now: as recorded (from the working
    folder), then, for a relative path or one that no longer exists, below the checkpoint's folder and each folder
    above it; an absolute path that moved is looked for there by its last name. Candidates, in that order."""
    recorded = Path(recorded)
    tail = recorded.name if recorded.is_absolute() else recorded
    folder = Path(checkpoint).absolute().parent
    return [recorded, *(f / tail for f in (folder, *folder.parents))]


def looked_in(recorded: str | Path, checkpoint: str | Path) -> str:
    """How ``locate`` searched, for a message of one line."""
    recorded = Path(recorded)
    tail = recorded.name if recorded.is_absolute() else recorded
    return f"{recorded} (from {Path.cwd()}), and {tail} in {Path(checkpoint).absolute().parent} and each folder above it"


def find_dictionary(checkpoint: str | Path, data_dir: Optional[str | Path]) -> Path:
    """The dict.txt of the data-bin a checkpoint records (see ``locate``), else one beside the checkpoint."""
    candidates = [p / "dict.txt" for p in locate(data_dir, checkpoint)] if data_dir else []
    candidates.append(Path(checkpoint).absolute().parent / "dict.txt")
    found = next((p for p in candidates if p.is_file()), None)
    if found is None:
        where = f"dict.txt in its data-bin {looked_in(data_dir, checkpoint)}; and" if data_dir else "dict.txt (it records no data-bin) in"
        beside = Path(checkpoint).absolute().parent
        raise CheckpointError(
            f"{checkpoint}: dictionary not found: looked for {where} {beside}; pass --dict PATH/dict.txt, the "
            "data-bin's dict.txt the model was trained with"
        )
    return found


def training_summary(state: dict[str, Any]) -> dict[str, Optional[int | float | str]]:
    """Updates, epoch and validation results a fairseq-train checkpoint records: ``best`` is the best value of
    ``metric`` (--best-checkpoint-metric) over the run up to this checkpoint, ``valid`` this checkpoint's own;
    fairseq's masked-LM losses are in base 2, so a loss gives perplexity 2 ** loss. None where not recorded."""
    history = state.get("optimizer_history") or [{}]
    extra = state.get("extra_state") or {}
    checkpoint_cfg = state["cfg"].get("checkpoint") or {}
    metric = checkpoint_cfg.get("best_checkpoint_metric", "loss")
    number = lambda value: float(value) if isinstance(value, (int, float)) or torch.is_tensor(value) else None
    summary = {"updates": history[-1].get("num_updates"), "epoch": (extra.get("train_iterator") or {}).get("epoch"),
               "metric": metric, "best": number(extra.get("best")), "valid": number(extra.get("val_loss"))}
    perplexity = {"loss": lambda v: 2 ** v, "ppl": lambda v: v}.get(metric)
    summary["best_perplexity"] = perplexity(summary["best"]) if perplexity and summary["best"] is not None else None
    return summary


def read_state(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file; give the path of a fairseq .pt checkpoint")
    try:
        state = checkpoint_utils.load_checkpoint_to_cpu(str(path))
    except UnsafeCheckpointError as error:
        raise CheckpointError(str(error)) from None
    except (pickle.UnpicklingError, RuntimeError, EOFError, KeyError, AttributeError) as error:
        raise CheckpointError(f"{path}: not a fairseq checkpoint ({first_line(error)})") from None
    if not isinstance(state.get("model"), dict) or state.get("cfg") is None:
        raise CheckpointError(f"{path}: not a fairseq checkpoint (no model weights and configuration)")
    return state


def readable(model_class: type) -> bool:
    """Whether a registered fairseq model is one this module loads: fairseq's RoBERTa (and ours), or a model of ours
    that says so (``masked_lm_encoder``: ELECTRA, ModernBERT), so that a new one needs nothing here."""
    return issubclass(model_class, RobertaModel) or getattr(model_class, "masked_lm_encoder", False)


def own_models() -> list:
    """The registered models of ours besides RoBERTa's, with their presets, for the line that refuses another."""
    from fairseq.models import ARCH_MODEL_INV_REGISTRY, MODEL_REGISTRY

    return [f"{name} ({', '.join(sorted(ARCH_MODEL_INV_REGISTRY.get(name, [])))})" for name, cls in MODEL_REGISTRY.items()
            if getattr(cls, "masked_lm_encoder", False)]


def load(path: str | Path, dict_path: Optional[str | Path] = None, pack_documents: bool = False) -> FairseqRoberta:
    """A fairseq RoBERTa checkpoint as an eval-mode fp32 model, with the dictionary it was trained with; built for
    rows of several documents (with SDPA attention, which they need) if ``pack_documents``."""
    state = read_state(path)
    cfg = state["cfg"]
    args = cfg.model
    if pack_documents:
        args = copy.deepcopy(args)
        with open_dict(args) if OmegaConf.is_config(args) else contextlib.nullcontext():
            args.attention = "sdpa"
    arch = getattr(args, "_name", None) or getattr(args, "arch", None)
    model_class = ARCH_MODEL_REGISTRY.get(arch)
    if model_class is None or not readable(model_class):
        kind = model_class.__name__ if model_class else "unknown"
        raise CheckpointError(
            f"{path}: a '{arch}' checkpoint ({kind}); biofairseq reads RoBERTa encoders "
            f"(bio_roberta_*, roberta_base, roberta_large, roberta_prenorm) and {', '.join(own_models())}"
        )
    data_dir = _data_dir(cfg)
    if dict_path is None:
        dict_path = find_dictionary(path, data_dir)
    elif not Path(dict_path).is_file():
        raise CheckpointError(f"{dict_path}: no such dictionary file; --dict takes the dict.txt the model was trained with")
    dictionary = load_dictionary(dict_path)
    embed = next((v for k, v in state["model"].items() if k.endswith(EMBED_TOKENS)), None)
    if embed is not None and embed.shape[0] != len(dictionary):
        raise CheckpointError(
            f"{dict_path}: {len(dictionary)} entries (with <mask>), but the embedding matrix of {path} has "
            f"{embed.shape[0]} rows; pass the dict.txt this model was trained with (--dict)"
        )
    heads = sorted({k.split(".")[1] for k in state["model"] if k.startswith("classification_heads.")})
    task = DictionaryTask(dictionary, pack_documents)
    if pack_documents and issubclass(model_class, RobertaModel) and not issubclass(model_class, BioRobertaModel):
        model = BioRobertaModel.build_model(args, task)  # a stock RoBERTa's weights, built to read packed rows
    else:
        model = task.build_model(args)
    try:
        model.load_state_dict(state["model"], strict=True, model_cfg=args)
    except RuntimeError as error:
        raise CheckpointError(f"{path}: weights do not fit a '{arch}' model ({first_line(error)})") from None
    model.amp_bf16 = False  # conversion and parity compute in fp32, whatever the training precision
    return FairseqRoberta(
        model.float().eval(), args, dictionary, data_dir, cfg.get("bpe"), heads, ARCH_MODEL_NAME_REGISTRY[arch],
        training_summary(state), continued_from(cfg, path),
    )


def continued_from(cfg: DictConfig, checkpoint: str | Path) -> Optional[dict[str, Any]]:
    """What a checkpoint's pretraining started from, where it started from a conversion (--finetune-from-model or
    --restore-file naming a from-hf model.pt): that conversion's record (conversion.json beside it), else None."""
    import json

    recorded = (cfg.get("checkpoint") or {}) if hasattr(cfg, "get") else {}
    for name in ("finetune_from_model", "restore_file"):
        value = recorded.get(name)
        if not value or not str(value).endswith(".pt"):
            continue
        for candidate in locate(value, checkpoint):
            record = candidate.parent / "conversion.json"
            if candidate.is_file() and record.is_file():
                try:
                    found = json.loads(record.read_text())
                except (OSError, ValueError):
                    return None
                return found if found.get("direction") == "from-hf" else None
    return None


# ---- writing


def _arch_defaults(arch: str) -> dict[str, Any]:
    """What ``--arch arch`` sets: its function's values over its model's dataclass defaults (where it has one)."""
    args = Namespace()
    ARCH_CONFIG_REGISTRY[arch](args)
    dataclass = MODEL_DATACLASS_REGISTRY.get(ARCH_MODEL_NAME_REGISTRY[arch])
    defaults = {k: v for k, v in vars(dataclass()).items() if not k.startswith("_")} if dataclass else {}
    return {**defaults, **vars(args)}


def _options(arch: str) -> set[str]:
    """The settings the model of ``--arch arch`` takes on the command line (its dataclass's fields or add_args')."""
    import argparse

    model = ARCH_MODEL_REGISTRY[arch]
    dataclass = MODEL_DATACLASS_REGISTRY.get(ARCH_MODEL_NAME_REGISTRY[arch])
    if dataclass is not None:
        return {name for name in dataclass.__dataclass_fields__ if not name.startswith("_")}
    parser = argparse.ArgumentParser(add_help=False)
    model.add_args(parser)
    return {action.dest for action in parser._actions}


def _flag(name: str, value: object) -> Optional[list[str]]:
    option = "--" + name.replace("_", "-")
    if isinstance(value, bool):
        return [option] if value else None  # fairseq has no flag that turns these off
    return [option, str(value)]


def architecture_flags(wanted: dict[str, object], presets: Iterable[str]) -> Optional[list[str]]:
    """The shortest ``--arch PRESET --flag value ...`` that builds a model of these settings (a preset whose model has
    no such setting, as fairseq's roberta has no --layer-norm-eps, cannot)."""
    best = None
    for arch in presets:
        defaults, flags = _arch_defaults(arch), ["--arch", arch]
        options = _options(arch)
        for name, value in wanted.items():
            if defaults.get(name) != value and name not in options:
                break
            if defaults.get(name) != value:
                flag = _flag(name, value)
                if flag is None:
                    break
                flags += flag
        else:
            if best is None or len(flags) < len(best):
                best = flags
    return best


def training_config(flags: Sequence[str], data_dir: str | Path) -> DictConfig:
    """The configuration fairseq-train records for ``DATA_DIR --task document_mlm FLAGS``."""
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(
        parser, [str(data_dir), "--user-dir", USER_DIR, "--task", "document_mlm", "--criterion", "masked_lm_accuracy",
                 *flags]
    )
    return convert_namespace_to_omegaconf(args)


def new_model(flags: Sequence[str], data_dir: str | Path,
              dictionary: Dictionary) -> tuple[BaseFairseqModel, DictConfig]:
    """A model and the configuration fairseq-train would record for ``--task document_mlm FLAGS``."""
    cfg = training_config(flags, data_dir)
    return DictionaryTask(dictionary).build_model(cfg.model).float().eval(), cfg


def save(path: str | Path, model: BaseFairseqModel, cfg: DictConfig) -> None:
    """The checkpoint in the form fairseq-train saves it, with no optimizer state and at epoch 1, so that
    --restore-file starts a new training run from these weights."""
    state = {
        "args": None,
        "cfg": OmegaConf.to_container(cfg, resolve=True, enum_to_str=True),
        "model": model.state_dict(),
        "criterion": None,
        "optimizer_history": [
            {"criterion_name": "MaskedLmAccuracy", "optimizer_name": "none",
             "lr_scheduler_state": {"best": None}, "num_updates": 0}
        ],
        "task_state": {},
        "extra_state": {
            "metrics": {}, "previous_training_time": 0,
            "train_iterator": {"version": 2, "epoch": 1, "iterations_in_epoch": 0, "shuffle": True},
        },
        "last_optimizer_state": None,
    }
    torch.save(state, path)
