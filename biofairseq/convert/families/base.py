"""What a model family is, and the parts several share.

A family is one object: its fairseq model and the presets that name its shapes, its transformers classes and their
weight layouts both ways (``biofairseq.convert.layouts``), its tokenizer's kind, the settings it reads from a
transformers config (and those no fairseq model of it computes), and the config it writes. ``from_hf`` and ``to_hf``
run the same steps for every family and ask it for these; the recipes' settings step asks it whether a folder given
as INIT_FROM converts, before any work.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from biofairseq.convert import ConvertError, layouts

if TYPE_CHECKING:
    from argparse import Namespace

    import torch
    from fairseq.data import Dictionary
    from omegaconf import DictConfig
    from transformers import PretrainedConfig, PreTrainedModel

    from biofairseq.checkpoints import FairseqRoberta
    from biofairseq.convert.families import Source
    from biofairseq.convert.layouts import Layout
    from biofairseq.convert.vocabulary import Vocabulary


class Family:
    name = ""  # in messages and docs
    model_types = ()  # transformers config.model_type values it reads
    fairseq_model = ""  # the fairseq model it becomes (--arch presets of it)
    presets = ()  # --arch presets from-hf names a shape with (the one needing fewest flags wins)
    renumber = False  # ids move so that fairseq's <s> <pad> </s> <unk> are 0-3 (its special tokens are elsewhere)
    recipes = ()  # the recipes whose INIT_FROM continues it (recipes/NAME.sh)
    published = ""  # the published models it covers, for the docs
    eps = "layer_norm_eps"  # the transformers config's LayerNorm epsilon
    has_generator = False  # a second tower (ELECTRA's generator): from-hf --generator, to-hf --generator
    perplexity = True  # its validation loss is a masked LM's, whose perplexity the model card gives
    continue_task = "document_mlm --criterion masked_lm_accuracy"  # fairseq's task and criterion that continue it
    # docs/conversion.md's table of the families (``families.docs_table``): what each column says of it
    reads_doc = writes_doc = fairseq_doc = vocabulary_doc = ""

    def complete(self, models: list) -> bool:
        """Whether the folder's models give every fairseq tensor (else the parts it lacks keep fairseq's random
        initialisation: a fresh ELECTRA generator)."""
        return True

    def init_problem(self, source: object, given: dict) -> Optional[str]:
        """None, or the line saying why a recipe setting given with INIT_FROM (``given``: {name: value}) cannot apply to
        this family's folder, before any work."""
        return None

    # ---- from-hf: reading a transformers folder

    def misplaced(self, config: PretrainedConfig) -> Optional[str]:
        """None, or why this folder is the wrong part of a model (an ELECTRA's generator given as the model)."""
        return None

    def problems(self, config: PretrainedConfig, source: Optional[Source] = None) -> list[str]:
        """The settings of a transformers config that no fairseq model of the family computes, each named; [] if none.
        Read from config.json alone, so that the recipes' settings step refuses a folder before any work."""
        return []

    def settings(self, config: PretrainedConfig, source: Optional[Source] = None,
                 models: Sequence[tuple[Layout, PreTrainedModel]] = ()) -> dict[str, Any]:
        """The fairseq model's settings (names of its --arch flags) for a transformers config without problems."""
        raise NotImplementedError

    def classes(self) -> list[str]:
        """The transformers classes of its layouts (what from-hf reads, what to-hf writes)."""
        return [c for layout in self.all_layouts() for c in (layout.model_class, *layout.also_reads)]

    def all_layouts(self) -> tuple[Layout, ...]:
        return ()

    def max_length(self, config: PretrainedConfig) -> int:
        """The longest sequence the model embeds (its position table counted from position 0)."""
        return config.max_position_embeddings

    def read(self, hf_dir: str | Path, config: PretrainedConfig,
             options: Source) -> tuple[list[tuple[Layout, PreTrainedModel]], list[str]]:
        """([(layout, transformers model)], notes): the models of the folder (ELECTRA: both towers) in fp32 eval mode."""
        import transformers

        from biofairseq.arguments import first_line

        try:
            model, info = transformers.AutoModelForMaskedLM.from_pretrained(hf_dir, output_loading_info=True)
        except (ValueError, OSError, KeyError) as error:
            raise ConvertError(f"{hf_dir}: not loadable as a masked LM ({first_line(error)})") from None
        layout = self.layout_for(type(model).__name__, config)
        if layout is None:
            raise ConvertError(f"{hf_dir}: a {type(model).__name__}, which the {self.name} conversion does not read")
        notes = []
        if any(k.startswith(("lm_head.", "head.", "decoder.", "cls.")) for k in info["missing_keys"]):
            notes.append("the model has no trained LM head: fairseq gets transformers' random initialisation")
        if getattr(config, "type_vocab_size", 1) > 1:
            notes.append(type_notes(config))
        return [(layout, model.float().eval())], notes

    def layout_for(self, model_class: str, config: PretrainedConfig) -> Optional[Layout]:
        """The layout of a transformers class, or None."""
        return None

    # ---- to-hf: writing a fairseq checkpoint as this family

    def writes(self, fairseq: FairseqRoberta, vocabulary: Vocabulary) -> bool:
        """Whether a loaded fairseq checkpoint (``biofairseq.checkpoints.FairseqRoberta``) with this vocabulary
        (``biofairseq.convert.vocabulary.Vocabulary``) goes back to transformers as this family."""
        return False

    def layouts(self, fairseq: FairseqRoberta, generator: bool = False) -> list[tuple[Layout, str]]:
        """[(layout, subfolder)]: what to-hf writes (ELECTRA: the discriminator, and the generator in generator/)."""
        raise NotImplementedError

    def hf_config(self, fairseq: FairseqRoberta, layout: Layout, positions: int, ids: dict[str, int]) -> dict[str, Any]:
        """The transformers config's settings. ``positions``: the fairseq position table's rows (0 if it has none);
        ``ids``: the transformers ids of pad, bos and eos."""
        raise NotImplementedError

    def view(self, model: torch.nn.Module, layout: Layout) -> torch.nn.Module:
        """What the parity check calls for this layout: the fairseq model itself, or one tower of it."""
        return model

    def card(self, fairseq: FairseqRoberta) -> tuple[str, list[str], Optional[str], Optional[str]]:
        """(what the model card calls the model, its tags, its pipeline tag, its usage snippet)."""
        return ("masked language model", ["fill-mask", self.name.lower()], "fill-mask", None)


def type_notes(config: PretrainedConfig) -> str:
    return (f"type_vocab_size {config.type_vocab_size}: token type 0 is folded into the positions (fairseq has no token "
            "types; transformers adds type 0 to every token given no token_type_ids); the others are not kept")


def common_problems(config: PretrainedConfig) -> list[str]:
    """What no fairseq encoder computes, in any BERT-like config: its activation, positions that are not learned
    absolute ones, causal (decoder) attention."""
    act = getattr(config, "hidden_act", "gelu")
    return [name for name, wrong in (
        (f"hidden_act {act} (fairseq computes {', '.join(layouts.ACTIVATIONS.values())} only)",
         fairseq_activation(act) is None),
        (f"position_embedding_type {getattr(config, 'position_embedding_type', None)} (fairseq has learned absolute "
         "positions only)", getattr(config, "position_embedding_type", None) not in (None, "absolute")),
        ("is_decoder (causal attention; fairseq's encoder attends both ways)", getattr(config, "is_decoder", False)),
        ("add_cross_attention (a decoder's cross-attention)", getattr(config, "add_cross_attention", False)),
    ) if wrong]


def fairseq_activation(hidden_act: object) -> Optional[str]:
    return {v: k for k, v in layouts.ACTIVATIONS.items()}.get(hidden_act) if isinstance(hidden_act, str) else None


def encoder_settings(config: PretrainedConfig, max_positions: int) -> dict[str, Any]:
    """The settings every BERT-like config gives a fairseq encoder the same way."""
    return {
        "encoder_layers": config.num_hidden_layers, "encoder_embed_dim": config.hidden_size,
        "encoder_ffn_embed_dim": config.intermediate_size, "encoder_attention_heads": config.num_attention_heads,
        "max_positions": max_positions, "activation_fn": fairseq_activation(config.hidden_act),
        "dropout": config.hidden_dropout_prob, "attention_dropout": config.attention_probs_dropout_prob,
        "layer_norm_eps": float(config.layer_norm_eps),
    }


def encoder_config(args: Namespace | DictConfig, dictionary: Dictionary, layout: Layout,
                   ids: dict[str, int]) -> dict[str, Any]:
    """The transformers settings of a fairseq encoder that every BERT-like config takes the same way."""
    return dict(
        vocab_size=len(dictionary), num_hidden_layers=args.encoder_layers,
        hidden_act=layouts.ACTIVATIONS[args.activation_fn], hidden_dropout_prob=args.dropout,
        attention_probs_dropout_prob=args.attention_dropout, layer_norm_eps=layer_norm_eps(args),
        pad_token_id=ids["pad"], bos_token_id=ids["bos"], eos_token_id=ids["eos"], architectures=[layout.model_class],
    )


def layer_norm_eps(args: Namespace | DictConfig) -> float:
    """A fairseq model's LayerNorm epsilon (fairseq's 1e-5 in a checkpoint from before --layer-norm-eps)."""
    from fairseq.utils import safe_getattr

    from biofairseq.models.layer_norms import DEFAULT

    return float(safe_getattr(args, "layer_norm_eps", DEFAULT))
