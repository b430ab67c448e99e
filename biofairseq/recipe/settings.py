"""The settings the recipes read from the environment, in one list: what each may hold (a kind and its range, checked
before any work), whether ``recipe.env`` records it, the first stage whose outputs it shapes (so that a rerun with
another value stops rather than mix two settings in one run), and which recipes have it. The recipes' checks, ``recipe.env`` and the report all read this list, so a setting
cannot be checked and then left out of ``recipe.env``. The defaults stay in the recipes, where the presets set them.

    python -m biofairseq.recipe.settings names RECIPE              the recipe's settings
    python -m biofairseq.recipe.settings check RECIPE NAME=VALUE...  (or -: NUL-terminated pairs on standard input)
    python -m biofairseq.recipe.settings keep RECIPE NAME=VALUE...   checks, then recipe.env: printed (STOP_AFTER=settings),
                                                                    written (first run, FORCE=1) or compared with: a
                                                                    change that finished stages would not show stops
"""

import os
import re
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from biofairseq.atomic import write_text
from biofairseq.model_shapes import ELECTRA_SHARING

RECIPES = ("bsc_bio_es", "beto", "bioelectra", "biomegatron", "bio_lm", "modernbert")
PRESETS = {"bsc_bio_es": ("tiny", "pilot", "one_gpu", "paper"), "beto": ("tiny", "pilot", "paper"),
           "bioelectra": ("tiny", "pilot", "paper"), "biomegatron": ("tiny", "pilot", "paper"), "bio_lm": ("tiny", "pilot", "paper"),
           "modernbert": ("tiny", "pilot", "paper")}
NUMBER = r"[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?"
POSITIONS = 512  # the presets' position table (--max-positions): no sample may be longer
MODERNBERT_CONTEXT = 8192  # bio_modernbert's --max-positions (rotary positions: a longest sequence, no table)

# Each kind: value -> None, or what is wrong with it and how to fix it (after "NAME=VALUE: ").


def text(value):
    return None


def whole(value):
    if re.fullmatch(r"[0-9]+", value):
        return None
    if re.fullmatch(NUMBER, value) and float(value).is_integer():
        return f"write it in digits, as {int(float(value))}"
    return "not a whole number; give one, as 10"


def whole_between(low, high=None):
    def check(value):
        if whole(value):
            return whole(value)
        if int(value) < low:
            return f"must be at least {low}"
        return None if high is None or int(value) <= high else f"must be at most {high}"
    return check


positive = whole_between(1)


def number(value):
    return None if re.fullmatch(NUMBER, value) else "not a number; give one, as 0.1 or 1e-3"


def number_in(low, high, low_open=False, high_open=False):
    """A number in [low, high] (either end open); high None: no upper bound."""
    def check(value):
        if number(value):
            return number(value)
        x = float(value)
        if x < low or (low_open and x == low) or (high is not None and (x > high or (high_open and x == high))):
            ends = f"{'(' if low_open else '['}{low:g}, {'∞)' if high is None else f'{high:g}' + (')' if high_open else ']')}"
            return f"out of range; give a number in {ends}"
        return None
    return check


def each(kind, example):
    """Comma-separated values of one kind."""
    def check(value):
        for item in value.split(","):
            problem = kind(item)
            if problem:
                return f"{item!r}: {problem.split(';')[0]}; give comma-separated values, as {example}"
        return None
    return check


def one_of(*choices):
    def check(value):
        return None if value in choices else f"unknown; use one of: {' '.join(choices)}"
    check.choices = choices
    return check


def each_of(*choices):
    """A space-separated list, possibly empty, of these."""
    def check(value):
        return next((f"{word}: unknown; use one of: {' '.join(choices)}" for word in value.split() if word not in choices), None)
    check.choices = choices
    return check


def share(value):
    return number(value) or (None if float(value) < 1 else "the share of updates at the second length must be below 1 (0: one phase)")


def phase2_length(value):
    return whole_between(8)(value) or (None if int(value) <= POSITIONS else f"the presets' position table has {POSITIONS} rows")


def sample_length(value):
    return whole_between(8)(value) or (None if int(value) <= POSITIONS else f"must be at most {POSITIONS}, the presets' position table")


def modernbert_length(value):
    return whole_between(8)(value) or (
        None if int(value) <= MODERNBERT_CONTEXT else f"must be at most {MODERNBERT_CONTEXT}, ModernBERT's context")


def language(value):
    """A code of the cleaning's language identifier (fastText lid.176), checked before any work."""
    from biofairseq.corpus.checks import unknown_language

    return unknown_language(value, "CORPUS_LANG=")


def megabytes(value):
    from biofairseq.data_bin import shard_megabytes

    try:
        shard_megabytes(value)
    except ValueError as error:
        return str(error).split(": ", 1)[1]
    return None


def architecture(*families):
    """A shape registered by biofairseq (biofairseq/model_shapes.py), read without importing fairseq."""
    def check(value):
        from biofairseq import model_shapes as shapes

        names = [name for family in families for name in getattr(shapes, family)]
        return None if value in names else f"unknown; use one of: {' '.join(names)}"
    return check


def named_paths(what, noun):
    """Space-separated NAME=PATH, each PATH present (a relative one from where the recipe runs)."""
    def check(value):
        for pair in value.split():
            name, _, path = pair.partition("=")
            if not name or not path:
                return f"'{pair}': give NAME={what}"
            if not Path(path).exists():
                return f"'{pair}': {path}: no such {noun}; fix the path (a relative one starts from {Path.cwd()})"
        return None
    return check


def init_from(value):
    path = Path(value)
    if (path / "config.json").is_file() or (path.is_file() and path.suffix == ".pt"):
        return None
    return "give a transformers model folder (with config.json) or a fairseq checkpoint (.pt)"


def run_dir(value):
    if not value:
        return "give the folder the run writes to"
    path = Path(value)
    if path.exists() and not path.is_dir():
        return "a file, not a folder; choose another RUN_DIR"
    parent = path
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        return f"{parent} is a file, not a folder; choose another RUN_DIR"
    return None if os.access(parent, os.W_OK) else f"{parent}: not writable by this user; choose another RUN_DIR"


def port(value):
    return whole(value) or (None if 1024 <= int(value) <= 65535 else "give a free TCP port from 1024 to 65535")


def ner_flags(value):
    """More biofairseq-ner sweep flags: parsed here as the sweep will parse them."""
    import contextlib
    import io
    import shlex

    from biofairseq.finetune.cli import _parser

    needed = ["sweep", "--model", "m", "--train", "t", "--dev", "d", "--output-dir", "o"]
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            plain, extra = _parser().parse_args(needed), _parser().parse_args(needed + shlex.split(value))
    except (SystemExit, ValueError) as error:
        line = (said.getvalue().strip().splitlines() or [str(error)])[-1]
        return line.split(": error: ", 1)[-1].split("; see ")[0] + "; see biofairseq-ner sweep --help"
    # a flag the recipe gives from a setting of its own (or an abbreviation of one, which argparse takes) would
    # override it unchecked, and recipe.env and the report would name the setting's value
    for dest, name in NER_FLAGS.items():
        if getattr(extra, dest) != getattr(plain, dest):
            return f"sets --{dest.replace('_', '-')}, which the recipe gives from {name}; set {name} instead"
    return None


# biofairseq-ner sweep's options that the recipes set (recipe_ner), by the setting or path they come from
NER_FLAGS = {"model": "the pretrained model", "train": "NER_DATA", "dev": "NER_DATA", "test": "NER_DATA",
             "output_dir": "RUN_DIR", "lrs": "NER_LRS", "seeds": "NER_SEEDS", "epochs": "NER_EPOCHS",
             "max_length": "NER_MAX_LENGTH", "batch_size": "NER_BATCH", "gradient_accumulation": "NER_ACCUMULATION",
             "warmup_ratio": "NER_WARMUP_RATIO", "layerwise_lr_decay": "NER_LAYERWISE_DECAY",
             "label_scheme": "NER_LABELLINGS"}


def or_empty(kind):
    def check(value):
        return None if value == "" else kind(value)
    return check


# The stages whose outputs the recorded settings shape, in order: (number, title, outputs under RUN_DIR). A setting
# of one may not change once any of its outputs exists (FORCE=1 or a new RUN_DIR), one of a stage not yet run may.
STAGES = {
    "clean": ("1", "clean the sources", ("clean",)),
    "vocabulary": ("2", "the vocabulary", ("vocab", "init")),
    "binarize": ("3", "encode and binarize", ("data-bin",)),
    "pretrain": ("4", "pretrain", ("pretrain/**/*.pt",)),
    "ner": ("7", "fine-tune on NER", ("ner/*/*", "breakout/*.json")),
}


@dataclass(frozen=True)
class Setting:
    name: str
    kind: object  # value -> None, or what is wrong with it
    stage: str = None  # the first stage whose output it shapes (STAGES); None: recorded but free to change
    recorded: bool = True  # in recipe.env: what shapes the results, not where or how fast they are made
    recipes: tuple = RECIPES


def _own(recipe, *settings):
    return [Setting(name, kind, stage, recipes=(recipe,)) for name, kind, stage in settings]


LR = number_in(0, 1, low_open=True)
NOT_ELECTRA = tuple(r for r in RECIPES if r not in ("bioelectra", "modernbert"))  # the bio_roberta_* recipes
POSITION_TABLE = tuple(r for r in RECIPES if r != "modernbert")  # the recipes whose models have 512 positions

SETTINGS = [
    # run control and hardware: checked, not recorded
    Setting("RUN_DIR", run_dir, recorded=False),
    Setting("STOP_AFTER", one_of("none", "settings", "binarize"), recorded=False),
    Setting("FORCE", one_of("0", "1"), recorded=False),
    Setting("NUM_GPUS", or_empty(whole), recorded=False),  # empty: all that torch sees
    Setting("NUM_NODES", positive, recorded=False),
    Setting("WORKERS", positive, recorded=False),
    Setting("NER_GPU", or_empty(whole), recorded=False),
    Setting("DISTRIBUTED_PORT", or_empty(port), recorded=False),
    Setting("BATCH_PER_DEVICE", positive, recorded=False),
    Setting("PHASE2_BATCH_PER_DEVICE", positive, recorded=False),
    Setting("LOG_INTERVAL", positive, recorded=False),
    # every recipe's, recorded in this order
    *[Setting("PRESET", one_of(*PRESETS[r]), "clean", recipes=(r,)) for r in RECIPES],
    Setting("SOURCES", named_paths("PATH, PATH a file or folder of text", "file or folder"), "clean"),
    Setting("NER_DATA", or_empty(named_paths("DIR, DIR a folder with train and valid (or dev)", "folder")), "ner"),
    Setting("VALID_DOCS", positive, "clean"),
    Setting("VOCAB_SIZE", or_empty(whole_between(300)), "vocabulary"),  # 256 bytes and the special symbols at least
    Setting("SHARD_MB", megabytes, "binarize"),  # 0: one data-bin
    Setting("INIT_FROM", or_empty(init_from), "vocabulary"),
    Setting("ARCH", or_empty(architecture("BIO_ROBERTA")), "pretrain", recipes=NOT_ELECTRA),  # empty: bio_lm's two
    Setting("ARCH", architecture("ELECTRA"), "pretrain", recipes=("bioelectra",)),
    Setting("ARCH", architecture("BIO_MODERNBERT"), "pretrain", recipes=("modernbert",)),
    Setting("TOKENS_PER_SAMPLE", sample_length, "pretrain", recipes=POSITION_TABLE),
    Setting("TOKENS_PER_SAMPLE", modernbert_length, "pretrain", recipes=("modernbert",)),
    Setting("SEQUENCES_PER_UPDATE", positive, "pretrain"),
    Setting("PEAK_LR", or_empty(LR), "pretrain"),  # empty: bio_lm's, whose rates are BASE_LR, LARGE_LR, DISTIL_LR
    Setting("WARMUP_UPDATES", whole, "pretrain"),
    Setting("MAX_UPDATE", positive, "pretrain"),
    Setting("SAVE_INTERVAL_UPDATES", positive, "pretrain"),  # which checkpoints there are to keep (KEEP=best)
    Setting("PHASE2_SHARE", share, "pretrain"),
    Setting("PHASE2_TOKENS_PER_SAMPLE", phase2_length, "pretrain", recipes=POSITION_TABLE),
    Setting("PHASE2_TOKENS_PER_SAMPLE", modernbert_length, "pretrain", recipes=("modernbert",)),
    Setting("PHASE2_SEQUENCES_PER_UPDATE", positive, "pretrain"),
    Setting("FAST_PATH", one_of("0", "1"), "pretrain"),
    Setting("PRECISION", one_of("fp16", "bf16"), "pretrain"),
    Setting("COMPILE", one_of("none", "inductor", "aot_eager"), "pretrain"),
    Setting("WEIGHT_DECAY_EXCLUDE", one_of("none", "norm_and_bias"), "pretrain"),
    Setting("NER_LRS", each(LR, "5e-5,1e-4"), "ner"),
    Setting("NER_SEEDS", each(whole, "1,2,3"), "ner"),
    Setting("NER_EPOCHS", number_in(0, None, low_open=True), "ner"),
    Setting("NER_MAX_LENGTH", sample_length, "ner", recipes=POSITION_TABLE),
    Setting("NER_MAX_LENGTH", modernbert_length, "ner", recipes=("modernbert",)),
    Setting("NER_BATCH", positive, "ner"),
    Setting("NER_ACCUMULATION", positive, "ner"),
    Setting("NER_WARMUP_RATIO", number_in(0, 1, high_open=True), "ner"),
    Setting("NER_LAYERWISE_DECAY", number_in(0, 1, low_open=True), "ner"),
    Setting("NER_LABELLINGS", each_of("whole-word", "sub-token"), "ner"),
    Setting("NER_EXTRA", ner_flags, "ner"),
    Setting("BASELINE", one_of("random-init", "none")),  # a twin more or less: new outputs, none changed
    Setting("WEAK_PRETRAINING", one_of("stop", "continue")),  # what to do after stage 5's check, which it does not change
    # each recipe's own
    *_own("bsc_bio_es", ("CLIP_NORM", number_in(0, None), "pretrain")),
    Setting("CORPUS_LANG", language, "clean", recipes=("beto", "bioelectra", "biomegatron", "bio_lm", "modernbert")),
    Setting("MASK_PROB", number_in(0, 1, low_open=True, high_open=True), "pretrain", recipes=("bioelectra", "modernbert")),
    Setting("WEIGHT_DECAY", number_in(0, None), "pretrain", recipes=("modernbert",)),
    *_own("bioelectra", ("VOCAB_TYPE", one_of("bytelevel-bpe", "sentencepiece"), "vocabulary"),
          ("EMBEDDING_SHARING", one_of(*ELECTRA_SHARING), "pretrain"),
          ("SAMPLING_TEMPERATURE", number_in(0, None, low_open=True), "pretrain"),
          ("SAMPLING_TEMPERATURE_FINAL", number_in(0, None, low_open=True), "pretrain"),
          ("GENERATOR_FRACTION", or_empty(number_in(0, 1, low_open=True)), "pretrain")),
    *_own("biomegatron", ("VOCAB_SIZES", each(whole_between(300), "30000,50000"), "vocabulary"),
          ("CHECKPOINT_ACTIVATIONS", one_of("0", "1"), "pretrain")),
    *_own("bio_lm", ("BASE_ARCH", architecture("BIO_ROBERTA"), "pretrain"), ("LARGE_ARCH", architecture("BIO_ROBERTA"), "pretrain"),
          ("BASE_LR", LR, "pretrain"), ("LARGE_LR", LR, "pretrain"), ("LARGE_MAX_UPDATE", positive, "pretrain"),
          ("DISTIL_UPDATES", positive, "pretrain"), ("DISTIL_LR", LR, "pretrain"), ("DISTIL_WARMUP_UPDATES", whole, "pretrain"),
          ("ALPHA_MLM", number_in(0, None), "pretrain"), ("ALPHA_KL", number_in(0, None), "pretrain"),
          ("TEMPERATURE", number_in(0, None, low_open=True), "pretrain"), ("ALPHA_COS", number_in(0, None), "pretrain")),
]

# settings checked together: (name, other, what must hold of their values, the fix)
TOGETHER = [
    ("WARMUP_UPDATES", "MAX_UPDATE", lambda warmup, total: int(warmup) <= int(total), "at most MAX_UPDATE"),
    ("DISTIL_WARMUP_UPDATES", "DISTIL_UPDATES", lambda warmup, total: int(warmup) <= int(total), "at most DISTIL_UPDATES"),
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


def of(recipe):
    if recipe not in RECIPES:
        raise SettingsError(f"{recipe}: not a recipe; use one of: {' '.join(RECIPES)}")
    return [s for s in SETTINGS if recipe in s.recipes]


def check(recipe, values):
    """values: {name: value} of the recipe's variables (an unset setting is empty); raises SettingsError at the first
    wrong one."""
    for setting in of(recipe):
        value = values.setdefault(setting.name, "")  # unset: empty, as ${NAME-} gives it
        problem = setting.kind(value)
        if problem:
            raise SettingsError(f"{setting.name}={value}: {problem}")
    for name, other, holds, fix in TOGETHER:
        if name in values and other in values and not holds(values[name], values[other]):
            raise SettingsError(f"{name}={values[name]}: must be {fix} ({other}={values[other]})")


def recorded(recipe, values):
    """What recipe.env records: RECIPE, then every recorded setting in the list's order."""
    return {"RECIPE": recipe, **{s.name: values[s.name] for s in of(recipe) if s.recorded}}


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


def same(before, now):
    """Equal values of a setting: as text, or as numbers item by item (0.5 and 0.50, 1e-3 and 0.001)."""
    if before == now:
        return True
    a, b = re.split(r"[,\s]+", before.strip()), re.split(r"[,\s]+", now.strip())
    try:
        return len(a) == len(b) and all(float(x) == float(y) for x, y in zip(a, b))
    except ValueError:
        return False


def keep(recipe, values, run_dir):
    """recipe.env: written on the first run (or with FORCE=1); on a rerun, a changed setting of a stage that has
    outputs stops the recipe (SettingsError, naming every such setting); the others are taken, recipe.env rewritten
    and each change added to recipe.changes, which the report lists. STOP_AFTER=settings compares the same way, then
    prints the settings and writes nothing."""
    now, dry = recorded(recipe, values), values["STOP_AFTER"] == "settings"
    path, changes = Path(run_dir) / "recipe.env", Path(run_dir) / "recipe.changes"
    changed = []
    if values["FORCE"] != "1" and path.is_file():
        before = read(run_dir)
        # a setting the first run did not record (an older version) takes today's value
        changed = [s for s in of(recipe) if s.recorded and s.name in before and not same(before[s.name], now[s.name])]
        order = list(STAGES)
        conflicts = [(s, produced(run_dir, s.stage)) for s in sorted((s for s in changed if s.stage),
                                                                     key=lambda s: order.index(s.stage))]
        conflicts = [(s, output) for s, output in conflicts if output is not None]
        if conflicts:
            (first, output), others = conflicts[0], [s for s, _ in conflicts[1:]]
            number, title, _ = STAGES[first.stage]
            also = "".join(f"; {s.name}={now[s.name]} too, was {before[s.name]}" for s in others)
            old = " ".join(f"{s.name}={before[s.name]}" for s, _ in conflicts)
            raise SettingsError(
                f"{first.name}={now[first.name]}, but stage {number} ({title}) already made {output} with "
                f"{first.name}={before[first.name]}{also}; give {old} to go on, FORCE=1 to redo every stage, "
                "or a new RUN_DIR")
        for s in changed:
            print(f"note: {s.name}={now[s.name]} (was {before[s.name]}): no stage made with it has run yet; "
                  f"{'would be ' if dry else ''}recorded in {changes}", file=sys.stderr)
    if dry:
        sys.stdout.write(_env_text(now))
        print(f"{recipe}.sh: STOP_AFTER=settings: stopped before any work", file=sys.stderr)
        return
    if values["FORCE"] == "1" or not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, _env_text(now))
        changes.unlink(missing_ok=True)
    elif changed:
        when = datetime.now().astimezone().isoformat(timespec="seconds")
        history = changes.read_text(encoding="utf-8") if changes.is_file() else ""
        write_text(changes, history + "".join(f"{when}\t{s.name}\t{before[s.name]}\t{now[s.name]}\n" for s in changed))
        write_text(path, _env_text(now))


def changes_of(run_dir):
    """(when, name, before, after) of each setting changed between runs into run_dir, oldest first."""
    path = Path(run_dir) / "recipe.changes"
    if not path.is_file():
        return []
    return [tuple(line.split("\t")) for line in path.read_text(encoding="utf-8").splitlines() if line.count("\t") == 3]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2 or argv[0] not in ("names", "check", "keep"):
        sys.exit(__doc__)
    verb, recipe, pairs = argv[0], argv[1], argv[2:]
    try:
        if verb == "names":
            print("\n".join(s.name for s in of(recipe)))
            return
        if pairs == ["-"]:  # NAME=VALUE pairs on standard input, each ending in a NUL byte (the recipes')
            pairs = [pair for pair in sys.stdin.buffer.read().decode("utf-8", "surrogateescape").split("\0") if pair]
        values = dict(pair.split("=", 1) for pair in pairs)
        check(recipe, values)
        if verb == "keep":
            keep(recipe, values, values["RUN_DIR"])
    except SettingsError as e:
        sys.exit(f"{recipe}.sh: error: {e}")


if __name__ == "__main__":
    main()
