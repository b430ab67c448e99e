"""Kill anywhere, lose nothing: recipes/bsc_bio_es.sh SIGKILLed inside every stage, then run again to the end.

A small sample (tests/test_recipe.py's: 120 clinical cases, 8/4/4 PharmaCoNER documents) and that test's SMALL
settings, with the training data-bin in shards (SHARD_MB) and WORKERS=2. The recipe runs from a working folder
outside the repository, once uninterrupted (the reference), then once per kill point in a fresh RUN_DIR: the harness
reads the recipe's stderr ("==== N title -> output" at each stage, "+ command" before each command) and the files it
writes, and at the point sends SIGKILL to the recipe's whole process group (started with start_new_session=True).
The same command then runs again, to the end, and what it left is checked:

- the rerun exits 0, and every stage's output is there and complete (the report too), nothing temporary left over;
- the cleaned text, the vocabulary and the data-bin's data files (*.bin, *.idx, dict.txt, the vocabulary files) are
  byte-identical to the reference's; preprocess.log is not compared, since fairseq-preprocess writes the temporary
  paths it read into it (DATA_BIN.tmp.<host>.<pid>/...);
- a kill mid-pretraining: the rerun resumed from checkpoint_last.pt (fairseq logs "Loaded checkpoint
  .../checkpoint_last.pt (epoch E @ U updates)") and stopped at MAX_UPDATE;
- a kill mid-sweep: the finished NER runs were kept (every file's hash and mtime unchanged) and the others redone.

The recipe has no setting for clean_corpus.py's --shard-size (default 64 MiB: the sample is one shard), so the
recipe's PYTHON is a wrapper that adds --shard-size (--clean-shard-size bytes) to clean_corpus.py, in the reference
and every run alike; everything else is the recipe's own.

    .venv/bin/python benchmarks/kill_anywhere.py                    # every point, ~30 min on 2 cores
    .venv/bin/python benchmarks/kill_anywhere.py --points vocab,ner-mid-sweep --keep
"""

import argparse
import datetime
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from biofairseq.dev.samples import RECIPE_SMALL, kill_group, recipe_sample

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "recipes" / "bsc_bio_es.sh"
VENV_BIN = REPO / ".venv" / "bin"
BIN = VENV_BIN if (VENV_BIN / "python").exists() else Path(sys.executable).parent
SMALL = RECIPE_SMALL  # the recipe tests' settings
VOCAB_FILES = {"dict.txt", "vocab.json", "merges.txt", "vocab_info.json", "sentencepiece.model", "sentencepiece.vocab"}
DONE_MARKERS = ("clean/stats.json", "vocab", "data-bin", "pretrain/finished", "pretrain/check.json", "hf/bsc_bio_es",
                "hf/random_init", "ner/pharmaconer/model=bsc_bio_es/report.json",
                "ner/pharmaconer/model=random_init/report.json", "report.md")  # what stage() takes for done
LOADED = re.compile(r"Loaded checkpoint (\S+) \(epoch (\d+) @ (\d+) updates\)")  # fairseq/trainer.py's line
SAVED = re.compile(r"Saved checkpoint (\S+) \(epoch (\d+) @ (\d+) updates")  # fairseq/checkpoint_utils.py's, after the copies


# ---- the sample, the environment, one recipe process

def python_wrapper(path, shard_size):
    path.write_text(
        "#!/bin/sh\n# the recipe's PYTHON: clean_corpus.py with --shard-size (the recipe has no setting for it)\n"
        f'case "$1" in */preprocess/clean_corpus.py) exec {shlex.quote(str(BIN / "python"))} "$@" --shard-size {shard_size} ;; esac\n'
        f'exec {shlex.quote(str(BIN / "python"))} "$@"\n')
    path.chmod(0o755)
    return path


class Recipe:
    """One run of the recipe in its own session (process group); its stderr is read line by line as it comes."""

    def __init__(self, env, cwd, log):
        self.env, self.cwd, self.log = env, cwd, log
        self.lines, self.text, self.started = [], "", None

    def start(self):
        self.started = time.monotonic()
        self.stdout = open(self.log.with_suffix(".stdout"), "wb")
        self.proc = subprocess.Popen(["bash", str(RECIPE)], cwd=self.cwd, env=self.env, stdout=self.stdout,
                                     stderr=subprocess.PIPE, start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        return self

    def _read(self):
        with open(self.log, "wb") as log:
            pending = b""
            for chunk in iter(lambda: os.read(self.proc.stderr.fileno(), 1 << 16), b""):
                log.write(chunk)
                pending += chunk
                *done, pending = re.split(rb"[\r\n]", pending)
                for line in done:
                    if line:
                        text = line.decode("utf-8", "replace")
                        self.lines.append(text)
                        self.text += text + "\n"
            if pending:
                self.lines.append(pending.decode("utf-8", "replace"))
                self.text += self.lines[-1] + "\n"

    def elapsed(self):
        return time.monotonic() - self.started

    def stage(self):
        """The stage the recipe printed last ("4", "6b", ...), or None."""
        for line in reversed(self.lines):
            if line.startswith("==== "):
                return line.split()[1]
        return None

    def kill(self):
        """SIGKILL to the whole process group, then waits until no process of it is left."""
        kill_group(self.proc)
        self.finish()

    def wait(self, timeout):
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise
        self.finish()
        return self.proc.returncode

    def finish(self):
        self.reader.join(30)
        self.proc.stderr.close()
        self.stdout.close()


# ---- the kill points: each a predicate on (recipe, RUN_DIR) that says what it saw, or None

def _count(pattern, folder):
    return len(list(folder.glob(pattern))) if folder.is_dir() else 0


def _plan_shards(run_dir):
    plan = run_dir / "clean" / "work" / "plan.json"
    try:
        return len(json.loads(plan.read_text())["shards"])
    except (OSError, ValueError):
        return None


def clean_mid_shards(r, run_dir):
    if r.stage() != "1":
        return None
    total = _plan_shards(run_dir)
    done = _count("*/*.json", run_dir / "clean" / "work" / "shards")
    if total and 0 < done < total:
        return f"{done} of {total} cleaned shards written (clean/work/shards/*/NAME.json)"
    return None


def clean_dedup(r, run_dir):
    if r.stage() != "1":
        return None
    total = _plan_shards(run_dir)
    done = _count("*/*.json", run_dir / "clean" / "work" / "shards")
    if total and done == total and not (run_dir / "clean" / "stats.json").exists():
        dedup = (run_dir / "clean" / "work" / "dedup").is_dir()
        return f"all {total} shards cleaned, {'deduplicating (work/dedup)' if dedup else 'merging/splitting'}; no stats.json"
    return None


def vocab(r, run_dir):
    if r.stage() != "2":
        return None
    temps = [p.name for p in run_dir.glob(".vocab.*")]
    if temps:
        return f"train_vocab.py learning, into its temporary {temps[0]}; no vocab/"
    return None


def binarize_mid(r, run_dir):
    if r.stage() != "3":
        return None
    temps = list(run_dir.glob("data-bin.tmp.*"))
    parts = sorted(p.name for p in temps[0].glob("parts/train*.bin")) if temps else []
    if not parts:
        return None
    return f"ranges being encoded ({', '.join(parts)} begun) in {temps[0].name}; no shard assembled yet"


def _saved_at(r, updates):
    return any((m := SAVED.search(line)) and int(m.group(3)) == updates and "checkpoint_last" not in m.group(1)
               for line in r.lines[-40:])


def pretrain_mid(r, run_dir):
    if r.stage() == "4" and _saved_at(r, int(SMALL["SAVE_INTERVAL_UPDATES"])):
        last = run_dir / "pretrain" / "checkpoints" / "checkpoint_last.pt"
        return f"checkpoint at update {SMALL['SAVE_INTERVAL_UPDATES']} saved (checkpoint_last.pt {last.stat().st_size:,} bytes); pretraining goes on"
    return None


def pretrain_end(r, run_dir):
    if r.stage() == "4" and _saved_at(r, int(SMALL["MAX_UPDATE"])):
        return f"the last checkpoint (update {SMALL['MAX_UPDATE']}) saved; no pretrain/finished yet"
    return None


def pick(r, run_dir):
    if r.stage() == "5" and (run_dir / "pretrain" / "best.json").is_file():
        return "best.json written; the check against word frequencies running (no check.json)"
    return None


def _staging(run_dir, name):
    return [p.name for p in (run_dir / "hf").glob(f".{name}.tmp-*")]


def convert(r, run_dir):
    if r.stage() == "6" and (staging := _staging(run_dir, "bsc_bio_es")):
        return f"biofairseq-convert to-hf writing into {staging[0]}"
    return None


def random_init(r, run_dir):
    if r.stage() == "6b" and (staging := _staging(run_dir, "random_init")):
        return f"random_init writing into {staging[0]}"
    return None


def _first_sweep(run_dir):
    return run_dir / "ner" / "pharmaconer" / "model=bsc_bio_es"


def ner_checkpoint(r, run_dir):
    if r.stage() == "7":
        found = list((_first_sweep(run_dir) / "lr=0.001" / "seed=1" / "checkpoints").glob("checkpoint-*"))
        if found:
            return f"first NER run: transformers writing {found[0].name} ({', '.join(sorted(p.name for p in found[0].iterdir())) or 'empty'})"
    return None


def ner_mid_sweep(r, run_dir):
    if r.stage() == "7" and (_first_sweep(run_dir) / "lr=0.001" / "seed=1" / "metrics.json").is_file():
        return "first run (seed=1) finished (metrics.json), the second running; no report.json"
    return None


def ner_sweep_report(r, run_dir):
    sweep = _first_sweep(run_dir)
    if r.stage() == "7" and (sweep / "report.json").is_file():
        have = [name for name in ("report.json", "report.md", "dev_f1.png") if (sweep / name).is_file()]
        return f"the sweep's report being written: {', '.join(have)} there"
    return None


def report(r, run_dir):
    if r.stage() == "8" and (run_dir / "ner" / "pharmaconer" / "report.json").is_file():
        return "report.py running: ner/pharmaconer/report.json written, no report.md"
    return None


def cut_checkpoint_copy(run_dir):
    """What a kill during fairseq's copy of the new checkpoint to checkpoint_last.pt leaves (a copy in place, after the
    checkpoint itself was written through a temporary and a rename): the file's first half. The copy of this tiny
    model's 9 MB takes milliseconds, too short a window for a kill to land in reliably, so it is made by hand."""
    last = run_dir / "pretrain" / "checkpoints" / "checkpoint_last.pt"
    data = last.read_bytes()
    last.write_bytes(data[: len(data) // 2])
    return f"then checkpoint_last.pt cut to its first {len(data) // 2:,} of {len(data):,} bytes (simulated: a kill mid-copy)"


POINTS = {  # name: (stage, where, predicate[, what is done to RUN_DIR after the kill])
    "clean-mid-shards": ("1", "cleaning: some but not all shards written", clean_mid_shards),
    "clean-dedup": ("1", "cleaning: every shard written, before stats.json (deduplication, split)", clean_dedup),
    "vocab": ("2", "learning the vocabulary", vocab),
    "binarize-mid": ("3", "binarizing: ranges being encoded into parts, before the data-bin is complete", binarize_mid),
    "pretrain-mid": ("4", "pretraining: checkpoint of update 10 saved, before update 20", pretrain_mid),
    "pretrain-cut-copy": ("4", "pretraining: killed as pretrain-mid, checkpoint_last.pt then cut as a kill mid-copy "
                          "leaves it (simulated)", pretrain_mid, cut_checkpoint_copy),
    "pretrain-end": ("4", "pretraining: last checkpoint saved, before pretrain/finished", pretrain_end),
    "pick": ("5", "picking and checking the checkpoint", pick),
    "convert": ("6", "converting to transformers", convert),
    "random-init": ("6b", "making the random-init twin", random_init),
    "ner-checkpoint": ("7", "NER: the first run's checkpoint being saved", ner_checkpoint),
    "ner-mid-sweep": ("7", "NER: first run finished, before the sweep's report.json", ner_mid_sweep),
    "ner-sweep-report": ("7", "NER: the sweep's report being written", ner_sweep_report),
    "report": ("8", "writing the report", report),
}


# ---- what a finished RUN_DIR must hold

def sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def files(folder, keep=lambda p: True):
    return {str(p.relative_to(folder)): sha(p) for p in sorted(folder.rglob("*")) if p.is_file() and keep(p)} if folder.is_dir() else {}


def data_bin_files(run_dir):
    """The data-bin's data files (preprocess.log names temporary paths; train.index/ is fairseq-train's cache)."""
    return files(run_dir / "data-bin", lambda p: (p.suffix in (".bin", ".idx") or p.name in VOCAB_FILES)
                 and not any(part.endswith(".index") for part in p.relative_to(run_dir / "data-bin").parts[:-1]))


def folder_state(folder):
    """{relative path: (sha256, mtime_ns)} of every file under folder."""
    return {str(p.relative_to(folder)): (sha(p), p.stat().st_mtime_ns) for p in sorted(folder.rglob("*")) if p.is_file()}


def leftovers(run_dir):
    """Temporaries left in RUN_DIR: hidden files or folders, names with .tmp, clean/work; the index cache's lock is not one."""
    found = []
    for p in sorted(run_dir.rglob("*")):
        rel = p.relative_to(run_dir)
        if any(str(Path(*rel.parts[:i])) in found for i in range(1, len(rel.parts))):
            continue  # inside one already listed
        if (p.name == ".lock" and p.parent.name.endswith(".index")) or p.name == "recipe.env":
            continue
        if p.name.startswith(".") or ".tmp" in p.name or rel.parts[:2] == ("clean", "work"):
            found.append(str(rel))
    return found


def snapshot(run_dir):
    return {"clean": files(run_dir / "clean", lambda p: p.name in ("train.txt", "valid.txt", "stats.json")),
            "vocab": files(run_dir / "vocab"), "data_bin": data_bin_files(run_dir),
            "hf_model": sha(run_dir / "hf" / "bsc_bio_es" / "model.safetensors")
            if (run_dir / "hf" / "bsc_bio_es" / "model.safetensors").is_file() else None}


def checkpoint_updates(path):
    """The updates a fairseq checkpoint was saved at (its tensors not read), or None."""
    import argparse

    import torch

    try:
        with torch.serialization.safe_globals([argparse.Namespace]):
            state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        return (state.get("optimizer_history") or [{}])[-1].get("num_updates")
    except Exception:  # noqa: BLE001  (missing, cut short: not a checkpoint)
        return None


def final_ppl(run_dir):
    try:
        return json.loads((run_dir / "report.json").read_text())["pretraining"]["validations"][-1]["ppl"]
    except (OSError, ValueError, KeyError, IndexError):
        return None


def check_complete(run_dir, rerun, reference):
    """(name, ok, detail) of what every finished RUN_DIR must hold."""
    checks = []

    def add(name, ok, detail=""):
        checks.append((name, bool(ok), detail))

    add("rerun exits 0", rerun.proc.returncode == 0, f"exit {rerun.proc.returncode}")
    now = snapshot(run_dir)
    for key, what in (("clean", "clean/train.txt, valid.txt, stats.json"), ("vocab", "vocab/"),
                      ("data_bin", "data-bin/*.bin, *.idx, dict.txt, vocabulary files")):
        differ = sorted(k for k in now[key].keys() | reference[key].keys() if now[key].get(k) != reference[key].get(k))
        add(f"{what} identical to the reference's", not differ and now[key],
            f"{len(now[key])} files" if not differ else f"differ: {', '.join(differ[:6])}")
    pretrain = run_dir / "pretrain"
    add("pretrain/finished, best.json, check.json", all((pretrain / n).is_file() for n in ("finished", "best.json", "check.json")))
    try:
        updates = json.loads((run_dir / "report.json").read_text())["pretraining"]["updates"]
    except (OSError, ValueError, KeyError):
        updates = None
    saved = [int(m.group(3)) for m in SAVED.finditer(rerun.text)]
    last = checkpoint_updates(pretrain / "checkpoints" / "checkpoint_last.pt")
    add(f"pretraining reached MAX_UPDATE={SMALL['MAX_UPDATE']} and no further", updates == last == int(SMALL["MAX_UPDATE"])
        and all(u <= int(SMALL["MAX_UPDATE"]) for u in saved),
        f"report: {updates} updates; checkpoint_last.pt: update {last}"
        + (f"; the rerun saved checkpoints at updates {sorted(set(saved))}" if saved else ""))
    for model in ("bsc_bio_es", "random_init"):
        folder = run_dir / "hf" / model
        need = ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]
        need += ["conversion.json", "README.md"] if model == "bsc_bio_es" else []
        missing = [n for n in need if not (folder / n).is_file()]
        loads = False
        if not missing:
            try:
                from safetensors import safe_open

                with safe_open(folder / "model.safetensors", "pt") as f:
                    loads = len(list(f.keys())) > 0
            except Exception as error:  # noqa: BLE001  (a half-written file, whatever the error)
                missing.append(f"model.safetensors unreadable: {error}")
        add(f"hf/{model} complete", not missing and loads, ", ".join(missing))
    for model in ("bsc_bio_es", "random_init"):
        sweep = run_dir / "ner" / "pharmaconer" / f"model={model}"
        need = ["report.json", "report.md", "dev_f1.png", "model.sha256"] + [f"lr=0.001/seed={s}/metrics.json" for s in (1, 2)]
        missing = [n for n in need if not (sweep / n).is_file()]
        add(f"sweep model={model} complete", not missing, f"missing {', '.join(missing)}" if missing else "")
    missing = [n for n in ("report.md", "report.json", "report.png", "ner/pharmaconer/report.md") if not (run_dir / n).is_file()]
    printed = Path(rerun.log.with_suffix(".stdout")).read_text(encoding="utf-8", errors="replace").strip()
    add("report complete, and the one printed", not missing and printed == (run_dir / "report.md").read_text().strip(),
        f"missing {', '.join(missing)}" if missing else "")
    left = leftovers(run_dir)
    add("no temporary left", not left, ", ".join(left))
    same = now["hf_model"] == reference["hf_model"]
    ppl, ref_ppl = final_ppl(run_dir), reference["ppl"]
    info = f"hf/bsc_bio_es/model.safetensors {'identical to' if same else 'differs from'} the reference's; final valid ppl {ppl} (reference {ref_ppl})"
    return checks, info


def check_point(name, run_dir, rerun, seen):
    """The checks of one point beyond completeness."""
    checks = []
    if name == "clean-mid-shards":
        m = re.search(r"resuming: (\d+) of (\d+) shards already cleaned", rerun.text)
        checks.append(("rerun resumed the cleaning (kept the cleaned shards)", m and int(m.group(1)) >= 1,
                       m.group(0) if m else "no 'resuming:' line"))
    if name in ("pretrain-mid", "pretrain-cut-copy", "pretrain-end"):
        expect = int(SMALL["SAVE_INTERVAL_UPDATES"] if name != "pretrain-end" else SMALL["MAX_UPDATE"])
        loaded = [m for m in LOADED.finditer(rerun.text)]
        ok = any(m.group(1).endswith("/pretrain/checkpoints/checkpoint_last.pt") and int(m.group(3)) == expect for m in loaded)
        said = loaded[0].group(0) if loaded else "no 'Loaded checkpoint' line"
        if name == "pretrain-end" and not loaded:  # recipes/lib/stages.sh does not start fairseq-train again at the end
            done = re.search(r"checkpoint_last\.pt: at update (\d+) already[^\n]*", rerun.text)
            ok, said = bool(done and int(done.group(1)) == expect), done.group(0) if done else said
        checks.append((f"rerun resumed from checkpoint_last.pt at update {expect}", ok, said))
        if name == "pretrain-cut-copy":
            mended = re.search(r"checkpoint_last\.pt: cut short[^\n]*", rerun.text)
            checks.append(("the cut checkpoint_last.pt was mended, not loaded", bool(mended), mended.group(0) if mended else ""))
    if name == "ner-mid-sweep":
        first = seen["seed1"]
        after = folder_state(_first_sweep(run_dir) / "lr=0.001" / "seed=1")
        checks.append(("the finished run (seed=1) kept: every file's hash and mtime unchanged", first and after == first,
                       f"{len(first)} files" if after == first else "changed: " + ", ".join(
                           sorted(k for k in first.keys() | after.keys() if first.get(k) != after.get(k))[:6])))
        skipped = "lr=0.001/seed=1: finished earlier, skipped" in rerun.text
        metrics = _first_sweep(run_dir) / "lr=0.001" / "seed=2" / "metrics.json"
        redone = metrics.is_file() and metrics.stat().st_mtime > seen["killed_at"]
        checks.append(("the rerun skipped seed=1 and redid seed=2", skipped and redone,
                       f"skipped line: {skipped}; seed=2 metrics.json written after the kill: {redone}"))
    return checks


# ---- the benchmark

def run_point(name, work, env, reference, timeout, keep):
    stage, where, predicate, *after_kill = POINTS[name]
    run_dir = work / name / "run"
    run_dir.parent.mkdir(parents=True)
    env = {**env, "RUN_DIR": str(run_dir)}
    first = Recipe(env, work, work / name / "killed.log").start()
    seen, description = {}, None
    while first.proc.poll() is None and first.elapsed() < timeout:
        try:
            description = predicate(first, run_dir)
        except (OSError, ValueError, IndexError):  # a file that went away while it was looked at
            description = None
        if description:
            if name == "ner-mid-sweep":  # before the kill, so that what the rerun may change is known
                seen["seed1"] = folder_state(_first_sweep(run_dir) / "lr=0.001" / "seed=1")
            killed_after = first.elapsed()
            first.kill()
            seen["killed_at"] = time.time()
            for change in after_kill:
                description += "; " + change(run_dir)
            break
        time.sleep(0.005)
    else:
        first.wait(60) if first.proc.poll() is None else first.finish()
        return {"name": name, "stage": stage, "where": where, "killed": False,
                "seen": f"the point was never reached (exit {first.proc.returncode} after {first.elapsed():.0f} s)",
                "checks": [], "info": ""}
    at_kill = {"stage_after_kill": first.stage(), "leftovers_at_kill": leftovers(run_dir),
               "done_at_kill": [m for m in DONE_MARKERS if (run_dir / m).exists()]}
    rerun = Recipe(env, work, work / name / "rerun.log").start()
    rerun.wait(timeout)
    checks, info = check_complete(run_dir, rerun, reference)
    checks += check_point(name, run_dir, rerun, seen)
    result = {"name": name, "stage": stage, "where": where, "killed": True, "seen": description,
              "killed_after_s": round(killed_after, 1), "rerun_s": round(rerun.elapsed(), 1), "checks": checks, "info": info,
              **at_kill, "rerun_tail": rerun.lines[-15:] if rerun.proc.returncode else []}
    if not keep and all(ok for _, ok, _ in checks):
        shutil.rmtree(run_dir)
    return result


DEFECTS = """\
## Defects this harness found (2026-11-25, before the fixes; the table above is after them)

Each was seen in a run of this harness on the code before the fix (or, for the binarize temporary, in
tests/test_kill_anywhere.py), and each fix has a test in tests/test_kill_anywhere.py that fails without it.

1. **pretrain-end: the rerun trained past MAX_UPDATE.** Killed after the last checkpoint (update 20), before
   `pretrain/finished`, the rerun started fairseq-train again on checkpoint_last.pt at update 20. fairseq tests
   --max-update only after an update (fairseq_cli/train.py:331 `trainer.train_step`, then :389 in
   `validate_and_save`), so it trained update 21 (at learning rate 0), validated again and overwrote checkpoint_best.pt
   ("Saved checkpoint .../checkpoint_best.pt (epoch 3 @ 21 updates, score 1075.57)"). In a two-phase recipe the same
   window makes phase 1 overshoot, and the second phase's start then took its first launch for a resume (more
   updates than phase 1's), so phase 2 would start without --reset-dataloader. Fix: biofairseq-train
   (biofairseq/train_inputs.py) reads checkpoint_last.pt's update count (biofairseq/training_state.py) and does not
   train when it is already at --max-update (first fixed in the recipe's bash, which no longer builds the command).
2. **pretrain-cut-copy: a checkpoint_last.pt cut short stopped every rerun.** fairseq writes checkpoint_E_U.pt through a
   temporary and a rename, then copies it in place to checkpoint_best.pt and checkpoint_last.pt
   (fairseq/checkpoint_utils.py:139, `PathManager.copy`). Killed during that copy (simulated here: the copy of a 9 MB
   checkpoint takes milliseconds; of a base model's 1.5 GB, seconds), the rerun failed, and would at every rerun:
   "RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory" (fairseq/trainer.py:495
   -> checkpoint_utils.py:340). Fix: `biofairseq/training_state.py` (`mend`, as biofairseq-train starts) replaces a checkpoint*.pt that is a zip
   without its central directory (written last) by the newest complete checkpoint, the copy's source, before
   fairseq-train starts.
3. **ner-checkpoint: a fine-tuning checkpoint cut short stopped every rerun.** transformers writes checkpoint-N in place,
   trainer_state.json last (`Trainer._save_checkpoint`). Killed while it saved, the first NER run left an empty
   checkpoints/checkpoint-4; biofairseq/finetune/training.py:402 resumes from `get_last_checkpoint`, and the rerun failed:
   "ValueError: Can't find a valid checkpoint at .../seed=1/checkpoints/checkpoint-4" (transformers/trainer.py:3657).
   Fix: biofairseq/finetune/training.py (`drop_cut_checkpoints`) removes, before a run resumes (on its own or in a
   sweep), each checkpoint-N whose trainer_state.json is missing or cut short; the run resumes from the checkpoint
   before, or starts afresh.
4. **ner-sweep-report: a sweep whose report was cut short was taken for done.** The sweep's report is written report.json,
   report.md, then dev_f1.png (biofairseq/finetune/sweep_report.py, after the runs: finetune/cli.py:219), and stage 7
   takes report.json for done. Killed during the plot, the rerun skipped the sweep, whose folder
   never got dev_f1.png. Fix: stage 7's check (`biofairseq.finetune.fingerprint check-sweep`, before the stage's skip
   test) removes the report.json of a sweep without report.md or dev_f1.png, so that
   the sweep runs again (its finished runs skipped) and writes its report whole.
5. **vocab (and convert, random-init, binarize): a killed stage's temporaries were never removed.** SIGKILL runs no
   cleanup, and each rerun names its own temporary after its own PID, so these stayed for good: preprocess/train_vocab.py's
   mkdtemp `.vocab.XXXXXXXX` (train_vocab.py:76; its removal at :90), biofairseq.atomic's staging folder `.NAME.tmp-PID`
   (atomic.py:27: the conversion and the random-init twin, a model's size each) and temporary files, and
   preprocess/binarize.sh's `DATA_BIN.tmp.PID` (its EXIT trap: a data-bin's size, encoded text included). Fix: `stage()`
   (stages.sh) removes `.*.tmp-*` and `.NAME.*` beside a stage's output before the stage runs again; binarize.sh names
   its temporary DATA_BIN.tmp.HOST.PID and removes those of this host whose process is gone (`kill -0`), so that a run
   by hand is covered too (another host's may be a live run's on a shared file system, and stay).

Not defects: the cleaning resumes from its finished shards and writes the same train.txt and valid.txt; binarize starts
over from its clean text and writes the same data; picking and checking the checkpoint, and the report, are redone
whole. The recipe has no setting for clean_corpus.py's --shard-size (hence the wrapper above): with the default 64 MiB a
corpus under that size cleans in one shard, and a kill mid-cleaning then redoes all of it.
"""


def markdown(args, command, reference, results, wall):
    killed = [r for r in results if r["killed"]]
    correct = [r for r in killed if all(ok for _, ok, _ in r["checks"])]
    lines = [
        "# Kill anywhere, lose nothing: recipes/bsc_bio_es.sh SIGKILLed inside every stage, then run again", "",
        f"Command: `{command}` ({datetime.date.today().isoformat()}, {os.cpu_count()} cores, CPU; {wall / 60:.1f} min in all).", "",
        f"Settings: tests/test_recipe.py's sample (120 clinical cases, 8/4/4 PharmaCoNER documents) and SMALL "
        f"({' '.join(f'{k}={v}' for k, v in SMALL.items())}), SHARD_MB={args.shard_mb} ({reference['shards']} training "
        f"shards), WORKERS={args.workers}; clean_corpus.py --shard-size {args.clean_shard_size} (about {reference['clean_shards']} "
        "cleaning shards) through a PYTHON wrapper, since the recipe has no setting for it. The recipe runs from a folder "
        "outside the repository, each run in a fresh RUN_DIR; the kill is SIGKILL to its process group, the rerun the same "
        "command to the end.", "",
        f"Reference (uninterrupted): {reference['seconds']:.0f} s, final valid ppl {reference['ppl']}.", "",
        f"**{len(killed)} points killed, {len(correct)} reruns finished correctly** (every check passed).", "",
        "| # | point | stage | what the harness saw when it killed | killed after (s) | rerun (s) | checks | failed |",
        "|---:|---|---|---|---:|---:|---:|---|",
    ]
    for i, r in enumerate(results, 1):
        failed = "; ".join(f"{n}: {d}" for n, ok, d in r["checks"] if not ok)
        passed = sum(ok for _, ok, _ in r["checks"])
        lines.append(f"| {i} | {r['name']} | {r['stage']} | {r['seen']} | {r.get('killed_after_s', '')} | {r.get('rerun_s', '')} "
                     f"| {passed}/{len(r['checks'])} | {failed or 'none'} |")
    lines += ["", "## Per point", ""]
    for r in results:
        lines.append(f"### {r['name']}: {r['where']}")
        lines.append("")
        lines.append(f"- seen at the kill: {r['seen']}")
        if r["killed"]:
            lines.append(f"- stages done at the kill: {', '.join(r['done_at_kill']) or 'none'}; temporaries in RUN_DIR right "
                         f"after it: {', '.join(r['leftovers_at_kill']) or 'none'}")
            for n, ok, d in r["checks"]:
                lines.append(f"- {'ok' if ok else '**FAILED**'}: {n}{f' ({d})' if d else ''}")
            lines.append(f"- {r['info']}")
            if r["rerun_tail"]:
                lines.append("- the rerun's last lines:")
                lines.append("")
                lines.append("```")
                lines += [line[:300] for line in r["rerun_tail"]]
                lines.append("```")
        lines.append("")
    lines += [DEFECTS, "## What is compared", "",
        "- The data-bin's data files: every shard's train/valid .bin and .idx, dict.txt and the vocabulary files "
        "(vocab.json, merges.txt, vocab_info.json). Not preprocess.log: fairseq-preprocess writes the paths it read, "
        "which are binarize.sh's temporaries (DATA_BIN.tmp.<host>.<pid>/encoded/...), different in every run. Not "
        "train.index/: the index cache fairseq-train writes into the data-bin.",
        "- clean/train.txt, valid.txt and stats.json; every file of vocab/.",
        "- Complete outputs: pretrain/finished, best.json, check.json; hf/bsc_bio_es and hf/random_init with their config, "
        "weights (read back with safetensors) and tokenizer; each sweep's report.json, report.md, dev_f1.png, model.sha256 "
        "and both runs' metrics.json; report.md (the one printed), report.json, report.png.",
        "- Temporaries: hidden files or folders and names with .tmp anywhere in RUN_DIR, and clean/work (the index "
        "cache's .lock excepted).",
        "- Informational (not a check): whether hf/bsc_bio_es/model.safetensors is byte-identical to the reference's "
        "(a kill before or during pretraining resumes it, which need not give the same weights) and the final validation "
        "perplexity.", "",
    ]
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--points", default=",".join(POINTS),
                   help=f"comma-separated kill points (default: all): {', '.join(POINTS)}")
    p.add_argument("--work-dir", type=Path, help="working folder, outside the repository (default: a new temporary one)")
    p.add_argument("--shard-mb", default="0.1", help="the recipe's SHARD_MB (default: 0.1, 5 training shards)")
    p.add_argument("--clean-shard-size", type=int, default=30000,
                   help="clean_corpus.py --shard-size in bytes, added by the PYTHON wrapper (default: 30000, 16 shards)")
    p.add_argument("--workers", default="2", help="the recipe's WORKERS (default: 2)")
    p.add_argument("--timeout", type=float, default=900, help="seconds a run may take (default: 900)")
    p.add_argument("--keep", action="store_true", help="keep every RUN_DIR (default: only those of a point that failed)")
    p.add_argument("--output", type=Path, default=REPO / "benchmarks" / "results" / "kill_anywhere.md")
    args = p.parse_args(argv)
    names = [n for n in args.points.split(",") if n]
    unknown = [n for n in names if n not in POINTS]
    if unknown:
        p.error(f"--points: unknown {', '.join(unknown)}; choose from {', '.join(POINTS)}")
    work = (args.work_dir or Path(tempfile.mkdtemp(prefix="kill-anywhere-"))).resolve()
    if work == REPO or REPO in work.parents:
        p.error(f"--work-dir {work}: inside the repository; the recipe runs from a folder outside it")
    if work.exists() and any(work.iterdir()):
        p.error(f"--work-dir {work}: not empty")
    work.mkdir(parents=True, exist_ok=True)
    python = Path(sys.executable)
    python = python.relative_to(REPO) if REPO in python.parents else python
    command = f"{python} benchmarks/kill_anywhere.py" + "".join(f" {shlex.quote(a)}" for a in (sys.argv[1:] if argv is None else argv))
    started = time.monotonic()

    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore",
           "PYTHON": str(python_wrapper(work / "python", args.clean_shard_size)), **SMALL,
           **recipe_sample(work / "sample"), "SHARD_MB": args.shard_mb, "WORKERS": args.workers}
    print(f"{work}: reference run", file=sys.stderr, flush=True)
    ref_dir = work / "reference" / "run"
    ref_dir.parent.mkdir()
    ref = Recipe({**env, "RUN_DIR": str(ref_dir)}, work, work / "reference" / "recipe.log").start()
    if ref.wait(args.timeout) != 0:
        sys.exit(f"the reference run failed (exit {ref.proc.returncode}); see {ref.log}")
    reference = {**snapshot(ref_dir), "seconds": ref.elapsed(), "ppl": final_ppl(ref_dir),
                 "shards": len(list((ref_dir / "data-bin").glob("shard*"))) or 1,
                 "clean_shards": -(-Path(env["SOURCES"].split("=", 1)[1]).stat().st_size // args.clean_shard_size)}
    reference_checks, _ = check_complete(ref_dir, ref, reference)
    bad = [n for n, ok, _ in reference_checks if not ok]
    if bad:
        sys.exit(f"the reference run is incomplete ({'; '.join(bad)}); see {ref.log}")

    results = []
    for name in names:
        print(f"[{len(results) + 1}/{len(names)}] {name}: {POINTS[name][1]}", file=sys.stderr, flush=True)
        result = run_point(name, work, env, reference, args.timeout, args.keep)
        results.append(result)
        failed = [n for n, ok, _ in result["checks"] if not ok]
        print(f"  seen: {result['seen']}; {'FAILED: ' + '; '.join(failed) if failed else 'all checks passed' if result['killed'] else ''}",
              file=sys.stderr, flush=True)
    wall = time.monotonic() - started
    text = markdown(args, command, reference, results, wall)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text + "\n", encoding="utf-8")
    (work / "results.json").write_text(json.dumps(results, indent=1, default=str))
    killed = [r for r in results if r["killed"]]
    correct = [r for r in killed if all(ok for _, ok, _ in r["checks"])]
    print(f"{len(killed)} points killed, {len(correct)} reruns finished correctly; wrote {args.output} ({wall / 60:.1f} min)",
          file=sys.stderr)
    if not args.keep and len(correct) == len(results):
        shutil.rmtree(work)
    return 0 if len(correct) == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
