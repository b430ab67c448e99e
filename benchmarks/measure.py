"""Running a benchmarked command as its own process, the way a user runs it."""

import os
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent


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


def fairseq_train_speed(data_bin, flags, updates, save_dir, cwd=None):
    """fairseq-train with these flags for a number of updates: its own updates/s and tokens/s, averaged over
    the logged intervals after the first (start-up), and the process's peak RSS (MiB)."""
    import json
    import statistics

    cmd = [str(BIN / "fairseq-train"), str(data_bin), *map(str, flags), "--max-update", str(updates),
           "--total-num-update", str(updates), "--save-dir", str(save_dir)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cwd)
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{output[-3000:]}")
    intervals = [json.loads(l[l.index("{"):]) for l in output.splitlines() if "| train_inner |" in l][1:]
    return {
        "ups": statistics.mean(float(r["ups"]) for r in intervals),
        "wps": statistics.mean(float(r["wps"]) for r in intervals),
        "peak_rss_mb": usage.ru_maxrss / 1024,
    }


def interleaved(systems, data_bin, rounds, updates, save_dir, cwd=None):
    """name -> one fairseq_train_speed per round of each system's flags; each round runs every system in turn, so
    that machine noise hits all alike."""
    results = {name: [] for name in systems}
    for r in range(rounds):
        for name, flags in systems.items():
            results[name].append(fairseq_train_speed(data_bin, flags, updates, save_dir, cwd=cwd))
            print(f"round {r + 1} {name}: {results[name][-1]}", flush=True)
    return results


def step_and_memory_ratios(results, baseline, other):
    """Per-round ratios: other's step time over baseline's (baseline's updates/s over other's), and other's peak
    memory over baseline's."""
    return round_ratios(results, baseline, other, "ups"), round_ratios(results, other, baseline, "peak_rss_mb")


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
    return "GPU, " + ("bf16" if args.bf16 else "fp16") if args.gpu else f"{os.cpu_count()} CPU cores, fp32"


def precision_flags(args):
    return ["--bf16" if args.bf16 else "--fp16"] if args.gpu else ["--cpu"]


def medians(results):
    """name -> {measure: median over rounds} of interleaved fairseq_train_speed runs."""
    import statistics

    return {n: {k: statistics.median(x[k] for x in runs) for k in runs[0]} for n, runs in results.items()}


def round_ratios(results, numerator, denominator, key):
    """The per-round ratios of one measure between two systems (each round's pair ran back to back)."""
    return [a[key] / b[key] for a, b in zip(results[numerator], results[denominator])]


def speed_table(results):
    """The Markdown table of median updates/s, tokens/s and peak RSS per system."""
    return [
        "| system | updates/s | tokens/s | peak RSS (MB) |",
        "|---|---|---|---|",
        *(f"| {n} | {m['ups']:.2f} | {m['wps']:.0f} | {m['peak_rss_mb']:.0f} |" for n, m in medians(results).items()),
    ]


def publish(lines, output):
    """Prints the Markdown result, and writes it to OUTPUT when one is given."""
    print("\n".join(lines))
    if output:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text("\n".join(lines) + "\n")
