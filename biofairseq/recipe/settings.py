"""The recipes' settings, in one list: what each may hold (a kind, biofairseq/recipe/kinds.py), whether ``recipe.env``
records it, the first stage whose outputs it shapes (so that a rerun with another value stops rather than mix two
settings in one run), and what it means. ``resolve`` is the one step every recipe runs before any work: the presets
(biofairseq/recipe/presets.py) and the environment merged, derived values computed, every value checked, the devices
and the NER data found, ``recipe.env`` kept; the recipe evals what it prints.

    python -m biofairseq.recipe.settings resolve RECIPE SCRIPT REPO   shell assignments of every setting, or one line
    python -m biofairseq.recipe.settings names RECIPE                 the settings the recipe takes
    python -m biofairseq.recipe.settings docs                         docs/recipes.md's tables of the settings
"""

import difflib
import functools
import os
import re
import shlex
import shutil
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from biofairseq.atomic import write_text
from biofairseq.corpus.checks import source_problem
from biofairseq.finetune import splits
from biofairseq.model_shapes import ELECTRA_SHARING
from biofairseq.recipe import kinds
from biofairseq.recipe.presets import RECIPES, SHARED, Derived, Fixed, Required, source_of, value_of
from biofairseq.text.phrases import with_article

POSITIONS = 512  # the presets' position table (--max-positions): no sample may be longer
MODERNBERT_CONTEXT = 8192  # bio_modernbert's --max-positions (rotary positions: a longest sequence, no table)
SEEDS = 2**32 - 1  # the largest seed numpy takes

# The stages whose outputs the recorded settings shape, in order: (number, title, outputs under RUN_DIR). A setting
# of one may not change once any of its outputs exists (FORCE from that stage, or a new RUN_DIR), one of a stage not
# yet run may.
STAGES = {
    "clean": ("1", "clean the sources", ("clean",)),
    "vocabulary": ("2", "the vocabulary", ("vocab", "init")),
    "binarize": ("3", "encode and binarize", ("data-bin",)),
    "pretrain": ("4", "pretrain", ("pretrain/**/*.pt",)),
    "ner": ("7", "fine-tune on NER", ("ner/*/*", "breakout/*.json")),
}
# FORCE=STAGE: what goes before the first stage runs, from that stage on (FORCE=1 is FORCE=clean): each stage's
# outputs under RUN_DIR, in the recipes' order (the break-out rates of the NER data go with NER)
FORCED = {
    "clean": ("clean",),
    "vocabulary": ("vocab", "init", "init.hf"),
    "binarize": ("data-bin",),
    "pretrain": ("pretrain",),
    "convert": ("hf",),
    "ner": ("ner", "breakout"),
    "report": ("report.md", "report.json", "report.png"),
}


def redone(force):
    """The stages FORCE redoes, in order: every one (1), those from a stage on (its name), none (0)."""
    stages = list(FORCED)
    return stages if force == "1" else stages[stages.index(force):] if force in FORCED else []


NAMED_PATHS = ("SOURCES", "NER_DATA")  # NAME=PATH ...: compared, and recorded, by the files they name
GRID = ("NER_LRS", "NER_SEEDS")  # the sweep's grid: compared as sets, free to grow or shrink after the sweep ran


def path_pairs(value):
    """[(name, path)] of a NAME=PATH ... setting (its kind, kinds.named_paths, has checked it)."""
    return [tuple(pair.partition("=")[::2]) for pair in value.split()]


@dataclass(frozen=True)
class Setting:
    name: str
    kind: object  # value -> None, or what is wrong with it
    stage: str = None  # the first stage whose output it shapes (STAGES); None: recorded but free to change
    recorded: bool = True  # in recipe.env: what shapes the results, not where or how fast they are made
    help: str = ""


LR = kinds.number_in(0, 1, low_open=True)
SAMPLE = kinds.length(POSITIONS, "must be at most {most}, the presets' position table")
MODERNBERT = kinds.length(MODERNBERT_CONTEXT, "must be at most {most}, ModernBERT's context")
NOT_HERE = "recorded, not a setting"  # help of what a recipe computes for the shared stages (bio_lm's PEAK_LR, ...)

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
    Setting("WORKERS", kinds.positive, recorded=False, help="processes for cleaning and binarizing"),
    Setting("NER_GPU", kinds.whole, recorded=False, help="the GPU the NER runs use"),
    Setting("DISTRIBUTED_PORT", kinds.port, recorded=False, help="fairseq's --distributed-port on several machines"),
    Setting("CORPUS_LAUNCHER", kinds.one_of("local", "slurm", "submitit-local"), recorded=False,
            help="the corpus stages' jobs: WORKERS local processes, Slurm job arrays of one-core tasks (through "
                 "submitit, from the machine the recipe runs on), or submitit's local executor"),
    Setting("CORPUS_SLURM_PARTITION", kinds.or_empty(kinds.partition), recorded=False,
            help="the Slurm partition of the corpus stages' arrays (empty: the cluster's default)"),
    Setting("CORPUS_SLURM_TIME", kinds.positive, recorded=False, help="minutes per corpus array task"),
    Setting("CORPUS_SLURM_MEM_GB", kinds.or_empty(kinds.positive), recorded=False,
            help="memory per corpus array task (empty: the partition's default)"),
    Setting("DATA_WORKERS", kinds.whole, recorded=False,
            help="pretraining's data-loading processes per GPU (fairseq's --num-workers)"),
    Setting("KEEP_INTERVAL_UPDATES", kinds.positive, recorded=False,
            help="the pretraining checkpoints kept besides the last and the best (fairseq's --keep-interval-updates)"),
    Setting("BATCH_PER_DEVICE", kinds.positive, recorded=False, help="sequences per device and step (--batch-size)"),
    Setting("PHASE2_BATCH_PER_DEVICE", kinds.positive, recorded=False, help="the same in the second length phase"),
    Setting("LOG_INTERVAL", kinds.positive, recorded=False, help="updates between training log lines"),
    # recorded
    Setting("PRESET", kinds.text, "clean", help="tiny, pilot, one_gpu or paper (the recipe's)"),
    Setting("SOURCES", kinds.named_paths("PATH, PATH a file or folder of text", "file or folder"), "clean",
            help="pretraining text, space-separated NAME=PATH (JSON lines, plain text or BRAT, optionally compressed)"),
    Setting("NER_DATA", kinds.or_empty(kinds.named_paths("DIR, DIR a folder with train and valid (or dev)", "folder")), "ner",
            help="NER data sets, space-separated NAME=DIR, DIR holding train, valid (or dev, devel) and optionally test, "
                 "each a BRAT folder or a CoNLL file (.conll, .tsv, .bio); empty: pretrain and convert only"),
    Setting("TEXT_DOCS", kinds.one_of("blank-line", "line", "file"), "clean",
            help="plain text's documents: separated by blank lines, one per line, or one per file"),
    Setting("TEXT_FIELD", kinds.name, "clean", help="the text's field in JSON lines"),
    Setting("VALID_DOCS", kinds.positive, "clean", help="documents held out for validation"),
    # 256 bytes and the special symbols at least
    Setting("VOCAB_SIZE", kinds.whole_between(300), "vocabulary", help="entries of the learned vocabulary"),
    Setting("SHARD_MB", kinds.megabytes, "binarize",
            help="the training data-bin in shards of at most this many MB of encoded text (0: one data-bin)"),
    Setting("INIT_FROM", kinds.or_empty(kinds.init_from), "vocabulary",
            help="continual pretraining: a transformers folder or a fairseq checkpoint (.pt), whose weights start and "
                 "whose vocabulary replaces the learned one"),
    Setting("ARCH", kinds.architecture("BIO_ROBERTA"), "pretrain", help="the model's shape (biofairseq/model_shapes.py)"),
    Setting("TOKENS_PER_SAMPLE", SAMPLE, "pretrain", help="tokens per sequence"),
    Setting("SEQUENCES_PER_UPDATE", kinds.positive, "pretrain", help="the batch, split over devices and --update-freq"),
    Setting("PEAK_LR", LR, "pretrain", help="the learning rate after warm-up, decaying linearly to 0"),
    Setting("WARMUP_UPDATES", kinds.whole, "pretrain", help="updates of linear warm-up"),
    Setting("MAX_UPDATE", kinds.positive, "pretrain", help="updates of pretraining"),
    # which checkpoints there are to keep (KEEP=best)
    Setting("SAVE_INTERVAL_UPDATES", kinds.positive, "pretrain", help="updates between checkpoints and validations"),
    Setting("PHASE2_SHARE", kinds.share, "pretrain", help="the share of MAX_UPDATE at the second length (0: one length)"),
    Setting("PHASE2_TOKENS_PER_SAMPLE", kinds.length(POSITIONS, "the presets' position table has {most} rows"), "pretrain",
            help="tokens per sequence in the second phase"),
    Setting("PHASE2_SEQUENCES_PER_UPDATE", kinds.positive, "pretrain", help="the batch in the second phase"),
    Setting("FAST_PATH", kinds.one_of("0", "1"), "pretrain",
            help="1: --attention sdpa, --pack-documents and --optimizer fused_adamw (same weights and schedule)"),
    Setting("PRECISION", kinds.one_of("fp16", "bf16"), "pretrain",
            help="on GPU: fp16 (--fp16) or bf16 (--amp-bf16); the CPU trains in fp32"),
    Setting("COMPILE", kinds.one_of("none", "inductor", "aot_eager"), "pretrain",
            help="the encoder layers through torch.compile (biofairseq-train --compile)"),
    Setting("WEIGHT_DECAY_EXCLUDE", kinds.one_of("none", "norm_and_bias"), "pretrain",
            help="norm_and_bias: no weight decay on LayerNorm weights and biases"),
    # the sweep's grid may grow or shrink on a rerun: its finished runs are kept, the missing ones run, the report
    # holds the runs asked for
    Setting("NER_LRS", kinds.each(LR, "5e-5,1e-4"), None, help="the sweep's learning rates, comma-separated"),
    Setting("NER_SEEDS", kinds.each(kinds.whole_between(0, SEEDS, ", the largest seed numpy takes"), "1,2,3"), None,
            help="the sweep's seeds, comma-separated"),
    Setting("NER_EPOCHS", kinds.number_in(0, None, low_open=True), "ner", help="epochs of each NER run"),
    Setting("NER_MAX_LENGTH", SAMPLE, "ner", help="tokens per NER window"),
    Setting("NER_BATCH", kinds.positive, "ner", help="NER sequences per step"),
    Setting("NER_ACCUMULATION", kinds.positive, "ner", help="NER gradient accumulation steps"),
    Setting("NER_WARMUP_RATIO", kinds.number_in(0, 1, high_open=True), "ner", help="the share of NER steps warming up"),
    Setting("NER_LAYERWISE_DECAY", kinds.number_in(0, 1, low_open=True), "ner",
            help="ELECTRA's layer-wise learning-rate decay (1: none)"),
    Setting("NER_LABELLINGS", kinds.each_of("whole-word", "sub-token"), "ner",
            help="whole-word and/or sub-token: each model fine-tuned each way (empty: whole-word)"),
    Setting("NER_EXTRA", kinds.ner_flags, "ner", help="more biofairseq-ner sweep flags"),
    # a twin more or less: new outputs, none changed
    Setting("BASELINE", kinds.baseline,
            help="random-init: also fine-tune a randomly initialised twin of the model, to show what pretraining adds; "
                 "original: INIT_FROM's model as given, to show what continuing it adds; both (space-separated), or none"),
    # what to do after stage 5's check, which it does not change
    Setting("WEAK_PRETRAINING", kinds.one_of("stop", "continue"),
            help="stop before fine-tuning a model no better than word frequencies (stop), or say so and go on"),
    Setting("CLIP_NORM", kinds.number_in(0, None), "pretrain", help="gradient clipping (0: none)"),
    Setting("CORPUS_LANG", kinds.language, "clean", help="the corpus language (a code of fastText's lid.176, as en): the cleaning keeps its documents"),
    Setting("MASK_PROB", kinds.number_in(0, 1, low_open=True, high_open=True), "pretrain", help="the share of tokens masked"),
    Setting("WEIGHT_DECAY", kinds.number_in(0, None), "pretrain", help="AdamW's weight decay"),
    Setting("VOCAB_TYPE", kinds.one_of("bytelevel-bpe", "sentencepiece"), "vocabulary", help="the vocabulary's kind"),
    Setting("EMBEDDING_SHARING", kinds.one_of(*ELECTRA_SHARING), "pretrain",
            help="tied (ELECTRA's), gdes (DeBERTa-v3's), detached (no gradient from the discriminator) or none"),
    Setting("SAMPLING_TEMPERATURE", kinds.number_in(0, None, low_open=True), "pretrain",
            help="the generator's samples come from softmax(logits / T)"),
    Setting("SAMPLING_TEMPERATURE_FINAL", kinds.number_in(0, None, low_open=True), "pretrain",
            help="annealed linearly from SAMPLING_TEMPERATURE to this over MAX_UPDATE"),
    Setting("GENERATOR_FRACTION", kinds.or_empty(kinds.number_in(0, 1, low_open=True)), "pretrain",
            help="the generator's width as a share of the discriminator's (empty: ARCH's own)"),
    Setting("VOCAB_SIZES", kinds.each(kinds.whole_between(300), "30000,50000"), "vocabulary",
            help="the SentencePiece vocabularies, comma-separated: one data-bin and model each"),
    Setting("CHECKPOINT_ACTIVATIONS", kinds.one_of("0", "1"), "pretrain",
            help="1: recompute activations in the backward pass (--checkpoint-activations)"),
    Setting("BASE_ARCH", kinds.architecture("BIO_ROBERTA"), "pretrain", help="the student's shape"),
    Setting("LARGE_ARCH", kinds.architecture("BIO_ROBERTA"), "pretrain", help="the teacher's shape"),
    Setting("BASE_LR", LR, "pretrain", help="the student's peak learning rate"),
    Setting("LARGE_LR", LR, "pretrain", help="the teacher's peak learning rate"),
    Setting("LARGE_MAX_UPDATE", kinds.positive, "pretrain", help="the teacher's updates"),
    Setting("DISTIL_UPDATES", kinds.positive, "pretrain", help="updates of distillation, and of its control"),
    Setting("DISTIL_LR", LR, "pretrain", help="their peak learning rate"),
    Setting("DISTIL_WARMUP_UPDATES", kinds.whole, "pretrain", help="their warm-up"),
    Setting("ALPHA_MLM", kinds.number_in(0, None), "pretrain", help="the distillation loss's masked-LM weight"),
    Setting("ALPHA_KL", kinds.number_in(0, None), "pretrain", help="its KL weight"),
    Setting("TEMPERATURE", kinds.number_in(0, None, low_open=True), "pretrain", help="its softening temperature"),
    Setting("ALPHA_COS", kinds.number_in(0, None), "pretrain", help="its cosine weight (0: no alignment)"),
    Setting("ADAM_BETAS", kinds.betas, "pretrain", help="Adam's (beta1,beta2)"),
    Setting("ADAM_EPS", kinds.number_in(0, None, low_open=True), "pretrain", help="Adam's epsilon"),
    Setting("DROPOUT", kinds.number_in(0, 1, high_open=True), "pretrain", help="dropout"),
    Setting("ATTENTION_DROPOUT", kinds.number_in(0, 1, high_open=True), "pretrain",
            help="dropout of the attention weights"),
    Setting("LEAVE_UNMASKED_PROB", kinds.number_in(0, 1), "pretrain",
            help="the share of the selected tokens left as they are (BERT's 80/10/10: 0.1)"),
    Setting("RANDOM_TOKEN_PROB", kinds.number_in(0, 1), "pretrain",
            help="the share of the selected tokens replaced by a random token (BERT's 80/10/10: 0.1)"),
    Setting("DISCRIMINATOR_WEIGHT", kinds.number_in(0, None, low_open=True), "pretrain",
            help="ELECTRA's lambda: the discriminator's loss weight against the generator's"),
    Setting("SEED", kinds.whole_between(0, SEEDS, ", the largest seed numpy takes"), "pretrain",
            help="pretraining's seed: initialisation, masking, batch order"),
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


def _generator_fits(arch, fraction):
    from biofairseq.model_shapes import ELECTRA, electra_generator

    try:
        electra_generator(ELECTRA[arch]["width"], fraction)
    except ValueError:
        return False
    return True


class SettingsError(ValueError):
    pass


def recipe_of(name):
    if name not in RECIPES:
        raise SettingsError(f"{name}: not a recipe; use one of: {' '.join(RECIPES)}")
    return RECIPES[name]


def names(recipe):
    """The settings a recipe takes from the environment, in the list's order."""
    r = recipe_of(recipe)
    tables = [SHARED, r.defaults, *r.presets.values()]
    return [s.name for s in SETTINGS if any(s.name in t for t in tables) and s.name not in r.fixed]


def of(recipe):
    """The recipe's settings (Setting, with the recipe's kinds), in the list's order."""
    own = KINDS.get(recipe, {})
    return [Setting(s.name, own.get(s.name, s.kind), s.stage, s.recorded, s.help) if s.name in own else s
            for s in map(BY_NAME.get, names(recipe))]


def kind_of(recipe, name):
    return KINDS.get(recipe, {}).get(name, BY_NAME[name].kind)


def check_value(recipe, name, value):
    problem = kind_of(recipe, name)(value)
    if problem:
        raise SettingsError(f"{name}={value}: {problem}")


class Values(dict):
    """The resolved values, computing a Derived one when first read; ``whole`` reads one as a checked number."""

    def __init__(self, recipe, entries):
        super().__init__()
        self.recipe, self.entries = recipe, entries

    def __missing__(self, name):
        entry = self.entries[name]
        self[name] = entry.compute(self) if isinstance(entry, Derived) else entry
        return self[name]

    def whole(self, name):
        check_value(self.recipe, name, self[name])
        return int(self[name])


def _plural(items):
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
            raise SettingsError(f"{name}={value}: a setting of {_plural([f'{o}.sh' for o in owners])}, which "
                                f"{recipe}.sh does not take{hint}, or unset it")
        if close or re.match(r"(NER|PHASE2)_", name):
            raise SettingsError(f"{name}={value}: not a setting of {recipe}.sh{hint or '; see docs/recipes.md for its settings'}")


def resolve(recipe, environ, repo, script="recipe"):
    """Every setting of the recipe, checked, as {name: value}: SHARED < the recipe's defaults < its preset < the
    environment, then what is derived; raises SettingsError (one line) at the first wrong one."""
    r = recipe_of(recipe)
    presets = list(r.presets)
    preset = environ.get("PRESET", presets[0])
    if preset not in r.presets:
        raise SettingsError(f"PRESET={preset}: unknown; use {_plural([f'PRESET={p}' for p in presets])}")
    _refuse_strangers(recipe, environ)
    own = names(recipe)
    table = {**SHARED, **r.defaults, **r.presets[preset]}
    entries = {name: value_of(table[name]) for name in own if name in table}
    for name in own:
        entry = entries.get(name)
        if name in environ and (environ[name] or not isinstance(entry, Required) or entry.allows_empty):
            entries[name] = environ[name]
        elif isinstance(entry, Required):
            raise SettingsError(f"PRESET={preset} {entry.says}; see the top of {script}")
        elif name not in entries:
            raise SettingsError(f"{name}: PRESET={preset} of {recipe}.sh gives no value; set it")
    entries.update({"RECIPE": recipe, "REPO": str(repo), "PRESET": preset})
    entries.update({name: f.value for name, f in r.fixed.items()})
    values = Values(recipe, entries)
    for name in own:
        check_value(recipe, name, values[name])
    for name, other, holds, fix in TOGETHER:
        if name in own and other in own and not holds(values[name], values[other]):
            raise SettingsError(f"{name}={values[name]}: must be {fix} ({other}={values[other]})")
    if "original" in values["BASELINE"].split() and not values.get("INIT_FROM"):
        raise SettingsError(f"BASELINE={values['BASELINE']}: original fine-tunes INIT_FROM's model as it was given, and "
                            "there is none; set INIT_FROM or drop original")
    if "SOURCES" in own:  # what each source holds, as the cleaning will read it: text, not NER columns or a PDF
        for pair in values["SOURCES"].split():
            problem = source_problem(*pair.split("=", 1), values["TEXT_DOCS"], values["TEXT_FIELD"], recipe=True)
            if problem:
                raise SettingsError(problem)
            problem = source_language_problem(pair, values, given="SOURCES" in environ)
            if problem:
                raise SettingsError(problem)
        if "INIT_FROM" in own and values["INIT_FROM"]:
            problem = (init_from_problem(recipe, values, environ) or init_vocabulary_problem(values)
                       or init_weights_problem(values))
            if problem:
                raise SettingsError(problem)
    return {name: values[name] for name in ["RECIPE", *own, *r.fixed]}


def valid_docs_problem(values):
    """None, or the one line saying that VALID_DOCS would hold out half of SOURCES' documents or more (all of them:
    the cleaning would say so after it had cleaned them all); counting stops at twice VALID_DOCS, so a large corpus
    costs what that many documents cost to read."""
    from biofairseq.corpus.sources import count_documents

    wanted = int(values["VALID_DOCS"])
    paths = [path for _, path in path_pairs(values["SOURCES"])]
    found = count_documents(paths, values["TEXT_DOCS"], values["TEXT_FIELD"], more_than=2 * wanted - 1)
    if found >= 2 * wanted:  # at least as many to train on as held out, before the cleaning removes any
        return None
    text = any(".jsonl" not in Path(path).name for path in paths)  # plain text (or folders): TEXT_DOCS applies
    hint = "; or, if each line is a document, TEXT_DOCS=line" if values["TEXT_DOCS"] == "blank-line" and text else ""
    read = f" (read as TEXT_DOCS={values['TEXT_DOCS']})" if text else ""
    left = f"{found - wanted:,} left to train on" if found > wanted else "none left to train on"
    return (f"VALID_DOCS={wanted}, but SOURCES hold {found:,} document{'s' * (found != 1)}{read} before cleaning, "
            f"{left}; give VALID_DOCS={max(1, found // 10)} (a tenth){hint}")


def notes_read_as_paragraphs(values):
    """A line for each source that is a folder of notes read at blank lines (TEXT_DOCS=blank-line by default, not
    given), each note's paragraphs becoming documents: said before any work, not after the cleaning."""
    from biofairseq.corpus.sources import paragraphs_as_documents

    lines = []
    for name, path in path_pairs(values["SOURCES"]) if values["TEXT_DOCS"] == "blank-line" else ():
        found = paragraphs_as_documents(path) if os.path.isdir(path) else None
        if found:
            lines.append(f"note: SOURCES '{name}': its first {found[0]} text files give {found[1]} documents, split at "
                         "blank lines (TEXT_DOCS=blank-line); if each file is one document (a note, a case), give "
                         f"TEXT_DOCS=file (and a VALID_DOCS={values['VALID_DOCS']} that the files outnumber twice)")
    return lines


def languages(texts):
    """{language: how many of the texts lid.176 gives it} (the cleaning's identifier, loaded once)."""
    from collections import Counter

    from biofairseq.corpus.cleaning import lid_model

    return Counter(lid_model().predict(" ".join(text.split()))[0][0].removeprefix("__label__") for text in texts)


def _changed(path):
    """When a file or folder last changed: the key under which what was read of it is remembered, in this process
    (a recipe's settings step is a process of its own; a folder's time changes with its entries, not their texts)."""
    return os.stat(path).st_mtime_ns


@functools.lru_cache(maxsize=64)
def _source_languages(path, changed, text_docs, text_field):
    """The languages of a source's first documents (at most 100), read once per process while it is unchanged."""
    from biofairseq.corpus.sources import sample_documents

    return languages(sample_documents([path], text_docs, text_field)[:100])


def source_language_problem(source, values, given=True):
    """None, or the one line saying that the start of a source (NAME=PATH) is in another language than CORPUS_LANG:
    under a tenth of its first documents in it, so the cleaning would remove nearly all of it (English text given to
    a recipe whose default is Spanish), an hour later on a large corpus. ``given``: SOURCES came from the user, not
    from the preset (the tiny preset's bundled Spanish sample)."""
    path = source.split("=", 1)[1]
    found, lang = _source_languages(path, _changed(path), values["TEXT_DOCS"], values["TEXT_FIELD"]), values["CORPUS_LANG"]
    documents = sum(found.values())
    if not documents or found[lang] >= 0.1 * documents:
        return None
    other, count = found.most_common(1)[0]
    if not given:
        return (f"SOURCES is PRESET={values['PRESET']}'s {other} sample ({source}), not in CORPUS_LANG={lang}; give "
                f"your corpus, SOURCES=NAME=PATH, or CORPUS_LANG={other}")
    return (f"SOURCES: '{source}': {count} of its first {documents} documents are identified as {other} and "
            f"{found[lang]} as {lang}, so the cleaning would remove nearly all of it; set CORPUS_LANG={other}")


def init_from_problem(recipe, values, environ):
    """None, or why INIT_FROM's transformers folder cannot start this recipe, read from its config.json alone: a family
    the recipe does not continue (named, with the recipes that do), settings its conversion cannot compute, sequences
    longer than its positions, an ELECTRA's embedding sharing or generator width set twice. What from-hf would refuse
    hours later, after the cleaning, is refused here. (A fairseq checkpoint, .pt, is read when it is converted.)"""
    init = values["INIT_FROM"]
    if init.endswith(".pt"):
        return None
    from biofairseq.convert import ConvertError, families

    fraction = values.get("GENERATOR_FRACTION") or None
    source = families.Source(Path(init), generator_fraction=float(fraction) if fraction else None)
    try:
        family, config, problems = families.inspect(source)
    except ConvertError as error:
        return f"INIT_FROM={init}: {str(error).removeprefix(f'{init}: ')}"
    kind = ", ".join(config.architectures or []) or config.model_type
    if recipe not in family.recipes:
        takes = [f.name for f in families.FAMILIES if recipe in f.recipes]
        return (f"INIT_FROM={init}: {with_article(family.name)} model ({kind}); {recipe}.sh continues {_plural(takes)} models; "
                f"continue {with_article(family.name)} with {_plural([f'recipes/{r}.sh' for r in family.recipes])}")
    if problems:
        return (f"INIT_FROM={init}: {'; '.join(problems)}: no fairseq {family.fairseq_model} computes this "
                f"{family.name} model, so it cannot be continued")
    own = [name for name in ("ARCH", "VOCAB_SIZE", "VOCAB_SIZES", "VOCAB_TYPE") if environ.get(name) and name in values]
    if own:
        return (f"{own[0]}={environ[own[0]]}: INIT_FROM={init} brings its own shape and vocabulary, which the run "
                f"continues; drop {' and '.join(own)}")
    longest = family.max_length(config)
    lengths = ["TOKENS_PER_SAMPLE", "NER_MAX_LENGTH"] + (["PHASE2_TOKENS_PER_SAMPLE"] if values.get("PHASE2_SHARE", "0") != "0" else [])
    longer = [f"{name}={values[name]}" for name in lengths if name in values and int(values[name]) > longest]
    if longer:
        phase2 = " (or PHASE2_SHARE=0: one length)" if any(n.startswith("PHASE2") for n in longer) else ""
        said = longer[0] if len(longer) == 1 else f"{', '.join(longer[:-1])} and {longer[-1]}"
        return (f"{said}: INIT_FROM={init} has {longest} positions (max_position_embeddings "
                f"{config.max_position_embeddings}); give at most {longest}{phase2}")
    if family.name == "ELECTRA":
        from biofairseq.convert.families.electra import generator_folder

        if environ.get("EMBEDDING_SHARING", "tied") != "tied":
            return (f"EMBEDDING_SHARING={environ['EMBEDDING_SHARING']}: INIT_FROM={init} brings its own embeddings (one "
                    "module for both towers where they are equal, as ELECTRA trains them); drop the setting")
        if generator_folder(source) is not None and environ.get("GENERATOR_FRACTION"):
            return (f"GENERATOR_FRACTION={environ['GENERATOR_FRACTION']}: INIT_FROM={init} has its generator (in "
                    f"{generator_folder(source)}), whose width is its own; drop the setting (it sizes a fresh generator "
                    "where the folder has none)")
    return None


def init_weights_problem(values):
    """None, or the line saying INIT_FROM's folder (or its ELECTRA generator's) holds no weights: a download cut short,
    which from-hf would meet after the cleaning."""
    init = values["INIT_FROM"]
    if init.endswith(".pt"):
        return None
    from biofairseq.convert import families

    generator = Path(init) / "generator"
    missing = families.weights_problem(init) or ((generator / "config.json").is_file() and families.weights_problem(generator))
    return f"INIT_FROM={init}: {missing.split(': ', 1)[1]} in {missing.split(': ', 1)[0]}" if missing else None


UNKNOWN_SHARE = 0.01  # of the corpus's tokens that INIT_FROM's vocabulary may leave unknown


def init_vocabulary_problem(values):
    """None, or why INIT_FROM's vocabulary cannot serve the corpus: a transformers folder without a tokenizer, or one
    that leaves more than 1% of the tokens of the corpus's start unknown (an English WordPiece on Greek text), which
    continual pretraining would then learn as one token. A fairseq checkpoint's vocabulary is byte-level or has byte
    fallback (preprocess/train_vocab.py's), so it knows every text."""
    init, lang = values["INIT_FROM"], values["CORPUS_LANG"]
    if init.endswith(".pt"):
        return None
    from biofairseq.convert.vocabulary import TOKENIZER_FILES, has_tokenizer
    from biofairseq.corpus.sources import sample_documents

    if not has_tokenizer(init):
        return (f"INIT_FROM={init}: no tokenizer in the folder ({TOKENIZER_FILES}); save it there with "
                "tokenizer.save_pretrained, as the model was")
    import transformers

    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(init)
    except (ValueError, OSError, KeyError, TypeError, ImportError) as error:
        return (f"INIT_FROM={init}: transformers cannot load its tokenizer ({str(error).splitlines()[0][:200]}); give a "
                "folder that AutoTokenizer.from_pretrained loads")
    paths = [pair.split("=", 1)[1] for pair in values["SOURCES"].split()]
    documents = sample_documents(paths, values["TEXT_DOCS"], values["TEXT_FIELD"])
    ids = [i for doc in documents for i in tokenizer(doc, add_special_tokens=False, verbose=False)["input_ids"]]
    unknown = ids.count(tokenizer.unk_token_id) / max(1, len(ids)) if tokenizer.unk_token_id is not None else 0
    if unknown > UNKNOWN_SHARE:
        return (f"INIT_FROM={init}: its vocabulary leaves {unknown:.0%} of the tokens of the corpus's start unknown "
                f"({tokenizer.unk_token}), so it cannot serve CORPUS_LANG={lang}; continue a model whose vocabulary "
                "covers the language, or pretrain from scratch (INIT_FROM=)")
    return None


# ---- what the recipe needs besides the settings: the devices, the NER data's splits, INIT_FROM as an absolute path


def devices(values, environ):
    """NUM_GPUS (all torch sees, where empty), and the update frequency of either phase on them."""
    given = values["NUM_GPUS"]
    # a run that pretrains here (STOP_AFTER=settings may be a preview on a login node, binarize the CPU part)
    trains = values["STOP_AFTER"] == "none"
    if given == "" or (int(given) > 0 and int(values["NUM_NODES"]) == 1 and trains):
        import torch

        seen = torch.cuda.device_count()
        if given == "" and seen == 0 and values["PRESET"] in ("one_gpu", "paper") and trains:
            raise SettingsError(f"PRESET={values['PRESET']} is for GPUs, and torch sees none; NUM_GPUS=0 runs it on the "
                                "CPU anyway (slowly), STOP_AFTER=binarize runs the corpus stages alone")
        if given != "" and int(given) > seen:
            raise SettingsError(f"NUM_GPUS={given}: torch sees {seen} GPU(s) here; give NUM_GPUS={seen} (0: the CPU), "
                                "or run on a machine with more")
        values["NUM_GPUS"] = given or str(seen)
    gpus, nodes = int(values["NUM_GPUS"]), int(values["NUM_NODES"])
    if nodes > 1:  # several machines: fairseq's launcher under srun, from inside an allocation
        if gpus == 0:
            raise SettingsError(f"NUM_NODES={nodes} needs GPUs: set NUM_GPUS to the GPUs of each machine, or NUM_NODES=1")
        if values["STOP_AFTER"] == "none":
            if not shutil.which("srun", path=environ.get("PATH")):
                raise SettingsError(f"NUM_NODES={nodes}: srun not found; several machines pretrain under Slurm (see "
                                    "docs/recipes.md), or set NUM_NODES=1")
            if not environ.get("SLURM_JOB_ID"):
                raise SettingsError(f"NUM_NODES={nodes}: not inside a Slurm allocation (no SLURM_JOB_ID); submit the "
                                    "recipe with sbatch (see docs/recipes.md), or STOP_AFTER=binarize for the corpus stages")
    count = gpus * nodes if gpus > 0 else 1
    computed = {"DEVICES": str(count)}
    for prefix in ("", "PHASE2_"):
        sequences, batch = f"{prefix}SEQUENCES_PER_UPDATE", f"{prefix}BATCH_PER_DEVICE"
        if int(values[sequences]) % (count * int(values[batch])):
            raise SettingsError(f"{sequences}={values[sequences]} is not a multiple of {count} device(s) x "
                                f"{batch}={values[batch]}; change {batch}")
        computed[f"{prefix}UPDATE_FREQ"] = str(int(values[sequences]) // (count * int(values[batch])))
    # phase 1's last update, rounded half up (the recipes' awk did it before)
    computed["PHASE1_UPDATES"] = str(int(int(values["MAX_UPDATE"]) * (1 - float(values["PHASE2_SHARE"])) + 0.5))
    return computed


def ner_data(values, say, given=True):
    """NER_DATA's sets: (names, train, dev, test) lists, each split found by its names (biofairseq/finetune/splits.py)."""
    found = ([], [], [], [])
    context_document = re.search(r"--context(=|\s+)document", values["NER_EXTRA"])
    for dataset in values["NER_DATA"].split():
        name, _, folder = dataset.partition("=")
        if not Path(folder).is_dir():
            raise SettingsError(f"NER_DATA: '{dataset}': {folder}: not a folder; give the folder that holds train and "
                                "valid (or dev)")
        train, dev, test = (splits.find(folder, role) for role in ("train", "dev", "test"))
        misnamed = sorted(p for p in Path(folder).iterdir() if p.is_file() and p.stem in splits.NAMES
                          and p.suffix not in splits.CONLL_SUFFIXES)
        if misnamed and not (train and dev):  # train.txt, dev.txt: CoNLL files under a name no reader takes
            raise SettingsError(f"NER_DATA: '{dataset}': {misnamed[0]}: a split as a {misnamed[0].suffix or 'bare'} file; "
                                f"name a CoNLL file {misnamed[0].stem}.conll, .tsv or .bio, or give a BRAT split as a "
                                "folder (X.txt beside X.ann)")
        if not train:
            raise SettingsError(f"NER_DATA: '{dataset}': {folder} has no train split; it needs train and valid (or dev), "
                                "each a BRAT folder or a CoNLL file (.conll, .tsv, .bio)")
        if not dev:
            raise SettingsError(f"NER_DATA: '{dataset}': {folder} has no valid (or dev, devel) split beside train; add one "
                                "(a BRAT folder or a .conll, .tsv, .bio file), e.g. documents moved out of train")
        for split in (train, dev, test):
            if split is None:
                continue
            if not Path(split).is_file() and next(Path(split).rglob("*.txt"), None) is None:
                raise SettingsError(f"NER_DATA: '{dataset}': {split}: a folder without .txt files; a split is a BRAT "
                                    "folder (X.txt beside X.ann) or a CoNLL file")
            # a CoNLL file does not say where its documents end (biofairseq-ner refuses it), so say so before pretraining
            if Path(split).is_file() and context_document:
                raise SettingsError(f"NER_DATA: '{dataset}': {split}: a CoNLL file, and NER_EXTRA asks for --context "
                                    "document, which needs BRAT folders (X.txt beside X.ann); give BRAT data or drop "
                                    "--context document")
        _check_ner_data(dataset, {"train": train, "dev": dev, "test": test}, values, given)
        say(f"NER_DATA: {name}: train {train}, valid {dev}, test "
            f"{test or 'none (the sweep and the report give valid scores only)'}")
        for column, value in zip(found, (name, train, dev, test or "")):
            column.append(value)
    return dict(zip(("NER_NAMES", "NER_TRAIN", "NER_DEV", "NER_TEST"), found))


@functools.lru_cache(maxsize=64)
def _ner_data_read(paths, allowed):
    """(the unseen-type problem or None, the languages of the training text in chunks of 10 sentences) of NER splits
    ((role, path, changed), ...), read once per process while they are unchanged."""
    from biofairseq.finetune import NERFormatError
    from biofairseq.finetune.training import read_annotated, unseen_types

    paths = {role: path for role, path, _ in paths}
    try:
        sets = {role: read_annotated(path, role, warn=lambda line: None) for role, path in paths.items()}
    except NERFormatError:
        return None, {}  # the data's own problems: the sweep's to report
    if not sets["train"].types():
        return None, {}  # a training set without entities: the sweep's to report too
    if not allowed:
        try:
            unseen_types(sets, paths, allowed=False, warn=lambda line: None,
                         accept="add --allow-unseen-types to NER_EXTRA")
        except NERFormatError as error:
            return str(error), {}
    sentences = [" ".join(s.tokens) for s in sets["train"].sentences[:200]]
    return None, languages(" ".join(sentences[i:i + 10]) for i in range(0, len(sentences), 10))


def _check_ner_data(dataset, paths, values, given=True):
    """Before pretraining, what the sweep would find after it: a dev or test entity type that train lacks (a typo,
    another data set's types; NER_EXTRA=--allow-unseen-types accepts it), and NER text in another language than
    CORPUS_LANG, the model's. The data's own problems are the sweep's to report."""
    allowed = bool(re.search(r"--allow-unseen-types\b", values["NER_EXTRA"]))
    paths = tuple((role, path, _changed(path)) for role, path in paths.items() if path)
    problem, found = _ner_data_read(paths, allowed)
    if problem:
        raise SettingsError(f"NER_DATA: '{dataset}': {problem}")
    lang, chunks = values["CORPUS_LANG"], sum(found.values())
    if chunks and found[lang] < 0.1 * chunks:
        other = found.most_common(1)[0][0]
        if not given:
            raise SettingsError(f"NER_DATA is PRESET={values['PRESET']}'s {other} data ({dataset}), not in CORPUS_LANG="
                                f"{lang}; give yours, NER_DATA=NAME=DIR, or NER_DATA= to pretrain and convert only")
        raise SettingsError(f"NER_DATA: '{dataset}': its training text is identified as {other}, not CORPUS_LANG={lang}, "
                            f"the language the model is pretrained in; give NER data in {lang}, or a corpus in {other} "
                            f"(SOURCES=NAME=PATH and CORPUS_LANG={other})")


def absolute(path):
    """A path made absolute as the shell's cd && pwd would (links kept), for recipe.env."""
    path = path.rstrip("/") or "/"
    return os.path.join(os.path.abspath(os.path.dirname(path) or "."), os.path.basename(path))


def absolute_pairs(value):
    """NAME=PATH ... with each PATH absolute, so that a rerun from another folder means the same files; a path that
    would then hold a space (the recipes split the pairs at spaces) is kept as given."""
    pairs = []
    for name, path in path_pairs(value):
        whole = absolute(os.path.expanduser(path))
        pairs.append(f"{name}={path if any(c.isspace() for c in whole) else whole}")
    return " ".join(pairs)


def _meaning(name, value):
    """What a path setting names, for comparing two runs' values: each path resolved (links followed, a relative one
    from here, as an older recipe.env may hold); None for other settings."""
    if name in NAMED_PATHS:
        return [(name, os.path.realpath(path)) for name, path in path_pairs(value)]
    if name == "INIT_FROM":
        return os.path.realpath(value) if value else ""
    return None


# ---- recipe.env: written on the first run, compared with on the next


def recorded(recipe, values):
    """What recipe.env records: RECIPE, then every recorded setting in the list's order."""
    return {"RECIPE": recipe, **{s.name: values[s.name] for s in SETTINGS if s.recorded and s.name in values}}


def _env_text(settings):
    return "".join(f"{name}={value}\n" for name, value in settings.items())


def read(run_dir):
    """The settings recipe.env records, by name (the report's source)."""
    path = Path(run_dir) / "recipe.env"
    if not path.is_file():
        raise SettingsError(f"{path}: missing; run the recipe (recipes/*.sh) into this folder first")
    return dict(line.split("=", 1) for line in path.read_text(encoding="utf-8").splitlines() if "=" in line)


def produced(run_dir, stage):
    """The first output of a stage in run_dir, or None."""
    for pattern in STAGES[stage][2]:
        found = next(iter(sorted(Path(run_dir).glob(pattern))), None)
        if found is not None:
            return found
    return None


def same(before, now, name=None):
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


def keep(recipe, values, run_dir, say=lambda line: print(line, file=sys.stderr)):
    """recipe.env: written on the first run (or with FORCE=1); on a rerun, a changed setting of a stage that has
    outputs stops the recipe (SettingsError, naming every such setting) unless FORCE redoes that stage; the others are
    taken, recipe.env rewritten and each change added to recipe.changes, which the report lists. STOP_AFTER=settings
    compares the same way and writes nothing. Returns recipe.env's text."""
    now, dry, force = recorded(recipe, values), values["STOP_AFTER"] == "settings", values["FORCE"]
    path, changes = Path(run_dir) / "recipe.env", Path(run_dir) / "recipe.changes"
    changed = []
    forced = redone(force)
    if "clean" not in forced and path.is_file():
        before = read(run_dir)
        # a setting the first run did not record (an older version) takes today's value
        changed = [s for s in SETTINGS if s.name in now and s.recorded and s.name in before
                   and not same(before[s.name], now[s.name], s.name)]
        order = list(FORCED)
        conflicts = [(s, produced(run_dir, s.stage)) for s in sorted((s for s in changed if s.stage and s.stage not in forced),
                                                                     key=lambda s: order.index(s.stage))]
        conflicts = [(s, output) for s, output in conflicts if output is not None]
        if conflicts:
            (first, output), others = conflicts[0], [s for s, _ in conflicts[1:]]
            number, title, _ = STAGES[first.stage]
            also = "".join(f"; {s.name}={now[s.name]} too, was {before[s.name]}" for s in others)
            old = " ".join(f"{s.name}={before[s.name]}" for s, _ in conflicts)
            raise SettingsError(
                f"{first.name}={now[first.name]}, but stage {number} ({title}) already made {output} with "
                f"{first.name}={before[first.name]}{also}; give {old} to go on, FORCE={first.stage} to redo from "
                f"stage {number} on, or a new RUN_DIR")
        for s in changed:
            why = ("its stage is redone (FORCE)" if s.stage in forced else "no stage made with it has run yet" if s.stage
                   else "the sweep keeps its finished runs, runs the missing ones and reports those asked for"
                   if s.name in GRID else "taken")
            say(f"note: {s.name}={now[s.name]} (was {before[s.name]}): {why}; "
                f"{'would be ' if dry else ''}recorded in {changes}")
    text = _env_text(now)
    if dry:
        return text
    if "clean" in forced or not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, text)
        changes.unlink(missing_ok=True)
    elif changed:
        when = datetime.now().astimezone().isoformat(timespec="seconds")
        history = changes.read_text(encoding="utf-8") if changes.is_file() else ""
        write_text(changes, history + "".join(f"{when}\t{s.name}\t{before[s.name]}\t{now[s.name]}\n" for s in changed))
        write_text(path, text)
    return text


def changes_of(run_dir):
    """(when, name, before, after) of each setting changed between runs into run_dir, oldest first."""
    path = Path(run_dir) / "recipe.changes"
    if not path.is_file():
        return []
    return [tuple(line.split("\t")) for line in path.read_text(encoding="utf-8").splitlines() if line.count("\t") == 3]


# ---- the recipe's one step


def shell(recipe, environ, repo, script, say=lambda line: print(line, file=sys.stderr)):
    """The settings resolved, checked and kept, as the bash the recipe evals: NAME=value and NAME=(...) lines, and
    under STOP_AFTER=settings, recipe.env printed and an exit."""
    values = resolve(recipe, environ, repo, script)
    for line in notes_read_as_paragraphs(values) if "SOURCES" in values and "TEXT_DOCS" not in environ else ():
        say(line)
    computed = devices(values, environ)
    r = RECIPES[recipe]
    view = Values(recipe, {**values, "REPO": str(repo)})
    computed.update({name: derived.compute(view) for name, derived in r.computed.items()})
    problem = valid_docs_problem(values) if "VALID_DOCS" in values else None  # after the cheaper checks
    if problem:
        raise SettingsError(problem)
    arrays = ner_data(values, say, given="NER_DATA" in environ)
    if values["INIT_FROM"]:
        values["INIT_FROM"] = absolute(values["INIT_FROM"])
    for name in (n for n in NAMED_PATHS if n in values):  # as recorded, and compared with a rerun's (keep)
        values[name] = absolute_pairs(values[name])
    text = keep(recipe, values, values["RUN_DIR"], say)
    lines = [f"{name}={shlex.quote(value)}" for name, value in {**values, **computed}.items() if name != "RECIPE"]
    arrays["FORCE_REMOVE"] = [output for stage in redone(values["FORCE"]) for output in FORCED[stage]]
    removed = [str(Path(values["RUN_DIR"]) / o) for o in arrays["FORCE_REMOVE"] if (Path(values["RUN_DIR"]) / o).exists()]
    if removed:
        say(f"note: FORCE={values['FORCE']} {'would remove' if values['STOP_AFTER'] == 'settings' else 'removes'} "
            f"{', '.join(removed)} before the first stage")
    lines += [f"{name}=({' '.join(map(shlex.quote, items))})" for name, items in arrays.items()]
    if values["STOP_AFTER"] == "settings":
        say(f"{recipe}.sh: STOP_AFTER=settings: stopped before any work")
        lines += [f"printf %s {shlex.quote(text)}", "exit 0"]
    return "".join(line + "\n" for line in lines)


# ---- docs/recipes.md's tables, generated from the list and the presets (a test holds the two equal)

RUN_CONTROL = ("RUN_DIR", "STOP_AFTER", "FORCE", "NUM_GPUS", "NUM_NODES", "WORKERS", "NER_GPU", "DISTRIBUTED_PORT")


def _cell(entry):
    if isinstance(entry, Fixed):
        return f"{_cell(entry.value)}, fixed"
    if isinstance(entry, Derived):
        return entry.says if entry.says[0].islower() else f"= `{entry.says}`"
    if isinstance(entry, Required):
        return "**yours**"
    value, source = value_of(entry), source_of(entry)
    shown = f"`{value}`" if value else "*empty*"
    return f"{shown} ({source})" if source else shown


def docs():
    """The settings' table (what each means, which recipes take it) and one table per recipe of its presets' values."""
    lines = ["| setting | recipes | what it is |", "|---|---|---|"]
    for s in SETTINGS:
        takers = [r for r in RECIPES if s.name in names(r)]
        lines.append(f"| `{s.name}` | {'all' if len(takers) == len(RECIPES) else ', '.join(takers)} | {s.help} |")
    for recipe, r in RECIPES.items():
        lines += ["", f"#### `{recipe}.sh`", "", "| setting | " + " | ".join(f"`{p}`" for p in r.presets) + " |",
                  "|---" * (len(r.presets) + 1) + "|"]
        for s in SETTINGS:
            if s.name in RUN_CONTROL or s.name == "PRESET" or (s.name not in names(recipe) and s.name not in r.fixed):
                continue
            cells = [_cell(r.fixed[s.name]) if s.name in r.fixed
                     else _cell({**SHARED, **r.defaults, **table}[s.name]) for table in r.presets.values()]
            lines.append(f"| `{s.name}` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["docs"]:
        sys.stdout.write(docs())
        return
    if len(argv) < 2 or argv[0] not in ("names", "resolve") or (argv[0] == "resolve" and len(argv) != 4):
        sys.exit(__doc__)
    verb, recipe = argv[0], argv[1]
    try:
        if verb == "names":
            print("\n".join(names(recipe)))
            return
        sys.stdout.write(shell(recipe, dict(os.environ), argv[3], argv[2]))
    except SettingsError as e:
        sys.exit(f"{recipe}.sh: error: {e}")


if __name__ == "__main__":
    main()
