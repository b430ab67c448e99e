"""What STOP_AFTER=settings gives back (biofairseq.recipe.settings.plan): the script, and recipe.env from its header."""


def script_of(script):
    """The preview script (settings.plan gives it as it is)."""
    return script


def recorded_env(script):
    """recipe.env's text, as the script writes it."""
    return script[script.index("<<'RECIPE_ENV'\n") + len("<<'RECIPE_ENV'\n"):script.index("\nRECIPE_ENV\n") + 1]


def run_records(plan, tmp_path, env, fake_run=True):
    """The script of ``plan`` (a biofairseq.recipe.plan.Plan, its stages added) run by bash, with run() printing
    "RUN ..." instead of running (fake_run; the checks run) and no recipe.env written. Returns the finished process."""
    import os
    import subprocess

    script = plan.render([], "")
    functions, stages = script.split("\n# ---- the settings -> ", 1)
    fake = 'run() { echo "RUN $*" >&2; }\n' if fake_run else ""
    path = tmp_path / "plan.sh"
    stages = stages.split("\nRECIPE_ENV\n", 1)[1]  # after recipe.env's lines
    path.write_text(f"{functions}\n{fake}\n{stages}")
    return subprocess.run(["bash", str(path)], env={**os.environ, **env}, capture_output=True, text=True)
