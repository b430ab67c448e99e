"""What STOP_AFTER=settings gives back (biofairseq.recipe.settings.plan): the script, and recipe.env from its header."""


def script_of(stream):
    """The preview script: the text of its one ``out`` record."""
    words = stream.split("\0")
    return words[words.index("out") + 1]


def recorded_env(stream):
    """recipe.env's text, as the script writes it."""
    script = script_of(stream)
    return script[script.index("<<'RECIPE_ENV'\n") + len("<<'RECIPE_ENV'\n"):script.index("\nRECIPE_ENV\n") + 1]


def run_records(plan, tmp_path, stages_sh, env, fake_run=True):
    """recipes/lib/stages.sh's recipe_run on ``plan``'s records (a biofairseq.recipe.plan.Plan), with run() printing
    "RUN ..." instead of running (fake_run; the checks run). Returns the finished process."""
    import os
    import subprocess

    stream, stub = tmp_path / "plan.records", tmp_path / "plan-stub"
    stream.write_text(plan.stream() + "stop\0\0")
    stub.write_text(f"#!/bin/sh\ncat {stream}\n")
    stub.chmod(0o755)
    fake = 'run() { echo "RUN $*" >&2; }; ' if fake_run else ""
    script = f"set -euo pipefail; RECIPE=test; source {stages_sh}; PYTHON={stub}; {fake}recipe_run"
    return subprocess.run(["bash", "-c", script], env={**os.environ, **env}, capture_output=True, text=True)
