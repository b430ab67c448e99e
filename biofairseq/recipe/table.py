"""The recipes' settings, in one list: what each may hold (a kind, biofairseq/recipe/kinds.py), whether ``recipe.env``
records it, the first stage whose outputs it shapes (so that a rerun with another value stops rather than mix two
settings in one run), what it means and the flag it becomes (``flags``); and the presets
(biofairseq/recipe/presets.py) and the environment merged into one recipe's values, each checked (``merge``).
docs/recipes.md's tables of them: biofairseq.recipe.settings_docs."""

import difflib
import os
import re
from dataclasses import dataclass, field, replace
from typing import Optional

from biofairseq.model_shapes import ELECTRA_SHARING
from biofairseq.recipe import kinds
from biofairseq.recipe.presets import RECIPES, SHARED, Derived, Recipe, Required, continuation, value_of

POSITIONS = 512  # the presets' position table (--max-positions): no sample may be longer
MODERNBERT_CONTEXT = 8192  # bio_modernbert's --max-positions (rotary positions: a longest sequence, no table)
SEEDS = 2**32 - 1  # the largest seed numpy takes

# The stages whose outputs the recorded settings shape, in order: (number, title, outputs under RUN_DIR). A setting
# of one may not change once any of its outputs exists (FORCE from that stage, or a new RUN_DIR), one of a stage not
# yet run may.
STAGES = {
    "clean": ("1", "clean the sources", ("clean",)),
    "vocabulary": ("2", "the vocabulary", ("vocab", "init", "init_extended")),
    "binarize": ("3", "encode and binarize", ("data-bin",)),
    "pretrain": ("4", "pretrain", ("pretrain/**/*.pt",)),
    "ner": ("7", "fine-tune on NER", ("ner/*/*", "breakout/*.json")),
}
# FORCE=STAGE: what goes before the first stage runs, from that stage on (FORCE=1 is FORCE=clean): each stage's
# outputs under RUN_DIR, in the recipes' order (the break-out rates of the NER data go with NER)
FORCED = {
    "clean": ("clean",),
    "vocabulary": ("vocab", "init", "init.hf", "init_extended"),
    "binarize": ("data-bin",),
    "pretrain": ("pretrain",),
    "convert": ("hf",),
    "ner": ("ner", "breakout"),
    "report": ("report.md", "report.json", "report.png"),
}


def redone(force: str) -> list:
    """The stages FORCE redoes, in order: every one (1), those from a stage on (its name), none (0)."""
    stages = list(FORCED)
    return stages if force == "1" else stages[stages.index(force):] if force in FORCED else []


NAMED_PATHS = ("SOURCES", "NER_DATA")  # NAME=PATH ...: compared, and recorded, by the files they name
GRID = ("NER_LRS", "NER_SEEDS")  # the sweep's grid: compared as sets, free to grow or shrink after the sweep ran


def path_pairs(value: str) -> list:
    """[(name, path)] of a NAME=PATH ... setting (its kind, kinds.named_paths, has checked it)."""
    return [tuple(pair.partition("=")[::2]) for pair in value.split()]


def _meaning(name, value):
    """What a path setting names, for comparing two runs' values: each path resolved (links followed, a relative one
    from here, as an older recipe.env may hold); None for other settings."""
    if name in NAMED_PATHS:
        return [(name, os.path.realpath(path)) for name, path in path_pairs(value)]
    if name == "INIT_FROM":
        return os.path.realpath(value) if value else ""
    return None


def same(before: str, now: str, name: Optional[str] = None) -> bool:
    """Equal values of a setting: as text, as the files they name (notes=notes and notes=/abs/notes), or as numbers
    item by item (0.5 and 0.50, 1e-3 and 0.001)."""
    if before == now:
        return True
    if _meaning(name, before) is not None:
        return _meaning(name, before) == _meaning(name, now)
    a, b = re.split(r"[,\s]+", before.strip()), re.split(r"[,\s]+", now.strip())
    if name in GRID:  # its order and repeats do not change the runs
        try:
            return {float(x) for x in a} == {float(y) for y in b}
        except ValueError:
            return False
    try:
        return len(a) == len(b) and all(float(x) == float(y) for x, y in zip(a, b))
    except ValueError:
        return False


@dataclass(frozen=True)
class Setting:
    name: str
    kind: object  # value -> None, or what is wrong with it
    stage: str = None  # the first stage whose output it shapes (STAGES); None: recorded but free to change
    recorded: bool = True  # in recipe.env: what shapes the results, not where or how fast they are made
    help: str = ""
    flags: dict = field(default_factory=dict)  # {command group: the flag it becomes there} (``flags``)
    omit: object = ()  # values (or a test of the value) for which the flag is left out
    switch: bool = False  # the flag alone where the value is on (1)


def _flag_pairs(values: dict, group: str, given: Optional[dict] = None) -> list:
    """(flag, value) of a command group's settings in the table's order; value None for a switch that is on; none
    where the value is one the setting omits. ``given``: {flag: value} in place of the setting's."""
    given, pairs = dict(given or {}), []
    for s in SETTINGS:
        flag = s.flags.get(group)
        if flag is None or s.name not in values:
            continue
        value = str(given.pop(flag, values[s.name]))
        if not (s.omit(value) if callable(s.omit) else value in s.omit):
            pairs.append((flag, None if s.switch else value))
    if given:
        raise ValueError(f"{sorted(given)}: no setting of {group} carries these flags")
    return pairs


def flags(values: dict, group: str, given: Optional[dict] = None) -> list:
    """The flags of a command group (``Setting.flags``) from the settings that carry them, in the table's order:
    ``--flag value``, a switch's flag alone, none where the value is one it omits. ``given``: {flag: value} in place of
    the setting's (a model's own learning rate)."""
    return [word for flag, value in _flag_pairs(values, group, given) for word in (flag, value) if word is not None]


def flag_values(values: dict, group: str, given: Optional[dict] = None) -> dict:
    """{flag: value} of a command group's flags with a value (``flags``), for a title or note that names one."""
    return {flag: value for flag, value in _flag_pairs(values, group, given) if value is not None}


def group_flags(group: str) -> dict:
    """{flag: setting} of a command group, for the checks and the docs."""
    return {s.flags[group]: s.name for s in SETTINGS if group in s.flags}


# the biofairseq-ner sweep flags each sweep gives from its data set, model and run folder (biofairseq.recipe.plan)
NER_SWEEP_PER_RUN = {"--model": "the pretrained model", "--train": "NER_DATA", "--dev": "NER_DATA",
                     "--test": "NER_DATA", "--output-dir": "RUN_DIR", "--label-scheme": "NER_LABELLINGS"}


def ner_sweep_flags() -> dict:
    """{flag: the setting or path it comes from} of every biofairseq-ner sweep flag the recipes give (NER_EXTRA may
    give none of them)."""
    return {**group_flags("ner"), **group_flags("ner_gpu"), **NER_SWEEP_PER_RUN}


LR = kinds.number_in(0, 1, low_open=True)
SAMPLE = kinds.length(POSITIONS, "must be at most {most}, the presets' position table")
MODERNBERT = kinds.length(MODERNBERT_CONTEXT, "must be at most {most}, ModernBERT's context")

SETTINGS = [  # recipe.env's order
    # run control and hardware: checked, not recorded
    Setting("RUN_DIR", kinds.run_dir, recorded=False, help="where everything goes"),
    Setting("STOP_AFTER", kinds.one_of("none", "settings", "binarize"), recorded=False,
            help="settings: print the resolved settings and stop before any work; binarize: stop after stages 1-3"),
    Setting("FORCE", kinds.one_of("0", "1", *FORCED), recorded=False,
            help="redo from a stage on, its and later outputs removed first: 1 (every stage), " + ", ".join(FORCED)
                 + "; 0: none"),
    Setting("NUM_GPUS", kinds.or_empty(kinds.whole), recorded=False, help="GPUs per machine (empty: all torch sees; 0: CPU)"),
    Setting("NUM_NODES", kinds.positive, recorded=False, help="machines for pretraining; above 1, under Slurm's srun"),
    Setting("WORKERS", kinds.positive, recorded=False,
            help="processes for cleaning and binarizing (with CORPUS_LAUNCHER=slurm: the cleaning's tasks at a time); "
                 "with NUM_NODES above 1 also each machine's cores for pretraining (srun --cpus-per-task)",
            flags={"clean": "--workers", "vocabulary": "--workers"}),
    Setting("NER_GPU", kinds.each(kinds.whole, "0,1,2,3"), recorded=False,
            help="the GPU the NER runs use (a place among CUDA_VISIBLE_DEVICES's GPUs where it is set, as in a Slurm "
                 "allocation); several, comma-separated: the sweep's runs spread over them, one a GPU",
            flags={"ner_gpu": "--devices"}),
    Setting("DISTRIBUTED_PORT", kinds.port, recorded=False, help="fairseq's --distributed-port on several machines"),
    Setting("CORPUS_LAUNCHER", kinds.one_of("local", "slurm", "submitit-local"), recorded=False,
            help="the corpus stages' jobs: WORKERS local processes, Slurm job arrays of one-core tasks (through "
                 "submitit, from the machine the recipe runs on), or submitit's local executor",
            flags={"clean_slurm": "--launcher"}),
    Setting("CORPUS_SLURM_PARTITION", kinds.or_empty(kinds.partition), recorded=False,
            help="the Slurm partition of the corpus stages' arrays (empty: the cluster's default)",
            flags={"clean_slurm": "--slurm-partition"}, omit=("",)),
    Setting("CORPUS_SLURM_TIME", kinds.positive, recorded=False, help="minutes per corpus array task",
            flags={"clean_slurm": "--slurm-time"}),
    Setting("CORPUS_SLURM_MEM_GB", kinds.or_empty(kinds.positive), recorded=False,
            help="memory per corpus array task (empty: the partition's default)",
            flags={"clean_slurm": "--slurm-mem-gb"}, omit=("",)),
    Setting("DATA_WORKERS", kinds.whole, recorded=False,
            help="pretraining's data-loading processes per GPU (fairseq's --num-workers)",
            flags={"train": "--num-workers"}),
    Setting("KEEP_INTERVAL_UPDATES", kinds.positive, recorded=False,
            help="the pretraining checkpoints kept besides the last and the best (fairseq's --keep-interval-updates)",
            flags={"train": "--keep-interval-updates"}),
    Setting("BATCH_PER_DEVICE", kinds.positive, recorded=False, help="sequences per device and step (--batch-size)",
            flags={"length": "--batch-size"}),
    Setting("PHASE2_BATCH_PER_DEVICE", kinds.positive, recorded=False, help="the same in the second length phase",
            flags={"length2": "--batch-size"}),
    Setting("LOG_INTERVAL", kinds.positive, recorded=False, help="updates between training log lines",
            flags={"train": "--log-interval"}),
    # recorded
    Setting("PRESET", kinds.text, "clean", help="tiny, pilot, one_gpu or paper (the recipe's)"),
    Setting("SOURCES", kinds.named_paths("PATH, PATH a file or folder of text", "file or folder"), "clean",
            help="pretraining text, space-separated NAME=PATH (JSON lines, plain text or BRAT, optionally compressed)"),
    Setting("NER_DATA", kinds.or_empty(kinds.named_paths("DIR, DIR a folder with train and valid (or dev)", "folder")), "ner",
            help="NER data sets, space-separated NAME=DIR, DIR holding train, valid (or dev, devel) and optionally test, "
                 "each a BRAT folder or a CoNLL file (.conll, .tsv, .bio); empty: pretrain and convert only"),
    Setting("TEXT_DOCS", kinds.one_of("blank-line", "line", "file"), "clean",
            help="plain text's documents: separated by blank lines, one per line, or one per file",
            flags={"clean": "--text-docs"}),
    Setting("TEXT_FIELD", kinds.name, "clean", help="the text's field in JSON lines",
            flags={"clean": "--text-field"}),
    Setting("VALID_DOCS", kinds.positive, "clean", help="documents held out for validation",
            flags={"clean": "--valid-docs"}),
    # 256 bytes and the special symbols at least
    Setting("VOCAB_SIZE", kinds.whole_between(300), "vocabulary", help="entries of the learned vocabulary",
            flags={"vocabulary": "--vocab-size"}),
    Setting("SHARD_MB", kinds.megabytes, "binarize",
            help="the training data-bin in shards of at most this many MB of encoded text (0: one data-bin)"),
    Setting("INIT_FROM", kinds.or_empty(kinds.init_from), "vocabulary",
            help="continual pretraining: a transformers folder or a fairseq checkpoint (.pt), whose weights start and "
                 "whose vocabulary replaces the learned one"),
    Setting("VOCAB_EXTEND", kinds.whole, "vocabulary",
            help="continual pretraining: up to this many new tokens for INIT_FROM's vocabulary, the words of the "
                 "training text it cuts into several pieces that shorten the text most (WordPiece or byte-level BPE), "
                 "each initialised from its pieces; 0: none"),
    Setting("ARCH", kinds.architecture("BIO_ROBERTA"), "pretrain", help="the model's shape (biofairseq/model_shapes.py)"),
    Setting("TOKENS_PER_SAMPLE", SAMPLE, "pretrain", help="tokens per sequence",
            flags={"length": "--tokens-per-sample"}),
    Setting("SEQUENCES_PER_UPDATE", kinds.positive, "pretrain", help="the batch, split over devices and --update-freq"),
    Setting("PEAK_LR", LR, "pretrain", help="the learning rate after warm-up, decaying linearly to 0",
            flags={"optimizer": "--lr"}),
    Setting("WARMUP_UPDATES", kinds.whole, "pretrain", help="updates of linear warm-up",
            flags={"optimizer": "--warmup-updates"}),
    Setting("MAX_UPDATE", kinds.positive, "pretrain", help="updates of pretraining"),
    # which checkpoints there are to keep (KEEP=best)
    Setting("SAVE_INTERVAL_UPDATES", kinds.positive, "pretrain", help="updates between checkpoints and validations",
            flags={"train": "--save-interval-updates"}),
    Setting("PHASE2_SHARE", kinds.share, "pretrain", help="the share of MAX_UPDATE at the second length (0: one length)"),
    Setting("PHASE2_TOKENS_PER_SAMPLE", kinds.length(POSITIONS, "the presets' position table has {most} rows"), "pretrain",
            help="tokens per sequence in the second phase",
            flags={"length2": "--tokens-per-sample"}),
    Setting("PHASE2_SEQUENCES_PER_UPDATE", kinds.positive, "pretrain", help="the batch in the second phase"),
    Setting("FAST_PATH", kinds.one_of("0", "1"), "pretrain",
            help="1: --attention sdpa, --pack-documents and --optimizer fused_adamw (same weights and schedule)"),
    Setting("PRECISION", kinds.one_of("fp16", "bf16"), "pretrain",
            help="on GPU: fp16 (--fp16) or bf16 (--amp-bf16); the CPU trains in fp32"),
    Setting("COMPILE", kinds.one_of("none", "inductor", "aot_eager"), "pretrain",
            help="the encoder layers through torch.compile (biofairseq-train --compile)",
            flags={"train": "--compile"}, omit=("none",)),
    Setting("WEIGHT_DECAY_EXCLUDE", kinds.one_of("none", "norm_and_bias"), "pretrain",
            help="norm_and_bias: no weight decay on LayerNorm weights and biases",
            flags={"optimizer": "--weight-decay-exclude"}, omit=("none",)),
    # the sweep's grid may grow or shrink on a rerun: its finished runs are kept, the missing ones run, the report
    # holds the runs asked for
    Setting("NER_LRS", kinds.each(LR, "5e-5,1e-4"), None, help="the sweep's learning rates, comma-separated",
            flags={"ner": "--lrs"}),
    Setting("NER_SEEDS", kinds.each(kinds.whole_between(0, SEEDS, ", the largest seed numpy takes"), "1,2,3"), None,
            help="the sweep's seeds, comma-separated",
            flags={"ner": "--seeds"}),
    Setting("NER_EPOCHS", kinds.number_in(0, None, low_open=True), "ner", help="epochs of each NER run",
            flags={"ner": "--epochs"}),
    Setting("NER_MAX_LENGTH", SAMPLE, "ner", help="tokens per NER window",
            flags={"ner": "--max-length"}),
    Setting("NER_BATCH", kinds.positive, "ner", help="NER sequences per step",
            flags={"ner": "--batch-size"}),
    Setting("NER_ACCUMULATION", kinds.positive, "ner", help="NER gradient accumulation steps",
            flags={"ner": "--gradient-accumulation"}),
    Setting("NER_WARMUP_RATIO", kinds.number_in(0, 1, high_open=True), "ner", help="the share of NER steps warming up",
            flags={"ner": "--warmup-ratio"}),
    Setting("NER_LAYERWISE_DECAY", kinds.number_in(0, 1, low_open=True), "ner",
            help="ELECTRA's layer-wise learning-rate decay (1: none)",
            flags={"ner": "--layerwise-lr-decay"}, omit=lambda value: float(value) == 1),
    Setting("NER_LABELLINGS", kinds.each_of("whole-word", "sub-token"), "ner",
            help="whole-word and/or sub-token: each model fine-tuned each way (empty: whole-word)"),
    Setting("NER_EXTRA", kinds.ner_flags(ner_sweep_flags), "ner", help="more biofairseq-ner sweep flags"),
    # a twin more or less: new outputs, none changed
    Setting("BASELINE", kinds.baseline,
            help="random-init: also fine-tune a randomly initialised twin of the model, to show what pretraining adds; "
                 "original: INIT_FROM's model as given, to show what continuing it adds; both (space-separated), or none"),
    # what to do after stage 5's check, which it does not change
    Setting("WEAK_PRETRAINING", kinds.one_of("stop", "continue"),
            help="stop before fine-tuning a model no better than word frequencies (stop), or say so and go on"),
    Setting("CLIP_NORM", kinds.number_in(0, None), "pretrain", help="gradient clipping (0: none)",
            flags={"optimizer": "--clip-norm"}),
    Setting("CORPUS_LANG", kinds.language, "clean", help="the corpus language (a code of fastText's lid.176, as en): the cleaning keeps its documents",
            flags={"clean": "--lang", "breakout": "--lang", "to-hf": "--language"}),
    Setting("MASK_PROB", kinds.number_in(0, 1, low_open=True, high_open=True), "pretrain", help="the share of tokens masked",
            flags={"masking": "--mask-prob"}),
    Setting("WEIGHT_DECAY", kinds.number_in(0, None), "pretrain", help="AdamW's weight decay",
            flags={"optimizer": "--weight-decay"}),
    Setting("VOCAB_TYPE", kinds.one_of("bytelevel-bpe", "sentencepiece"), "vocabulary", help="the vocabulary's kind"),
    Setting("EMBEDDING_SHARING", kinds.one_of(*ELECTRA_SHARING), "pretrain",
            help="tied (ELECTRA's), gdes (DeBERTa-v3's), detached (no gradient from the discriminator) or none",
            flags={"new_model": "--embedding-sharing"}),
    Setting("SAMPLING_TEMPERATURE", kinds.number_in(0, None, low_open=True), "pretrain",
            help="the generator's samples come from softmax(logits / T)",
            flags={"model": "--sampling-temperature"}),
    Setting("SAMPLING_TEMPERATURE_FINAL", kinds.number_in(0, None, low_open=True), "pretrain",
            help="annealed linearly from SAMPLING_TEMPERATURE to this over MAX_UPDATE",
            flags={"model": "--sampling-temperature-final"}),
    Setting("GENERATOR_FRACTION", kinds.or_empty(kinds.number_in(0, 1, low_open=True)), "pretrain",
            help="the generator's width as a share of the discriminator's (empty: ARCH's own)",
            flags={"new_model": "--generator-width-fraction", "from-hf": "--generator-fraction"}, omit=("",)),
    Setting("VOCAB_SIZES", kinds.each(kinds.whole_between(300), "30000,50000"), "vocabulary",
            help="the SentencePiece vocabularies, comma-separated: one data-bin and model each"),
    Setting("CHECKPOINT_ACTIVATIONS", kinds.one_of("0", "1"), "pretrain",
            help="1: recompute activations in the backward pass (--checkpoint-activations)",
            flags={"model": "--checkpoint-activations"}, omit=("0",), switch=True),
    Setting("BASE_ARCH", kinds.architecture("BIO_ROBERTA"), "pretrain", help="the student's shape"),
    Setting("LARGE_ARCH", kinds.architecture("BIO_ROBERTA"), "pretrain", help="the teacher's shape"),
    Setting("BASE_LR", LR, "pretrain", help="the student's peak learning rate"),
    Setting("LARGE_LR", LR, "pretrain", help="the teacher's peak learning rate"),
    Setting("LARGE_MAX_UPDATE", kinds.positive, "pretrain", help="the teacher's updates"),
    Setting("DISTIL_UPDATES", kinds.positive, "pretrain", help="updates of distillation, and of its control"),
    Setting("DISTIL_LR", LR, "pretrain", help="their peak learning rate"),
    Setting("DISTIL_WARMUP_UPDATES", kinds.whole, "pretrain", help="their warm-up"),
    Setting("ALPHA_MLM", kinds.number_in(0, None), "pretrain", help="the distillation loss's masked-LM weight",
            flags={"distillation": "--alpha-mlm"}),
    Setting("ALPHA_KL", kinds.number_in(0, None), "pretrain", help="its KL weight",
            flags={"distillation": "--alpha-kl"}),
    Setting("TEMPERATURE", kinds.number_in(0, None, low_open=True), "pretrain", help="its softening temperature",
            flags={"distillation": "--temperature"}),
    Setting("ALPHA_COS", kinds.number_in(0, None), "pretrain", help="its cosine weight (0: no alignment)",
            flags={"distillation": "--alpha-cos"}),
    Setting("ADAM_BETAS", kinds.betas, "pretrain", help="Adam's (beta1,beta2)",
            flags={"optimizer": "--adam-betas"}),
    Setting("ADAM_EPS", kinds.number_in(0, None, low_open=True), "pretrain", help="Adam's epsilon",
            flags={"optimizer": "--adam-eps"}),
    Setting("DROPOUT", kinds.number_in(0, 1, high_open=True), "pretrain", help="dropout",
            flags={"model": "--dropout"}),
    Setting("ATTENTION_DROPOUT", kinds.number_in(0, 1, high_open=True), "pretrain",
            help="dropout of the attention weights",
            flags={"model": "--attention-dropout"}),
    Setting("LEAVE_UNMASKED_PROB", kinds.number_in(0, 1), "pretrain",
            help="the share of the selected tokens left as they are (BERT's 80/10/10: 0.1)",
            flags={"masking": "--leave-unmasked-prob"}),
    Setting("RANDOM_TOKEN_PROB", kinds.number_in(0, 1), "pretrain",
            help="the share of the selected tokens replaced by a random token (BERT's 80/10/10: 0.1)",
            flags={"masking": "--random-token-prob"}),
    Setting("DISCRIMINATOR_WEIGHT", kinds.number_in(0, None, low_open=True), "pretrain",
            help="ELECTRA's lambda: the discriminator's loss weight against the generator's",
            flags={"electra": "--discriminator-weight"}),
    Setting("SEED", kinds.whole_between(0, SEEDS, ", the largest seed numpy takes"), "pretrain",
            help="pretraining's seed: initialisation, masking, batch order",
            flags={"train": "--seed"}),
    Setting("CONTINUE_EPOCHS", kinds.or_empty(kinds.number_in(0, None, low_open=True)), "pretrain",
            help="continual pretraining's length in passes over the training text (its samples), at most MAX_UPDATE "
                 "updates (its warm-up and checkpoint interval shortened in proportion); empty: MAX_UPDATE updates"),
    Setting("HEAD_WARMUP_UPDATES", kinds.whole, "pretrain",
            help="updates training the LM head alone, the encoder held fixed, before the whole model (a model "
                 "published without a trained head); 0: none"),
    Setting("HEAD_WARMUP_LR", LR, "pretrain", help="the head warm-up's peak learning rate",
            flags={"head": "--lr"}),
]
BY_NAME = {s.name: s for s in SETTINGS}

KINDS = {  # a recipe's own kind of a setting, in place of the list's
    "bioelectra": {"ARCH": kinds.architecture("ELECTRA")},
    "modernbert": {"ARCH": kinds.architecture("BIO_MODERNBERT"), "TOKENS_PER_SAMPLE": MODERNBERT,
                   "PHASE2_TOKENS_PER_SAMPLE": MODERNBERT, "NER_MAX_LENGTH": MODERNBERT},
}

# settings checked together: (name, other, what must hold of their values, the fix)
TOGETHER = [
    ("WARMUP_UPDATES", "MAX_UPDATE", lambda warmup, total: int(warmup) <= int(total), "at most MAX_UPDATE"),
    ("DISTIL_WARMUP_UPDATES", "DISTIL_UPDATES", lambda warmup, total: int(warmup) <= int(total), "at most DISTIL_UPDATES"),
    ("LEAVE_UNMASKED_PROB", "RANDOM_TOKEN_PROB", lambda leave, swap: float(leave) + float(swap) <= 1,
     "at most 1 with RANDOM_TOKEN_PROB (the rest of the selected tokens become <mask>)"),
    ("GENERATOR_FRACTION", "ARCH", lambda fraction, arch: fraction == "" or _generator_fits(arch, float(fraction)),
     "a share of ARCH's width that gives its generator whole heads of 64 (or under 128 wide), as 0.25"),
]


def _generator_fits(arch, fraction) -> bool:
    from biofairseq.model_shapes import ELECTRA, electra_generator

    try:
        electra_generator(ELECTRA[arch]["width"], fraction)
    except ValueError:
        return False
    return True


class SettingsError(ValueError):
    pass


def recipe_of(name: str) -> Recipe:
    if name not in RECIPES:
        raise SettingsError(f"{name}: not a recipe; use one of: {' '.join(RECIPES)}")
    return RECIPES[name]


def names(recipe: str) -> list:
    """The settings a recipe takes from the environment, in the list's order."""
    r = recipe_of(recipe)
    tables = [SHARED, r.defaults, *r.presets.values()]
    return [s.name for s in SETTINGS if any(s.name in t for t in tables) and s.name not in r.fixed]


def of(recipe: str) -> list:
    """The recipe's settings (Setting, with the recipe's kinds), in the list's order."""
    own = KINDS.get(recipe, {})
    return [replace(s, kind=own[s.name]) if s.name in own else s for s in map(BY_NAME.get, names(recipe))]


def kind_of(recipe: str, name: str) -> kinds.Kind:
    return KINDS.get(recipe, {}).get(name, BY_NAME[name].kind)


def check_value(recipe: str, name: str, value: str) -> None:
    problem = kind_of(recipe, name)(value)
    if problem:
        raise SettingsError(f"{name}={value}: {problem}")


class Values(dict):
    """The resolved values, computing a Derived one when first read; ``integer`` reads one as a checked whole number."""

    def __init__(self, recipe, entries) -> None:
        super().__init__()
        self.recipe, self.entries = recipe, entries

    def __missing__(self, name):
        entry = self.entries[name]
        self[name] = entry.compute(self) if isinstance(entry, Derived) else entry
        return self[name]

    def integer(self, name: str) -> int:
        check_value(self.recipe, name, self[name])
        return int(self[name])


def plural(items: list) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


def _refuse_strangers(recipe, environ):
    """A setting of another recipe, or a name that looks like one of this recipe's, stops in one line."""
    r, own = RECIPES[recipe], names(recipe)
    takes = {other: set(names(other)) for other in RECIPES}
    for name, value in environ.items():
        if name in own:
            continue
        if name in r.fixed:
            fixed = r.fixed[name]
            if value and (isinstance(fixed.value, Derived) or not same(value, fixed.value)):
                raise SettingsError(f"{name}={value}: {fixed.why.format(value=value)}")
            continue
        owners = [other for other in RECIPES if name in takes[other]]
        close = difflib.get_close_matches(name, own, n=1, cutoff=0.8)
        hint = f"; set {close[0]} instead" if close else ""
        if owners:
            raise SettingsError(f"{name}={value}: a setting of {plural([f'{o}.sh' for o in owners])}, which "
                                f"{recipe}.sh does not take{hint}, or unset it")
        if close or re.match(r"(NER|PHASE2|CORPUS)_", name):
            raise SettingsError(f"{name}={value}: not a setting of {recipe}.sh{hint or '; see docs/recipes.md for its settings'}")


def merge(recipe: str, environ: dict, repo: object, script: str = "recipe") -> "Values":
    """Every setting of the recipe, each value checked, as a Values: SHARED < the recipe's defaults < its preset < the
    environment, then what is derived; raises SettingsError (one line) at the first wrong one."""
    r = recipe_of(recipe)
    presets = list(r.presets)
    preset = environ.get("PRESET", presets[0])
    if preset not in r.presets:
        raise SettingsError(f"PRESET={preset}: unknown; use {plural([f'PRESET={p}' for p in presets])}")
    _refuse_strangers(recipe, environ)
    own = names(recipe)
    for name in (n for n in own if n in environ):  # a value is one line: it goes into commands and recipe.env
        if any(c in environ[name] for c in "\n\r\0"):
            raise SettingsError(f"{name}={environ[name]!r}: holds a line break; give the value on one line")
    continuing = bool(environ.get("INIT_FROM")) and "INIT_FROM" not in r.fixed
    table = {**SHARED, **r.defaults, **r.presets[preset], **(continuation(recipe) if continuing else {})}
    entries = {name: value_of(table[name]) for name in own if name in table}
    for name in own:
        entry = entries.get(name)
        if name in environ and (environ[name] or not isinstance(entry, Required) or entry.allows_empty):
            entries[name] = environ[name]
        elif isinstance(entry, Required):
            raise SettingsError(f"PRESET={preset} {entry.message}; see the top of {script}")
        elif name not in entries:
            raise SettingsError(f"{name}: PRESET={preset} of {recipe}.sh gives no value; set it")
    if continuing and "MAX_UPDATE" in environ and "CONTINUE_EPOCHS" not in environ and "CONTINUE_EPOCHS" in entries:
        entries["CONTINUE_EPOCHS"] = ""  # a length given in updates is the run's length
    entries.update({"RECIPE": recipe, "REPO": str(repo), "PRESET": preset})
    entries.update({name: f.value for name, f in r.fixed.items()})
    values = Values(recipe, entries)
    for name in own:
        check_value(recipe, name, values[name])
    for name, other, holds, fix in TOGETHER:
        if name in own and other in own and not holds(values[name], values[other]):
            raise SettingsError(f"{name}={values[name]}: must be {fix} ({other}={values[other]})")
    if values.get("CONTINUE_EPOCHS") and values.get("PHASE2_SHARE", "0") != "0":
        raise SettingsError(f"CONTINUE_EPOCHS={values['CONTINUE_EPOCHS']}: a run in two length phases counts updates; "
                            "give MAX_UPDATE (or CONTINUE_EPOCHS= empty), or PHASE2_SHARE=0")
    if int(values.get("VOCAB_EXTEND") or 0) and not values.get("INIT_FROM"):
        raise SettingsError(f"VOCAB_EXTEND={values['VOCAB_EXTEND']}: extends the vocabulary of INIT_FROM's model, and "
                            "there is none (a run from scratch learns its own: VOCAB_SIZE); set INIT_FROM or unset "
                            "VOCAB_EXTEND")
    if "original" in values["BASELINE"].split() and not values.get("INIT_FROM"):
        raise SettingsError(f"BASELINE={values['BASELINE']}: original fine-tunes INIT_FROM's model as it was given, and "
                            "there is none; set INIT_FROM or drop original")
    return values
