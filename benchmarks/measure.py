"""Running a benchmarked command as its own process, the way a user runs it; and the command line and runner every
step and memory benchmark shares: each names its systems (fairseq-train flags), this runs them in interleaved rounds
on a data-bin of the clinical cases and writes the Markdown the benchmark makes of the results."""

import argparse
import contextlib
import os
import tempfile
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[1]


def corpora():
    """(clinical cases, PharmaCoNER folder) that a benchmark reads: the full releases (4,618 cases; 500/250/250
    documents) under $BIOFAIRSEQ_SHARED/data when that variable is set, else the sample the repository ships
    (examples/data: 1,000 cases, gzip; 100/40/40 documents)."""
    shared = os.environ.get("BIOFAIRSEQ_SHARED")
    if not shared:
        return REPO / "examples" / "data" / "clinical_cases.jsonl.gz", REPO / "examples" / "data" / "pharmaconer"
    data = Path(shared) / "data"
    cases, pharmaconer = data / "spanish_clinical_text" / "clinical_cases.jsonl", data / "pharmaconer"
    if not cases.is_file() or not pharmaconer.is_dir():
        sys.exit(f"BIOFAIRSEQ_SHARED={shared}: no {cases} or {pharmaconer}; point it at the folder holding data/, or unset it")
    return cases, pharmaconer


def case_lines(cases):
    """The JSON lines of a clinical-cases file, compressed or not (split at newlines only: the texts hold U+2028)."""
    from biofairseq.corpus.sources import open_compressed

    with open_compressed(cases) as f:
        return [line.decode("utf-8") for line in f if line.strip()]


def run(cmd):
    """Wall seconds, peak RSS (MiB) of the process tree (os.wait4) and stdout of a command that must succeed."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PYTHON": sys.executable, "PYTHONWARNINGS": "ignore"}
    start = time.perf_counter()
    proc = subprocess.Popen([str(c) for c in cmd], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    out, err = proc.stdout.read().decode(), proc.stderr.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{cmd[1]} failed:\n{err[-3000:]}")
    return seconds, usage.ru_maxrss / 1024, out


# fairseq's trainer (fairseq-train, or biofairseq-train where a system's flags start with that name), run by this
# Python (on PATH or not), keeping the GPU's peak memory over the whole run: fairseq resets the peak after every
# update (to log gb_free), so each reset first folds it into PEAK.
TRAIN = """
import atexit, json, sys, torch
PEAK = {"allocated": 0, "reserved": 0}
reset = torch.cuda.reset_peak_memory_stats
def fold(*args, **kwargs):
    PEAK["allocated"] = max(PEAK["allocated"], torch.cuda.max_memory_allocated())
    PEAK["reserved"] = max(PEAK["reserved"], torch.cuda.max_memory_reserved())
    reset(*args, **kwargs)
torch.cuda.reset_peak_memory_stats = fold
def report():
    if torch.cuda.is_initialized():
        fold()
        PEAK["total"] = torch.cuda.get_device_properties(0).total_memory
        PEAK["device"] = torch.cuda.get_device_name(0)
        print("| cuda_peak |", json.dumps(PEAK), flush=True)
atexit.register(report)
from TRAIN_MODULE import cli_main
sys.argv[0] = "TRAIN_COMMAND"
cli_main()
"""
TRAINERS = {"fairseq-train": "fairseq_cli.train", "biofairseq-train": "biofairseq.train"}


def trainer_command(flags):
    """(the trainer's command, the rest): a system's flags may start with one of TRAINERS; fairseq-train if not."""
    if flags and flags[0] in TRAINERS:
        return flags[0], flags[1:]
    return "fairseq-train", flags
MIB = 2 ** 20


def fairseq_train_speed(data_bin, flags, updates, save_dir, cwd=None, allow_oom=False, curve=False):
    """fairseq-train with these flags (biofairseq-train if they start with that name) for a number of updates: its own updates/s and tokens/s, averaged over
    the logged intervals after the first (start-up), the process's peak RSS (MiB), and on a GPU the peak memory
    allocated and reserved by torch (MiB); with curve, the (update, loss) of every logged interval. fairseq skips
    a batch that runs out of GPU memory and goes on, so its OOM warnings are counted ("ooms"); any is an error
    unless allow_oom."""
    import json
    import statistics

    command, flags = trainer_command(flags)
    script = TRAIN.replace("TRAIN_MODULE", TRAINERS[command]).replace("TRAIN_COMMAND", command)
    cmd = [sys.executable, "-c", script, str(data_bin), *map(str, flags), "--max-update", str(updates),
           "--total-num-update", str(updates), "--save-dir", str(save_dir)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cwd)
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    ooms = sum("OOM" in l or "out of memory" in l for l in output.splitlines())
    if status != 0 or (ooms and not allow_oom):
        raise SystemExit(f"{command} {' '.join(cmd[3:])} failed:\n{output[-3000:]}")
    logged = [json.loads(l[l.index("{"):]) for l in output.splitlines() if "| train_inner |" in l]
    intervals = logged[1:]
    result = {
        "ups": statistics.mean(float(r["ups"]) for r in intervals) if intervals else None,
        "wps": statistics.mean(float(r["wps"]) for r in intervals) if intervals else None,
        "peak_rss_mb": usage.ru_maxrss / 1024,
    }
    for line in output.splitlines():
        if line.startswith("| cuda_peak |"):
            peak = json.loads(line.split("|", 2)[2])
            result.update(cuda_allocated_mb=peak["allocated"] / MIB, cuda_reserved_mb=peak["reserved"] / MIB,
                          cuda_total_mb=peak["total"] / MIB, device=peak["device"])
    if allow_oom:
        result["ooms"] = ooms
    if curve:
        result["curve"] = [(int(r["num_updates"]), float(r["loss"])) for r in logged]
    return result


def interleaved(systems, data_bin, rounds, updates, save_dir, cwd=None, curve=False, failures=None,
                train=None):
    """name -> one fairseq_train_speed (or train) per round of each system's flags; each round runs every system in
    turn, so that machine noise hits all alike. Given a dict of failures, a system whose run fails is recorded there
    (name -> the end of its output) and left out of the later rounds and of the result, so that one failure on a
    rarely lent machine does not lose the others' measures; without it, a failure ends the benchmark."""
    train = train or fairseq_train_speed
    results = {name: [] for name in systems}
    for r in range(rounds):
        for name, flags in systems.items():
            if failures is not None and name in failures:
                continue
            try:
                results[name].append(train(data_bin, flags, updates, save_dir, cwd=cwd, curve=curve))
            except SystemExit as failure:
                if failures is None:
                    raise
                failures[name] = str(failure)
                print(f"round {r + 1} {name}: FAILED\n{failure}", flush=True)
                continue
            print(f"round {r + 1} {name}: {results[name][-1]}", flush=True)
    return {name: runs for name, runs in results.items() if failures is None or name not in failures}


def memory_key(results):
    """The peak memory that matters: torch's on the GPU when the runs used one, else the process's RSS."""
    first = next(iter(results.values()))[0]
    return "cuda_allocated_mb" if "cuda_allocated_mb" in first else "peak_rss_mb"


def step_and_memory_ratios(results, baseline, other):
    """Per-round ratios: other's step time over baseline's (baseline's updates/s over other's), and other's peak
    memory over baseline's."""
    return round_ratios(results, baseline, other, "ups"), round_ratios(results, other, baseline, memory_key(results))


def ratio_line(label, ratios, note=""):
    """A Markdown bullet with the median of per-round ratios and their range."""
    import statistics

    return f"- {label}: **{statistics.median(ratios):.3f}** (rounds: {min(ratios):.3f} to {max(ratios):.3f}){note}"


def per_run(results):
    """Every run's measures, so that the medians can be recomputed from the committed result."""
    import json

    return "Per run: " + json.dumps(results)


def device_label(args):
    """The device and precision of a benchmark's --gpu/--bf16 arguments, in words."""
    return "GPU, " + ("bf16 (--amp-bf16)" if args.bf16 else "fp16") if args.gpu else f"{os.cpu_count()} CPU cores, fp32"


def precision_flags(args):
    """--bf16 runs our --amp-bf16 (a biofairseq model's flag): fairseq 0.12.3's own --bf16 means a TPU."""
    return ["--amp-bf16" if args.bf16 else "--fp16"] if args.gpu else ["--cpu"]


def medians(results):
    """name -> {measure: median over rounds} of interleaved fairseq_train_speed runs."""
    import statistics

    return {n: {k: statistics.median(x[k] for x in runs) for k in runs[0] if k not in ("device", "curve")}
            for n, runs in results.items()}


def round_ratios(results, numerator, denominator, key):
    """The per-round ratios of one measure between two systems (each round's pair ran back to back)."""
    return [a[key] / b[key] for a, b in zip(results[numerator], results[denominator])]


def speed_table(results):
    """The Markdown table of median updates/s, tokens/s and peak memory per system."""
    key = memory_key(results)
    return [
        f"| system | updates/s | tokens/s | {'peak GPU memory allocated' if key == 'cuda_allocated_mb' else 'peak RSS'} (MiB) |",
        "|---|---|---|---|",
        *(f"| {n} | {m['ups']:.2f} | {m['wps']:.0f} | {m[key]:.0f} |" for n, m in medians(results).items()),
    ]


def publish(lines, output):
    """Prints the Markdown result, and writes it to OUTPUT when one is given."""
    print("\n".join(lines))
    if output:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text("\n".join(lines) + "\n")


# ---- the shared command line: each benchmark asks for the flags it has, with its own defaults

FLAGS = {
    "rounds": lambda p, d: p.add_argument("--rounds", type=int, default=d, help="interleaved runs of each system"),
    "updates": lambda p, d: p.add_argument("--updates", type=int, default=d, help="updates per run"),
    "log_interval": lambda p, d: p.add_argument("--log-interval", type=int, default=d, help="updates per logged "
                                                "interval; the first (start-up, compilation) is not counted"),
    "only": lambda p, d: p.add_argument("--only", help="comma-separated words; run only the systems whose name holds "
                                        "one (the first system is the baseline)"),
    "keep_going": lambda p, d: p.add_argument("--keep-going", action="store_true", help="report a system whose run "
                                              "fails and measure the others"),
    "data_bin": lambda p, d: p.add_argument("--data-bin", type=Path, help="the data-bin of the cases to train on: "
                                            "built there if it is not yet (default: a temporary one)"),
    "gpu": lambda p, d: [p.add_argument("--gpu", action="store_true", help="train on the GPU (fp16, or --bf16)"),
                         p.add_argument("--bf16", action="store_true")],
}


def parser(doc, **defaults):
    """An argparse parser with the shared flags named in defaults (name: default) and --output; the benchmark adds
    its own."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    for name, default in defaults.items():
        FLAGS[name](p, default)
    p.add_argument("--output", type=Path, help="also write the Markdown result here")
    return p


@contextlib.contextmanager
def cases_data_bin(args, kind="bytebpe", train_docs=400, vocab_size=8000):
    """args.data_bin when it holds a data-bin; else one built from the cases (corpora()), kept at args.data_bin when
    that is given, in a temporary folder otherwise."""
    from biofairseq.dev.samples import build_corpus

    given = getattr(args, "data_bin", None)
    if given is not None and (given / "dict.txt").is_file():
        yield given
        return
    with tempfile.TemporaryDirectory() as tmp:
        corpus = given.parent if given else Path(tmp) / "corpus"
        data_bin = build_corpus(corpus, kind, train_docs=train_docs, valid_docs=20, vocab_size=vocab_size,
                                cases=corpora()[0]).data_bin
        if given and data_bin != given:
            data_bin.rename(given)
            data_bin = given
        yield data_bin


def vocabulary(data_bin, specials=4):
    """The model's vocabulary size: dict.txt's entries and fairseq's special symbols."""
    with open(data_bin / "dict.txt", encoding="utf-8", newline="\n") as f:  # a line a symbol, ended at "\n" alone
        return sum(1 for _ in f) + specials


def chosen(args, systems):
    """The systems --only keeps (all without it), in their order."""
    only = getattr(args, "only", None)
    if not only:
        return systems
    kept = {name: flags for name, flags in systems.items() if any(w in name for w in only.split(","))}
    if not kept:
        sys.exit(f"--only {only}: no system's name holds any of these words")
    return kept


def compare(args, systems, data_bin, curve=False):
    """(results, failures): the systems --only keeps, in interleaved rounds; a failing system is recorded in failures
    with --keep-going, and ends the benchmark without it."""
    systems = chosen(args, systems)
    failures = {} if getattr(args, "keep_going", False) else None
    with tempfile.TemporaryDirectory() as save:
        results = interleaved(systems, data_bin, args.rounds, args.updates, Path(save), cwd=REPO, curve=curve,
                              failures=failures)
    return results, failures or {}


def failure_lines(failures):
    """What each failed system printed last (--keep-going)."""
    lines = []
    for name, failure in (failures or {}).items():
        lines += [f"**{name} failed** (left out of the tables above); the end of its output:", "", "```",
                  *failure.splitlines()[-25:], "```", ""]
    return lines
