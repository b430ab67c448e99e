"""The model families that convert both ways, one object each (``base.Family``; the table is in docs/conversion.md).

``for_config`` finds the family of a transformers folder from its config.json, ``for_fairseq`` that of a fairseq
checkpoint (its model, LayerNorms and vocabulary), and ``inspect`` says, from config.json alone, what a folder is and
what keeps it from converting: what from-hf checks first, and the recipes' settings step before any work.
"""

from __future__ import annotations

from argparse import Namespace
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from biofairseq.convert import ConvertError
from biofairseq.convert.families.base import Family
from biofairseq.convert.families.bert import BERT
from biofairseq.convert.families.electra import ELECTRA
from biofairseq.convert.families.megatron_bert import MegatronBERT
from biofairseq.convert.families.modernbert import ModernBERT
from biofairseq.convert.families.roberta import RoBERTa

if TYPE_CHECKING:
    from transformers import PretrainedConfig

    from biofairseq.checkpoints import FairseqRoberta
    from biofairseq.convert.vocabulary import Vocabulary

FAMILIES = (RoBERTa(), BERT(), MegatronBERT(), ELECTRA(), ModernBERT())


@dataclass(frozen=True)
class Source:
    """A transformers folder to read, and for ELECTRA its generator's folder (None: generator/ inside it, if there)
    and the fresh generator's width fraction where it has none."""

    path: Path
    generator: Optional[Path] = None
    generator_fraction: Optional[float] = None


def named(name: str) -> Family:
    """The family of this name (a conversion report's ``family``)."""
    return next(f for f in FAMILIES if f.name == name)


def docs_table() -> str:
    """docs/conversion.md's table of the families, from their own attributes."""
    rows = ["| family | published models it covers | transformers, read by `from-hf` | fairseq model | transformers, "
            "written by `to-hf` | vocabulary | `INIT_FROM` of |", "|---|---|---|---|---|---|---|"]
    for f in FAMILIES:
        recipes = ", ".join(f"`{r}.sh`" for r in f.recipes)
        rows.append(f"| {f.name} | {f.published} | {f.reads_doc} | {f.fairseq_doc} | {f.writes_doc} | {f.vocabulary_doc} "
                    f"| {recipes} |")
    return "\n".join(rows) + "\n"


def described() -> str:
    """Every family and the transformers model types it reads, for one line."""
    return "; ".join(f"{f.name} ({', '.join(f.model_types)})" for f in FAMILIES)


def for_config(config: PretrainedConfig | Namespace, where: str | Path) -> Family:
    """The family of a transformers config (by its model_type), or one line naming the families there are."""
    family = next((f for f in FAMILIES if config.model_type in f.model_types), None)
    if family is None:
        classes = ", ".join(config.architectures or []) or "no architectures in config.json"
        raise ConvertError(f"{where}: a {config.model_type} model ({classes}); from-hf converts the families "
                           f"{described()}")
    return family


def family_of_class(name: str) -> Optional[Family]:
    """The family whose transformers classes include ``name`` (BertForMaskedLM: BERT), or None."""
    return next((f for f in FAMILIES if name in f.classes()), None)


WEIGHTS = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json", "pytorch_model.bin.index.json")


def weights_problem(path: str | Path) -> Optional[str]:
    """None, or why a transformers folder holds no weights transformers can load (a download cut short)."""
    if any((Path(path) / name).is_file() for name in WEIGHTS):
        return None
    return (f"{path}: no weights ({', '.join(WEIGHTS[:2])} or a sharded index); download the model's whole folder (a "
            "TensorFlow or Flax checkpoint alone is not read)")


LM_HEAD_PREFIXES = ("cls.predictions.", "lm_head.", "head.", "decoder.", "generator_lm_head.")  # the families' heads


def has_lm_head(path: str | Path) -> bool:
    """Whether a transformers folder's weights hold a trained masked-LM head (a BertModel, a sentence-transformers
    folder or a *ForTokenClassification has none: from-hf gives it a random one). Read from the tensors' names
    (a sharded index's or a safetensors header), not the tensors; a fairseq checkpoint (.pt) is ours, with its head."""
    import json

    path = Path(path)
    if str(path).endswith(".pt"):
        return True
    names = []
    for index in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        if (path / index).is_file():
            names = list(json.loads((path / index).read_text())["weight_map"])
    if not names and (path / "model.safetensors").is_file():
        from safetensors import safe_open

        with safe_open(path / "model.safetensors", "pt") as weights:
            names = list(weights.keys())
    elif not names and (path / "pytorch_model.bin").is_file():
        import torch

        names = list(torch.load(path / "pytorch_model.bin", map_location="meta", weights_only=True))
    bare = [name.split(".", 1)[1] if name.startswith(("bert.", "roberta.", "model.")) else name for name in names]
    return any(name.startswith(LM_HEAD_PREFIXES) for name in bare + names)


def for_fairseq(fairseq: FairseqRoberta, vocabulary: Vocabulary) -> Family:
    """The family a loaded fairseq checkpoint goes back to transformers as: its model's, and among fairseq's RoBERTa
    encoders, BERT or Megatron-BERT where its vocabulary is a WordPiece one (a continued BERT)."""
    family = next((f for f in FAMILIES if f.writes(fairseq, vocabulary)), None)
    if family is None:
        raise ConvertError(f"a {fairseq.model_name} encoder with a {vocabulary.kind} vocabulary and these LayerNorms "
                           f"(pre-LN: {bool(fairseq.args.encoder_normalize_before)}, embedding LayerNorm: "
                           f"{bool(fairseq.args.layernorm_embedding)}): no transformers family computes it with that "
                           "tokenizer")
    return family


def inspect(source: Source) -> tuple[Family, PretrainedConfig, list[str]]:
    """(family, config, problems) of a transformers folder, from its config.json (and its generator's) alone."""
    from transformers import AutoConfig

    from biofairseq.arguments import first_line

    import json

    path = Path(source.path)
    if not (path / "config.json").is_file():
        raise ConvertError(f"{path}: no config.json; give a transformers model folder (save_pretrained's output)")
    try:
        declared = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ConvertError(f"{path}/config.json: not JSON ({first_line(error)}); give the folder save_pretrained wrote") from None
    if isinstance(declared, dict) and not declared.get("model_type"):  # an older config (transformers refuses it too)
        guess = family_of_class((declared.get("architectures") or [""])[0])
        example = f": \"model_type\": \"{guess.model_types[0]}\" for its {declared['architectures'][0]}" if guess else ""
        raise ConvertError(f"{path}/config.json: no model_type, which transformers needs to read it; add the model's"
                           f"{example}")
    if not isinstance(declared, dict) or declared.get("model_type") not in {t for f in FAMILIES for t in f.model_types}:
        # no family's: said before transformers is asked (it refuses a type it does not know in a paragraph)
        for_config(Namespace(model_type=declared.get("model_type") if isinstance(declared, dict) else None,
                             architectures=declared.get("architectures") if isinstance(declared, dict) else None), path)
    try:
        config = AutoConfig.from_pretrained(path)
    except (ValueError, OSError, KeyError) as error:
        raise ConvertError(f"{path}: config.json does not load in transformers ({first_line(error)})") from None
    family = for_config(config, path)
    misplaced = family.misplaced(config)
    if misplaced:
        raise ConvertError(f"{path}: {misplaced}")
    return family, config, family.problems(config, source)
