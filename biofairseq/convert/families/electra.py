"""ELECTRA (``ElectraForPreTraining`` discriminator, ``ElectraForMaskedLM`` generator): BioELECTRA, ELECTRA.

One fairseq ``electra`` model holds both towers and their embeddings; transformers publishes each tower as a model of
its own, the discriminator in a folder and its generator beside it (``generator/``, as to-hf writes it). Both towers
are BERT's post-LN encoder (positions from 0, token type 0 folded into the positions, LayerNorm epsilon 1e-12), with
a projection where the embeddings are narrower than a tower (ELECTRA-small). The generator is sized from the
discriminator as google-research/electra sizes it (width x fraction, width / 64 heads, FFN 4 x width); a folder
without one gets a fresh generator of ``--generator-fraction``'s width. Tables equal in both folders (ELECTRA trains
one shared embedding module) become one (``--embedding-sharing tied``), others two (``none``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import torch

from biofairseq.convert import ConvertError
from biofairseq.convert.families.base import Family, common_problems, encoder_config, encoder_settings, type_notes
from biofairseq.convert.layouts import Layout, Transform

if TYPE_CHECKING:
    from transformers import PretrainedConfig, PreTrainedModel

    from biofairseq.checkpoints import FairseqRoberta
    from biofairseq.convert.families import Source
    from biofairseq.convert.vocabulary import Vocabulary
    from biofairseq.models.electra import ElectraModel

GENERATOR_FOLDER = "generator"
DEFAULT_FRACTION = 1 / 3  # ELECTRA-base's, and BioELECTRA's (256 beside 768)
PRESETS = ("electra_tiny", "electra_l4_h256", "electra_l6_h512", "electra_small", "electra_base", "electra_large",
           "bio_electra_base")
EMBEDDINGS = ("word_embeddings.weight", "position_embeddings.weight", "token_type_embeddings.weight",
              "LayerNorm.weight", "LayerNorm.bias")


def _gdes(shared, delta, pad):
    """DeBERTa-v3's gradient-disentangled embedding, materialised: the generator's table + the delta."""
    return shared + delta


def _gdes_positions(shared, delta, pad):
    return (shared + delta)[pad + 1:]  # transformers' ELECTRA counts positions from 0


def electra_layouts(sharing: str) -> tuple[Layout, Layout]:
    """(discriminator, generator) layouts of an ELECTRA checkpoint with this --embedding-sharing."""
    own = "discriminator_embeddings." if sharing == "none" else "embeddings."
    embedding_norm = "embeddings." if sharing == "tied" else "discriminator_embeddings."  # the others have their own
    if sharing == "gdes":
        fixed, embeddings = (), (
            Transform("electra.embeddings.word_embeddings.weight",
                      ("embeddings.embed_tokens.weight", "discriminator_embeddings.token_delta"), _gdes),
            Transform("electra.embeddings.position_embeddings.weight",
                      ("embeddings.embed_positions.weight", "discriminator_embeddings.position_delta"), _gdes_positions),
        )
    else:
        fixed, embeddings = ((own + "embed_tokens.weight", "electra.embeddings.word_embeddings.weight"),
                             (own + "embed_positions.weight", "electra.embeddings.position_embeddings.weight")), ()

    def tower_norms(tower: str, embedding_prefix: str) -> tuple[tuple[str, str], ...]:
        return ((embedding_prefix + "layernorm_embedding", "electra.embeddings.LayerNorm"),
                (tower + ".embed_proj", "electra.embeddings_project"),
                (tower + ".layers.{i}.self_attn_layer_norm", "electra.encoder.layer.{i}.attention.output.LayerNorm"),
                (tower + ".layers.{i}.final_layer_norm", "electra.encoder.layer.{i}.output.LayerNorm"))

    discriminator = Layout(
        f"ELECTRA discriminator ({sharing} embeddings)", "ElectraForPreTraining", "ElectraConfig", "electra",
        norms=tower_norms("discriminator", embedding_norm) + (
            ("discriminator_head.dense", "discriminator_predictions.dense"),
            ("discriminator_head.dense_prediction", "discriminator_predictions.dense_prediction"),
        ),
        layer="discriminator.layers.{i}.", fixed=fixed, transforms=embeddings, positions_from_zero=True,
        drops=("generator.", "generator_head.") + {"tied": (), "gdes": ("embeddings.layernorm_embedding.",),
                                                    "detached": ("embeddings.layernorm_embedding.",),
                                                    "none": ("embeddings.",)}[sharing],
        tower="discriminator",
    )
    generator = Layout(
        "ELECTRA generator", "ElectraForMaskedLM", "ElectraConfig", "electra",
        norms=tower_norms("generator", "embeddings.") + (
            ("generator_head.dense", "generator_predictions.dense"),
            ("generator_head.layer_norm", "generator_predictions.LayerNorm"),
        ),
        layer="generator.layers.{i}.",
        fixed=(
            ("embeddings.embed_tokens.weight", "electra.embeddings.word_embeddings.weight"),
            ("embeddings.embed_positions.weight", "electra.embeddings.position_embeddings.weight"),
            ("generator_head.weight", "generator_lm_head.weight"),
            ("generator_head.bias", "generator_lm_head.bias"),
        ),
        positions_from_zero=True, drops=("discriminator", "discriminator_head."), tower="generator",
    )
    return discriminator, generator


class TowerView(torch.nn.Module):
    """One ELECTRA tower called as a fairseq RoBERTa is: ``(logits, None)``, or hidden states with features_only."""

    def __init__(self, electra: ElectraModel, tower: str) -> None:
        super().__init__()
        self.electra, self.tower = electra, tower

    def forward(self, tokens: torch.Tensor, features_only: bool = False) -> tuple[torch.Tensor, None]:
        hidden = getattr(self.electra, f"{self.tower}_features")(tokens)
        return (hidden if features_only else getattr(self.electra, f"{self.tower}_head")(hidden)), None


def generator_folder(source: Source) -> Optional[Path]:
    """The generator's folder: --generator's, else generator/ inside the discriminator's, else None."""
    if source.generator is not None:
        return Path(source.generator)
    inside = Path(source.path) / GENERATOR_FOLDER
    return inside if (inside / "config.json").is_file() else None


def _generator_problems(discriminator, generator):
    """What keeps a transformers generator from being the fairseq model's generator beside this discriminator."""
    width = generator.hidden_size
    fraction = width / discriminator.hidden_size
    same = ("num_hidden_layers", "embedding_size", "vocab_size", "max_position_embeddings", "hidden_act", "layer_norm_eps")
    problems = [f"generator {name} {getattr(generator, name)} (the discriminator's is {getattr(discriminator, name)}; "
                "fairseq's ELECTRA gives both towers one)" for name in same
                if getattr(generator, name) != getattr(discriminator, name)]
    if generator.num_attention_heads != max(1, width // 64):
        problems.append(f"generator num_attention_heads {generator.num_attention_heads} (fairseq's ELECTRA gives a "
                        f"generator {width} wide {max(1, width // 64)}: its width / 64)")
    if generator.intermediate_size != 4 * width:
        problems.append(f"generator intermediate_size {generator.intermediate_size} (fairseq's ELECTRA: 4 x its width, "
                        f"{4 * width})")
    if round(discriminator.hidden_size * fraction) != width:
        problems.append(f"generator hidden_size {width}")
    if not generator.tie_word_embeddings:
        problems.append("generator tie_word_embeddings false (fairseq's generator head reads the token embeddings)")
    return problems


class ELECTRA(Family):
    name = "ELECTRA"
    model_types = ("electra",)
    fairseq_model = "electra"
    presets = PRESETS
    renumber = True
    recipes = ("bioelectra",)
    published = "BioELECTRA (discriminator and generator), ELECTRA small, base and large"
    has_generator = True
    perplexity = False  # its loss is the generator's and the discriminator's, weighted
    continue_task = "electra --criterion electra"
    reads_doc = ("`ElectraForPreTraining` with its generator `ElectraForMaskedLM` (in `generator/`, or `--generator DIR`; "
                 "without one, a fresh generator of `--generator-fraction`'s width)")
    fairseq_doc = "`electra_*`, both towers, `--layer-norm-eps 1e-12`"
    writes_doc = "`ElectraForPreTraining`, and with `--generator` `ElectraForMaskedLM` in `generator/`"
    vocabulary_doc = "WordPiece, as BERT's (an ELECTRA pretrained here: its learned vocabulary)"

    def init_problem(self, source: object, given: dict) -> Optional[str]:
        init = source.path
        if given.get("EMBEDDING_SHARING", "tied") != "tied":
            return (f"EMBEDDING_SHARING={given['EMBEDDING_SHARING']}: INIT_FROM={init} brings its own embeddings (one "
                    "module for both towers where they are equal, as ELECTRA trains them); drop the setting")
        if generator_folder(source) is not None and given.get("GENERATOR_FRACTION"):
            return (f"GENERATOR_FRACTION={given['GENERATOR_FRACTION']}: INIT_FROM={init} has its generator (in "
                    f"{generator_folder(source)}), whose width is its own; drop the setting (it sizes a fresh generator "
                    "where the folder has none)")
        return None

    def all_layouts(self) -> tuple[Layout, ...]:
        return electra_layouts("tied")

    def problems(self, config: PretrainedConfig, source: Optional[Source] = None) -> list[str]:
        problems = common_problems(config)
        if config.hidden_act != "gelu":
            problems.append(f"hidden_act {config.hidden_act} (transformers' ELECTRA generator head computes gelu "
                            "whatever it says; fairseq's computes hidden_act)")
        folder = generator_folder(source) if source is not None else None
        if folder is not None:
            generator = self._generator_config(folder)
            problems += _generator_problems(config, generator)
        return problems

    def misplaced(self, config: PretrainedConfig) -> Optional[str]:
        if "ElectraForPreTraining" in (config.architectures or ["ElectraForPreTraining"]):
            return None
        return (f"an ELECTRA generator ({', '.join(config.architectures)}), not a discriminator (ElectraForPreTraining): "
                f"give the discriminator's folder, which holds this one as its {GENERATOR_FOLDER}/ folder")

    @staticmethod
    def _generator_config(folder):
        from transformers import AutoConfig

        if not (Path(folder) / "config.json").is_file():
            raise ConvertError(f"{folder}: no config.json; --generator takes the generator's transformers folder "
                               "(ElectraForMaskedLM)")
        config = AutoConfig.from_pretrained(folder)
        if config.model_type != "electra":
            raise ConvertError(f"{folder}: a {config.model_type} model, not an ELECTRA generator (ElectraForMaskedLM)")
        return config

    def settings(self, config: PretrainedConfig, source: Optional[Source] = None,
                 models: Sequence[tuple[Layout, PreTrainedModel]] = ()) -> dict[str, Any]:
        generator = next((m for layout, m in models if layout.tower == "generator"), None)
        if generator is not None:
            fraction = generator.config.hidden_size / config.hidden_size
        else:
            fraction = source.generator_fraction if source is not None and source.generator_fraction else DEFAULT_FRACTION
        sharing = "tied" if generator is None or _same_embeddings([m for _, m in models]) else "none"
        return {**encoder_settings(config, config.max_position_embeddings), "embedding_dim": config.embedding_size,
                "generator_width_fraction": fraction, "embedding_sharing": sharing}

    def read(self, hf_dir: str | Path, config: PretrainedConfig,
             options: Source) -> tuple[list[tuple[Layout, PreTrainedModel]], list[str]]:
        import transformers

        from biofairseq.arguments import first_line

        def load(cls: str, folder: str | Path) -> PreTrainedModel:
            try:
                return getattr(transformers, cls).from_pretrained(folder).float().eval()
            except (ValueError, OSError, KeyError) as error:
                raise ConvertError(f"{folder}: not loadable as {cls} ({first_line(error)})") from None

        discriminator = load("ElectraForPreTraining", hf_dir)
        folder = generator_folder(options)
        notes = [type_notes(config)] if config.type_vocab_size > 1 else []
        if folder is None:
            fraction = options.generator_fraction or DEFAULT_FRACTION
            notes.append(f"no generator (none in {Path(hf_dir) / GENERATOR_FOLDER}, none given with --generator): a "
                         f"fresh one, {fraction:.3g} of the discriminator's width (--generator-fraction), randomly "
                         "initialised")
            return [(electra_layouts("tied")[0], discriminator)], notes
        generator = load("ElectraForMaskedLM", folder)
        sharing = "tied" if _same_embeddings([discriminator, generator]) else "none"
        if sharing == "none":
            notes.append("the two towers' embeddings differ: each keeps its own (--embedding-sharing none)")
        disc_layout, gen_layout = electra_layouts(sharing)
        return [(disc_layout, discriminator), (gen_layout, generator)], notes

    def complete(self, models: list) -> bool:
        return len(models) == 2  # without a generator, the fresh one keeps its initialisation

    def writes(self, fairseq: FairseqRoberta, vocabulary: Vocabulary) -> bool:
        return fairseq.model_name == "electra"

    def layouts(self, fairseq: FairseqRoberta, generator: bool = False) -> list[tuple[Layout, str]]:
        discriminator, generator_layout = electra_layouts(fairseq.args.embedding_sharing)
        return [(discriminator, "")] + ([(generator_layout, GENERATOR_FOLDER)] if generator else [])

    def hf_config(self, fairseq: FairseqRoberta, layout: Layout, positions: int, ids: dict[str, int]) -> dict[str, Any]:
        from biofairseq.models.electra import generator_shape

        args = fairseq.args
        if layout.tower == "generator":
            width, ffn, heads = generator_shape(args)
        else:
            width, ffn, heads = args.encoder_embed_dim, args.encoder_ffn_embed_dim, args.encoder_attention_heads
        return dict(**encoder_config(args, fairseq.dictionary, layout, ids), hidden_size=width,
                    num_attention_heads=heads, intermediate_size=ffn, embedding_size=args.embedding_dim,
                    tie_word_embeddings=True, type_vocab_size=ids["types"],
                    max_position_embeddings=positions - fairseq.dictionary.pad() - 1)

    def view(self, model: torch.nn.Module, layout: Layout) -> TowerView:
        return TowerView(model, layout.tower)

    def card(self, fairseq: FairseqRoberta) -> tuple[str, list[str], Optional[str], Optional[str]]:
        use = ("```python\nfrom transformers import AutoModelForTokenClassification\n\nmodel = "
               "AutoModelForTokenClassification.from_pretrained(\"PATH/TO/THIS/FOLDER\", num_labels=N)\n```")
        return ("ELECTRA discriminator", ["electra", "electra-discriminator"], None, use)


def _same_embeddings(models):
    """Whether both towers' embedding tables and LayerNorm are equal (one module in training)."""
    states = [m.state_dict() for m in models]
    if len(states) < 2:
        return True
    keys = [k for k in states[0] if k.startswith("electra.embeddings.") and k.endswith(EMBEDDINGS)]
    return all(k in states[1] and states[0][k].shape == states[1][k].shape and torch.equal(states[0][k], states[1][k])
               for k in keys)
