"""Every command line that the README and the docs print runs as printed: its program exists, and so does each of its
flags and variables. fairseq-train's flags are checked by fairseq's own parser, with the task, architecture, criterion
and optimizer the command names (their flags exist only with them); the other programs' by their --help."""

import contextlib
import io
import re
import runpy
import shlex
import sys

import pytest

from biofairseq.dev.samples import REPO

pytestmark = pytest.mark.fast  # make test-fast

DOCS = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md"), *REPO.glob("*/README.md")])
TRAINERS = ("fairseq-train", "biofairseq-train")
OURS = (*TRAINERS, "biofairseq-convert", "biofairseq-ner", "python", "bash", "make")
NOT_OURS = ("source", "tensorboard", "git", "cd", "pip", "sbatch")
ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=")


def command_lines(path):
    """(line number, words) of each command in the file's shell code blocks, continuation lines joined, $(...) and
    comments left out."""
    lines, found, block, start = path.read_text(encoding="utf-8").splitlines(), [], None, 0
    for number, line in enumerate(lines, 1):
        fence = re.match(r"\s*```(\w*)", line)
        if fence:
            block = fence.group(1) if block is None else None
            continue
        if block not in ("bash", "sh") or not line.strip():
            continue
        if not found or not found[-1][2]:  # a new command, unless the previous line continues
            start = number
            found.append([start, "", False])
        text = line.strip()
        found[-1][1] += " " + text.rstrip("\\")
        found[-1][2] = text.endswith("\\")
    commands = []
    for number, text, _ in found:
        words = shlex.split(re.sub(r"\$\([^)]*\)", "", text), comments=True)
        if words:
            commands.append((number, words))
    return commands


def program_and_rest(words):
    """(environment assignments, program, the rest)."""
    i = 0
    while i < len(words) and ASSIGNMENT.match(words[i]):
        i += 1
    return words[:i], words[i] if i < len(words) else None, words[i + 1:]


_helps = {}


def help_flags(key, call):
    """The --flags a program's --help lists; ``call`` prints it and exits, in this process."""
    if key not in _helps:
        out, argv = io.StringIO(), sys.argv
        try:
            with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
                call()
        finally:
            sys.argv = argv
        _helps[key] = set(re.findall(r"(?<![\w-])--[a-z][\w-]*", out.getvalue()))
    return _helps[key]


def run_script(script, *args):
    """The script as ``python script args`` runs it (its folder first on the path), in this process."""
    sys.argv = [str(script), *args]
    sys.path.insert(0, str(script.parent))
    try:
        runpy.run_path(str(script), run_name="__main__")
    finally:
        sys.path.remove(str(script.parent))


def check_trainer(program, rest):
    """Unknown flags of a fairseq-train command, by fairseq's parser (extended as biofairseq-train extends it)."""
    from fairseq import options

    from biofairseq.train import add_arguments
    from biofairseq.user_dir import USER_DIR

    rest = [USER_DIR if word == "biofairseq" else word for word in rest]
    modify = add_arguments if program == "biofairseq-train" else None
    try:
        _, extra = options.parse_args_and_arch(options.get_training_parser(), rest, parse_known=True, modify_parser=modify)
    except RuntimeError:  # fairseq's way of saying the --arch is unknown
        return [f"--arch {rest[rest.index('--arch') + 1] if '--arch' in rest else '(none)'}: unknown"]
    return [word for word in extra if word.startswith("-")]


def check(program, rest, env):
    """The problems of one command: a missing program, script, make target or variable, or an unknown flag."""
    flags = [word.split("=")[0] for word in rest if word.startswith("--")]
    if program in TRAINERS:
        return check_trainer(program, rest)
    if program in ("biofairseq-convert", "biofairseq-ner"):
        from biofairseq.convert.cli import main as convert
        from biofairseq.finetune.cli import main as ner

        main = convert if program == "biofairseq-convert" else ner
        known = help_flags((program, rest[0]), lambda: main([rest[0], "--help"]))
    elif program == "python" and rest[:1] == ["-m"]:
        import importlib

        module = importlib.import_module(rest[1])
        known = help_flags(rest[1], lambda: module.main(["--help"]))
    elif program == "python":
        script = REPO / rest[0]
        if not script.is_file():
            return [f"{rest[0]}: no such script"]
        known = help_flags(rest[0], lambda: run_script(script, "--help"))
    elif program == "bash":
        script = REPO / rest[0]
        if not script.is_file():
            return [f"{rest[0]}: no such script"]
        if rest[0].startswith("recipes/"):  # every variable given is a setting of the recipe, or one its runner reads
            from biofairseq.recipe.table import names

            read = (REPO / "recipes" / "lib" / "recipe.sh").read_text()
            takes = set(names(rest[0].rsplit("/", 1)[-1].removesuffix(".sh")))
            return [name for name in (a.split("=")[0] for a in env)
                    if name not in takes and not re.search(rf"\b{name}\b", read)]
        return []
    elif program == "make":
        makefile = (REPO / "Makefile").read_text()
        targets = [w for w in rest if "=" not in w]
        variables = [w.split("=")[0] for w in rest if "=" in w] + [a.split("=")[0] for a in env]
        return ([t for t in targets if not re.search(rf"^{re.escape(t)}:", makefile, re.M)]
                + [v for v in variables if not re.search(rf"\b{v}\b", makefile)])
    else:
        return [f"{program}: not a program of this project"]
    return [flag for flag in flags if flag not in known]


COMMANDS = [(path.relative_to(REPO), number, words) for path in DOCS for number, words in command_lines(path)]


def test_the_docs_print_commands_and_every_one_is_checked():
    programs = {program_and_rest(words)[1] for _, _, words in COMMANDS}
    assert {"fairseq-train", "biofairseq-train", "biofairseq-convert", "biofairseq-ner", "make", "bash", "python"} <= programs
    assert programs <= {*OURS, *NOT_OURS}, programs - {*OURS, *NOT_OURS}


def test_every_flag_and_variable_of_every_command_exists():
    problems = []
    for path, number, words in COMMANDS:
        env, program, rest = program_and_rest(words)
        if program in NOT_OURS:
            continue
        unknown = check(program, rest, env)
        if unknown:
            problems.append(f"{path}:{number}: {' '.join(words)[:100]} ...: {', '.join(unknown)}")
    assert not problems, "\n".join(problems)


def test_a_wrong_flag_is_found():
    """The checks can fail: a flag no program has, in each kind of command."""
    trainer = ["data-bin", "--user-dir", "biofairseq", "--task", "document_mlm", "--arch", "bio_roberta_tiny"]
    assert check("fairseq-train", [*trainer, "--no-such-flag"], []) == ["--no-such-flag"]
    assert check("biofairseq-train", [*trainer, "--compile", "none", "--weight-decay-exclude", "norm_and_bias"], []) == [
        "--weight-decay-exclude"]  # a flag of --optimizer adamw and fused_adamw only
    assert check("biofairseq-ner", ["sweep", "--lrs", "1e-5", "--no-such-flag"], []) == ["--no-such-flag"]
    assert check("python", ["preprocess/train_vocab.py", "--vocab-size", "8", "--no-such-flag"], []) == ["--no-such-flag"]
    assert check("bash", ["recipes/bsc_bio_es.sh"], ["NO_SUCH_VARIABLE=1", "PRESET=paper"]) == ["NO_SUCH_VARIABLE"]
    assert check("make", ["no-such-target"], []) == ["no-such-target"]


def test_the_readme_results_table_quotes_its_sources():
    """Each number of the README's results table (F1 mean ± std, minutes, ratios) is in a result file its row links."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    table = [line for line in text[text.index("## Results"):].split("\n## ")[0].splitlines()
             if line.startswith("| ") and "benchmarks/results/" in line]
    assert len(table) >= 8
    for row in table:
        cells = [cell.strip() for cell in row.split("|")[1:-1]]
        sources = "".join((REPO / path).read_text(encoding="utf-8")
                          for path in re.findall(r"\]\((benchmarks/results/[^)]+\.md)\)", cells[-1]))
        numbers = re.findall(r"\d+\.\d+ ± \d+\.\d+|\d[\d,.]* min|\d[\d.]*x\b", " ".join(cells[1:-1]))
        assert numbers and [n for n in numbers if n not in sources] == [], cells[0]
