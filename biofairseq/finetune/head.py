"""The token-classification head: transformers' linear one, or BioMegatron's (NeMo's) two-layer perceptron.

BioMegatron fine-tuned NER with ``num-fc-layers`` {1, 2}, ``fc-hidden-size`` {512, 1024} and ``fc-dropout`` 0.5:
dropout on the encoder's output, then Linear(hidden, fc) + ReLU + Linear(fc, labels) for two layers. The dropout
is transformers' own ``classifier_dropout``; a two-layer head is recorded in the saved config (``fc_layers``,
``fc_hidden_size``) so that ``load`` rebuilds it before reading the weights.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from torch import nn
    from transformers import PreTrainedModel


def _mlp(hidden: int, fc_hidden: int, labels: int) -> nn.Sequential:
    from torch import nn

    return nn.Sequential(nn.Linear(hidden, fc_hidden), nn.ReLU(), nn.Linear(fc_hidden, labels))


def _attach(model: PreTrainedModel, fc_layers: int, fc_hidden_size: int) -> PreTrainedModel:
    if fc_layers == 1:
        return model
    if not hasattr(model, "classifier"):
        raise ValueError(f"{type(model).__name__} has no classifier to replace; --num-fc-layers 2 needs a BERT-family encoder")
    fc_hidden = fc_hidden_size or model.config.hidden_size
    model.classifier = _mlp(model.classifier.in_features, fc_hidden, model.config.num_labels)
    model.config.fc_layers, model.config.fc_hidden_size = fc_layers, fc_hidden
    return model


def build(model_dir: str | Path, labels: Sequence[str], fc_layers: int = 1, fc_hidden_size: int = 0,
          fc_dropout: float | None = None) -> PreTrainedModel:
    """An encoder from ``model_dir`` with a fresh head for ``labels``."""
    from transformers import AutoModelForTokenClassification

    extra = {} if fc_dropout is None else {"classifier_dropout": fc_dropout}
    model = AutoModelForTokenClassification.from_pretrained(
        model_dir, num_labels=len(labels), id2label=dict(enumerate(labels)), label2id={l: i for i, l in enumerate(labels)},
        **extra)
    return _attach(model, fc_layers, fc_hidden_size)


def load(model_dir: str | Path) -> PreTrainedModel:
    """A fine-tuned model as ``build`` made and ``Trainer.save_model`` saved it."""
    from transformers import AutoConfig, AutoModelForTokenClassification

    config = AutoConfig.from_pretrained(model_dir)
    fc_layers = getattr(config, "fc_layers", 1)
    if fc_layers == 1:
        return AutoModelForTokenClassification.from_pretrained(model_dir)
    model = _attach(AutoModelForTokenClassification.from_config(config), fc_layers, config.fc_hidden_size)
    folder = Path(model_dir)
    if (folder / "model.safetensors.index.json").is_file():  # transformers shards saves above 5 GB (1.2b in fp32)
        from transformers.trainer_utils import load_sharded_checkpoint

        load_sharded_checkpoint(model, folder, strict=True)
    else:
        from safetensors.torch import load_file

        model.load_state_dict(load_file(folder / "model.safetensors"), strict=True)
    return model.eval()
