"""The token-classification head: transformers' linear one, or BioMegatron's (NeMo's) two-layer perceptron.

BioMegatron fine-tuned NER with ``num-fc-layers`` {1, 2}, ``fc-hidden-size`` {512, 1024} and ``fc-dropout`` 0.5:
dropout on the encoder's output, then Linear(hidden, fc) + ReLU + Linear(fc, labels) for two layers. The dropout
is transformers' own ``classifier_dropout``; a two-layer head is recorded in the saved config (``fc_layers``,
``fc_hidden_size``) so that ``load`` rebuilds it before reading the weights.
"""

from pathlib import Path


def _mlp(hidden, fc_hidden, labels):
    from torch import nn

    return nn.Sequential(nn.Linear(hidden, fc_hidden), nn.ReLU(), nn.Linear(fc_hidden, labels))


def _attach(model, fc_layers, fc_hidden_size):
    if fc_layers == 1:
        return model
    if not hasattr(model, "classifier"):
        raise ValueError(f"{type(model).__name__} has no classifier to replace; --num-fc-layers 2 needs a BERT-family encoder")
    fc_hidden = fc_hidden_size or model.config.hidden_size
    model.classifier = _mlp(model.classifier.in_features, fc_hidden, model.config.num_labels)
    model.config.fc_layers, model.config.fc_hidden_size = fc_layers, fc_hidden
    return model


def build(model_dir, labels, fc_layers=1, fc_hidden_size=0, fc_dropout=None):
    """An encoder from ``model_dir`` with a fresh head for ``labels``."""
    from transformers import AutoModelForTokenClassification

    extra = {} if fc_dropout is None else {"classifier_dropout": fc_dropout}
    model = AutoModelForTokenClassification.from_pretrained(
        model_dir, num_labels=len(labels), id2label=dict(enumerate(labels)), label2id={l: i for i, l in enumerate(labels)},
        **extra)
    return _attach(model, fc_layers, fc_hidden_size)


def load(model_dir):
    """A fine-tuned model as ``build`` made and ``Trainer.save_model`` saved it."""
    from transformers import AutoConfig, AutoModelForTokenClassification

    config = AutoConfig.from_pretrained(model_dir)
    fc_layers = getattr(config, "fc_layers", 1)
    if fc_layers == 1:
        return AutoModelForTokenClassification.from_pretrained(model_dir)
    model = _attach(AutoModelForTokenClassification.from_config(config), fc_layers, config.fc_hidden_size)
    model.load_state_dict(_saved_weights(Path(model_dir)), strict=True)
    return model.eval()


def _saved_weights(model_dir):
    """The state dict of a save_pretrained folder: model.safetensors, or the shards its index names (transformers
    shards saves above max_shard_size, 5 GB by default)."""
    import json

    from safetensors.torch import load_file

    index = model_dir / "model.safetensors.index.json"
    files = sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.is_file() else ["model.safetensors"]
    weights = {}
    for name in files:
        weights.update(load_file(model_dir / name))
    return weights
