"""The settings the recipes read from the environment, in one list: what each may hold, whether ``recipe.env`` records
it, and which recipes have it. The recipes' checks, ``recipe.env`` and the report all read this list, so a setting
cannot be checked and then left out of ``recipe.env``. The defaults stay in the recipes, where the presets set them.

    python -m biofairseq.recipe.settings names RECIPE              the names a recipe passes to the other two
    python -m biofairseq.recipe.settings check RECIPE NAME=VALUE...
    python -m biofairseq.recipe.settings keep RECIPE NAME=VALUE...   checks, then recipe.env: printed (STOP_AFTER=settings),
                                                                    written (first run, FORCE=1) or compared with
"""

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from biofairseq.atomic import write_text

RECIPES = ("bsc_bio_es", "beto", "bioelectra", "biomegatron", "bio_lm")
NUMBER = r"[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?"


def text(value):
    return None


def whole(value):
    return None if re.fullmatch(r"[0-9]+", value) else "not a whole number"


def positive(value):
    return whole(value) or (None if int(value) > 0 else "must be at least 1")


def number(value):
    return None if re.fullmatch(NUMBER, value) else "not a number"


def numbers(value):
    return None if re.fullmatch(rf"{NUMBER}(,{NUMBER})*", value) else "give comma-separated numbers, as 5e-5,1e-4"


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
    return whole(value) or (None if int(value) <= 512 else "the presets' position table has 512 rows")


def language(value):
    """A code of the cleaning's language identifier (fastText lid.176), checked before any work."""
    from biofairseq.corpus.checks import unknown_language

    return unknown_language(value, "CORPUS_LANG=")


def or_empty(kind):
    def check(value):
        return None if value == "" else kind(value)
    return check


@dataclass(frozen=True)
class Setting:
    name: str
    kind: object  # value -> None, or what is wrong with it
    recorded: bool = True  # in recipe.env: what shapes the results, not where or how fast they are made
    recipes: tuple = RECIPES


def _own(recipe, *settings):
    return [Setting(name, kind, recipes=(recipe,)) for name, kind in settings]


SETTINGS = [
    # run control and hardware: checked, not recorded
    Setting("RUN_DIR", text, recorded=False),
    Setting("STOP_AFTER", one_of("none", "settings", "binarize"), recorded=False),
    Setting("FORCE", one_of("0", "1"), recorded=False),
    Setting("NUM_GPUS", or_empty(whole), recorded=False),  # empty: all that torch sees
    Setting("NUM_NODES", positive, recorded=False),
    Setting("WORKERS", positive, recorded=False),
    Setting("NER_GPU", or_empty(whole), recorded=False),
    Setting("DISTRIBUTED_PORT", or_empty(whole), recorded=False),
    Setting("BATCH_PER_DEVICE", positive, recorded=False),
    Setting("PHASE2_BATCH_PER_DEVICE", positive, recorded=False),
    Setting("SAVE_INTERVAL_UPDATES", positive, recorded=False),
    Setting("LOG_INTERVAL", whole, recorded=False),
    # every recipe's, recorded in this order
    Setting("PRESET", text),
    Setting("SOURCES", text),  # checked against the files by the recipe (recipe_check_inputs)
    Setting("NER_DATA", text),
    Setting("VALID_DOCS", whole),
    Setting("VOCAB_SIZE", whole),
    Setting("SHARD_MB", number),  # 0: one data-bin
    Setting("INIT_FROM", text),
    Setting("ARCH", text),
    Setting("TOKENS_PER_SAMPLE", whole),
    Setting("SEQUENCES_PER_UPDATE", positive),
    Setting("PEAK_LR", number),
    Setting("WARMUP_UPDATES", whole),
    Setting("MAX_UPDATE", positive),
    Setting("PHASE2_SHARE", share),
    Setting("PHASE2_TOKENS_PER_SAMPLE", phase2_length),
    Setting("PHASE2_SEQUENCES_PER_UPDATE", positive),
    Setting("FAST_PATH", one_of("0", "1")),
    Setting("PRECISION", one_of("fp16", "bf16")),
    Setting("COMPILE", one_of("none", "inductor", "aot_eager")),
    Setting("WEIGHT_DECAY_EXCLUDE", one_of("none", "norm_and_bias")),
    Setting("NER_LRS", numbers),
    Setting("NER_SEEDS", numbers),
    Setting("NER_EPOCHS", number),
    Setting("NER_MAX_LENGTH", whole),
    Setting("NER_BATCH", positive),
    Setting("NER_ACCUMULATION", positive),
    Setting("NER_WARMUP_RATIO", number),
    Setting("NER_LAYERWISE_DECAY", number),
    Setting("NER_LABELLINGS", each_of("whole-word", "sub-token")),
    Setting("NER_EXTRA", text),
    Setting("BASELINE", one_of("random-init", "none")),
    Setting("WEAK_PRETRAINING", one_of("stop", "continue")),
    # each recipe's own
    *_own("bsc_bio_es", ("CLIP_NORM", number)),
    Setting("CORPUS_LANG", language, recipes=("beto", "bioelectra", "biomegatron", "bio_lm")),
    *_own("bioelectra", ("VOCAB_TYPE", one_of("bytelevel-bpe", "sentencepiece")),
          ("EMBEDDING_SHARING", one_of("tied", "gdes", "none")), ("MASK_PROB", number), ("SAMPLING_TEMPERATURE", number)),
    *_own("biomegatron", ("VOCAB_SIZES", numbers), ("CHECKPOINT_ACTIVATIONS", one_of("0", "1"))),
    *_own("bio_lm", ("BASE_ARCH", text), ("LARGE_ARCH", text), ("BASE_LR", number), ("LARGE_LR", number),
          ("LARGE_MAX_UPDATE", positive), ("DISTIL_UPDATES", positive), ("DISTIL_LR", number),
          ("DISTIL_WARMUP_UPDATES", whole), ("ALPHA_MLM", number), ("ALPHA_KL", number), ("TEMPERATURE", number),
          ("ALPHA_COS", number)),
]


class SettingsError(ValueError):
    pass


def of(recipe):
    if recipe not in RECIPES:
        raise SettingsError(f"{recipe}: not a recipe; use one of: {' '.join(RECIPES)}")
    return [s for s in SETTINGS if recipe in s.recipes]


def check(recipe, values):
    """values: {name: value} for every setting of the recipe; raises SettingsError at the first wrong one."""
    for setting in of(recipe):
        if setting.name not in values:
            raise SettingsError(f"{setting.name}: not set by the recipe (recipes/{recipe}.sh)")
        problem = setting.kind(values[setting.name])
        if problem:
            raise SettingsError(f"{setting.name}={values[setting.name]}: {problem}")


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


def keep(recipe, values, run_dir):
    """recipe.env: printed (STOP_AFTER=settings); else written on the first run (or with FORCE=1) and, on a rerun,
    compared with, naming on stderr the settings that differ."""
    now = recorded(recipe, values)
    if values["STOP_AFTER"] == "settings":
        sys.stdout.write(_env_text(now))
        print(f"{recipe}.sh: STOP_AFTER=settings: stopped before any work", file=sys.stderr)
        return
    path = Path(run_dir) / "recipe.env"
    if values["FORCE"] == "1" or not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, _env_text(now))
        return
    before = read(run_dir)
    differing = [name for name in {**before, **now} if before.get(name) != now.get(name)]
    if differing:
        print(f"note: settings differ from {path}; stages already done keep their outputs (FORCE=1 redoes them):",
              file=sys.stderr)
        for name in differing:
            print(f"  {name}={now.get(name, '(not a setting now)')}, was {name}={before.get(name, '(not recorded)')}",
                  file=sys.stderr)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2 or argv[0] not in ("names", "check", "keep"):
        sys.exit(__doc__)
    verb, recipe, pairs = argv[0], argv[1], argv[2:]
    try:
        if verb == "names":
            print("\n".join(s.name for s in of(recipe)))
            return
        values = dict(pair.split("=", 1) for pair in pairs)
        check(recipe, values)
        if verb == "keep":
            keep(recipe, values, values["RUN_DIR"])
    except SettingsError as e:
        sys.exit(f"{recipe}.sh: error: {e}")


if __name__ == "__main__":
    main()
