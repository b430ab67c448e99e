"""What a recipe setting may hold. Each kind is a function: value -> None, or what is wrong with it and how to fix it
(the text after "NAME=VALUE: "). Checked in Python, before any work, so that bash never does arithmetic on a value
that Python would read otherwise (bash reads 010 as 8, fairseq as 10)."""

import math
import os
import re
from pathlib import Path
from typing import Callable, Optional

Kind = Callable[[str], Optional[str]]  # a value -> None, or what is wrong with it

NUMBER = r"[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?"
LONGEST_WHOLE = 15  # digits: more is no count of updates, sequences or seconds (and int() refuses 4,300 and more)


def text(value: str) -> Optional[str]:
    return None


def name(value: str) -> Optional[str]:
    return None if value.strip() else "empty; give a name"


def whole(value: str) -> Optional[str]:
    if re.fullmatch(r"[0-9]+", value):
        if len(value) > LONGEST_WHOLE:
            return f"too large; give at most {LONGEST_WHOLE} digits"
        return None if value == "0" or not value.startswith("0") else f"write it without leading zeros, as {int(value)}"
    if re.fullmatch(NUMBER, value) and math.isfinite(float(value)) and float(value).is_integer():
        return f"a whole number: write it without a point or exponent, as {int(float(value))}"
    return "not a whole number; give one, as 10"


def whole_between(low: int, high: Optional[int] = None, why: str = "") -> Kind:
    def check(value: str) -> Optional[str]:
        if whole(value):
            return whole(value)
        if int(value) < low:
            return f"must be at least {low}"
        return None if high is None or int(value) <= high else f"must be at most {high}{why}"
    return check


positive = whole_between(1)


def number(value: str) -> Optional[str]:
    if not re.fullmatch(NUMBER, value):
        return "not a number; give one, as 0.1 or 1e-3"
    return None if math.isfinite(float(value)) else "too large; give a finite number, as 0.1 or 1e-3"


def number_in(low: float, high: Optional[float], low_open: bool = False, high_open: bool = False) -> Kind:
    """A number in [low, high] (either end open); high None: no upper bound."""
    def check(value: str) -> Optional[str]:
        if number(value):
            return number(value)
        x = float(value)
        if x < low or (low_open and x == low) or (high is not None and (x > high or (high_open and x == high))):
            ends = f"{'(' if low_open else '['}{low:g}, {'∞)' if high is None else f'{high:g}' + (')' if high_open else ']')}"
            return f"out of range; give a number in {ends}"
        return None
    return check


def betas(value: str) -> Optional[str]:
    """Adam's (beta1,beta2), as fairseq's --adam-betas reads it: two numbers in [0, 1) in parentheses."""
    match = re.fullmatch(rf"\(({NUMBER}),\s*({NUMBER})\)", value)
    if not match or not all(0 <= float(match[i]) < 1 for i in (1, 3)):
        return "give two numbers in [0, 1) in parentheses, as (0.9,0.98)"
    return None


def partition(value: str) -> Optional[str]:
    """Slurm partitions: a name, or names separated by commas (sbatch --partition)."""
    return None if re.fullmatch(r"[\w.-]+(,[\w.-]+)*", value) else "not a Slurm partition; give one, as cpu (or cpu,long)"


def each(kind: Kind, example: str) -> Kind:
    """Comma-separated values of one kind."""
    def check(value: str) -> Optional[str]:
        for item in value.split(","):
            problem = kind(item)
            if problem:
                return f"{item!r}: {problem.split(';')[0]}; give comma-separated values, as {example}"
        return None
    return check


def one_of(*choices: str) -> Kind:
    def check(value: str) -> Optional[str]:
        return None if value in choices else f"unknown; use one of: {' '.join(choices)}"
    check.choices = choices
    return check


def each_of(*choices: str) -> Kind:
    """A space-separated list, possibly empty, of these."""
    def check(value: str) -> Optional[str]:
        return next((f"{word}: unknown; use one of: {' '.join(choices)}" for word in value.split() if word not in choices), None)
    check.choices = choices
    return check


def baseline(value: str) -> Optional[str]:
    """none, or random-init and/or original, space-separated."""
    words = value.split()
    if words == ["none"]:
        return None
    if not words or any(w not in ("random-init", "original") for w in words):
        return "use random-init, original, both (space-separated) or none"
    return None


baseline.choices = ("random-init", "original", "none")


def or_empty(kind: Kind) -> Kind:
    def check(value: str) -> Optional[str]:
        return None if value == "" else kind(value)
    return check


def share(value: str) -> Optional[str]:
    return number(value) or (None if float(value) < 1 else "the share of updates at the second length must be below 1 (0: one phase)")


def length(most: int, why: str) -> Kind:
    """A sequence length in tokens, from 8 to the model's positions."""
    def check(value: str) -> Optional[str]:
        return whole_between(8)(value) or (None if int(value) <= most else why.format(most=most))
    return check


def language(value: str) -> Optional[str]:
    """A code of the cleaning's language identifier (fastText lid.176) written with spaces between words, which the
    recipes' cleaning (its word filters), whole-word masking and whole-word NER labels count on."""
    from biofairseq.corpus.checks import WITHOUT_SPACES, unknown_language

    if value in WITHOUT_SPACES:
        return ("written without spaces between words, which the recipes' cleaning (words per sentence), whole-word "
                "masking and NER labels count on; not supported by the recipes (preprocess/clean_corpus.py cleans it "
                "with --min-words 0)")
    return unknown_language(value, "CORPUS_LANG=")


def megabytes(value: str) -> Optional[str]:
    from biofairseq.data_bin import shard_megabytes

    try:
        shard_megabytes(value)
    except ValueError as error:
        return str(error).split(": ", 1)[1]
    return None


def architecture(*families: str) -> Kind:
    """A shape registered by biofairseq (biofairseq/model_shapes.py), read without importing fairseq."""
    def check(value: str) -> Optional[str]:
        from biofairseq import model_shapes as shapes

        names = [name for family in families for name in getattr(shapes, family)]
        return None if value in names else f"unknown; use one of: {' '.join(names)}"
    return check


def named_paths(what: str, noun: str) -> Kind:
    """Space-separated NAME=PATH, each name once, each PATH present (a relative one from where the recipe runs)."""
    def check(value: str) -> Optional[str]:
        names = set()
        for pair in value.split():
            name, _, path = pair.partition("=")
            if not name or not path:
                return f"'{pair}': give NAME={what}"
            if name in names:
                return f"'{pair}': the name {name} is given twice; give each its own name"
            names.add(name)
            if not Path(path).exists():
                hint = ("; ~ is not expanded inside quotes or after NAME=: write $HOME" if path.startswith("~") else
                        "; separate NAME=PATH pairs with spaces, not commas" if "," in path else "")
                return f"'{pair}': {path}: no such {noun}; fix the path (a relative one starts from {Path.cwd()}){hint}"
        return None if names else f"give NAME={what}"
    return check


def init_from(value: str) -> Optional[str]:
    path = Path(value)
    if (path / "config.json").is_file() or (path.is_file() and path.suffix == ".pt"):
        return None
    wanted = "give a transformers model folder (with config.json) or a fairseq checkpoint (.pt)"
    if value.startswith("~"):
        return f"~ is not expanded inside quotes or after NAME=: write $HOME; {wanted}"
    if path.is_dir():
        return f"no config.json in the folder; {wanted}"
    if path.is_file():
        return f"a file, not a model folder or a .pt checkpoint; {wanted}"
    if value.count("/") == 1 and not value.startswith((".", "/")):  # a Hub id: organisation/model
        return (f"no such folder (from {Path.cwd()}); a Hub model id is not downloaded at run time: download it first "
                f"(hf download {value} --local-dir models/{path.name}) and give its folder")
    return f"no such file or folder (from {Path.cwd()}); {wanted}"


def run_dir(value: str) -> Optional[str]:
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


def port(value: str) -> Optional[str]:
    return whole(value) or (None if 1024 <= int(value) <= 65535 else "give a free TCP port from 1024 to 65535")


def ner_flags(given: Callable[[], dict]) -> Kind:
    """More biofairseq-ner sweep flags: parsed here as the sweep will parse them, none of those the recipe gives
    (``given()``: {flag: the setting it comes from})."""

    def check(value: str) -> Optional[str]:
        return _ner_flags(value, given())

    return check


def _ner_flags(value, given):
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
    for flag, name in given.items():
        dest = flag[2:].replace("-", "_")
        if getattr(extra, dest) != getattr(plain, dest):
            return f"sets {flag}, which the recipe gives from {name}; set {name} instead"
    return None
