"""A recipe's run as one bash script, line by line: each stage an ``if stage N TITLE OUTPUT DONE; then ... fi`` block
(skipped where DONE exists) of commands printed before they run (``run``), after the functions of
recipes/lib/stages.sh and the settings (recipe.env). The recipe runs the script as it is; STOP_AFTER=settings prints
it."""

import shlex
from pathlib import Path
from typing import Union

PathLike = Union[str, Path]


class Script:
    def __init__(self, recipe: str, force: str) -> None:
        self.recipe, self.force = recipe, force
        self.lines, self.commands, self.stages = [], [], []  # the script's lines, its commands' argv, its stages
        self.checks, self.open, self.stopped = [], False, False

    def top(self, line: str) -> None:
        """A line outside any stage (the open one ends before it)."""
        if not self.stopped:
            self.close()
            self.lines.append(line)

    def close(self) -> None:
        if self.open:
            self.lines.append("fi")
            self.open = False

    def inside(self, line: str) -> None:
        """A line of the open stage: run where the stage runs."""
        if not self.stopped:
            self.lines.append(f"    {line}" if self.open else line)

    def stage(self, forced: str, number: object, title: str, output: PathLike, done: PathLike = None) -> None:
        """A stage whose outputs FORCE=forced (a key of table.FORCED) removes with the later stages'; the checks
        added before it run before its skip test."""
        if self.stopped:
            return
        self.stages.append((forced, str(number), Path(output)))
        self.top("")
        failed = shlex.quote(f"the check before stage {number} ({title}) failed (see above)")
        self.lines += [f"# ---- {number} {title} -> {output}".replace("\n", "\\n"),
                       *(f"{check} || die {failed}" for check in self.checks)]
        self.checks = []
        self.lines.append(f"if {shlex.join(['stage', str(number), title, str(output), str(done or output)])}; then")
        self.open = True

    def remove(self, path: PathLike) -> None:
        """FORCE: an earlier run's output, removed before the first stage."""
        path = shlex.quote(str(path))
        self.top(f"if [[ -e {path} ]]; then run rm -rf {path}; fi")

    def command(self, *argv: object) -> None:
        """A command of the stage, printed, then run."""
        argv = [str(a) for a in argv]
        if not self.stopped:
            self.commands.append(argv)
        self.inside(shlex.join(["run", *argv]))

    def check(self, *argv: object) -> None:
        """A command run quietly before the next stage's skip test (it may remove that stage's output)."""
        if self.stopped:
            return
        self.close()
        self.checks.append(shlex.join(map(str, argv)))

    def note(self, message: str) -> None:
        """A line the stage says where it runs."""
        self.inside(shlex.join(["say", message]))

    def say(self, message: str) -> None:
        """A line said where the script reaches it ([elapsed]: the time so far)."""
        self.top(shlex.join(["say", message]))

    def mkdir(self, path: PathLike) -> None:
        self.inside(shlex.join(["mkdir", "-p", str(path)]))

    def write(self, path: PathLike, line: str) -> None:
        self.inside(f"printf '%s\\n' {shlex.quote(str(line))} >{shlex.quote(str(path))}")

    def mark(self, path: PathLike) -> None:
        """The date, in a file that says the stage finished."""
        self.inside(f"date -Is >{shlex.quote(str(path))}")

    def stale(self, path: PathLike) -> None:
        """Removed where any stage ran (the report, out of date)."""
        self.top(f"[[ $RAN == 0 ]] || rm -f {shlex.quote(str(path))}")

    def show(self, path: PathLike) -> None:
        """Printed on stdout."""
        self.top(shlex.join(["cat", str(path)]))

    def stop(self, message: str) -> None:
        """The run ends here (STOP_AFTER=binarize)."""
        self.top(shlex.join(["say", message]))
        self.stopped = True

    def render(self, header: list, functions: str, env: PathLike, recorded: str) -> str:
        """The whole script: ``header`` as comments, the stage functions (recipes/lib/stages.sh's text), recipe.env
        written to ``env`` (``recorded``: its text; the report reads it, and a recipe run afterwards compares its
        settings with it), then the stages in order."""
        self.close()
        env = Path(env)
        return "\n".join([
            "#!/usr/bin/env bash", *(f"# {line}".replace("\n", "\\n") if line else "#" for line in header),
            "set -euo pipefail", f"RECIPE={shlex.quote(self.recipe)} FORCE={shlex.quote(self.force)}", "",
            "# ---- the stage functions (recipes/lib/stages.sh)", functions.rstrip("\n"), "",
            f"# ---- the settings -> {env}",
            "# (a record, which the report reads and a recipe run compares with; editing it changes no command)",
            shlex.join(["mkdir", "-p", str(env.parent)]),
            f"cat >{shlex.quote(str(env))} <<'RECIPE_ENV'", *recorded.splitlines(), "RECIPE_ENV",
            *self.lines]) + "\n"
