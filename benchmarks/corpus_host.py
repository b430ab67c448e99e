"""What the submitting host does while clean_corpus.py cleans a corpus: its own CPU time and peak memory at growing
sizes, with local worker processes and with submitit's local executor (the job-array path that Slurm takes), and the
outputs compared byte for byte with those of another tree (the version before the stages ran as jobs).

The corpora are corpus_scale.py's perturbed copies of the clinical cases. The host is the process that runs
clean_corpus.py: its own CPU seconds and peak resident memory (getrusage of itself, not of its worker processes or
array tasks), and the wall seconds of each stage (timing.json). The language id is off in every run (--langid off):
it is the cleaning tasks' cost, not the host's, and halves the time the benchmark takes.

    BIOFAIRSEQ_SHARED=... python benchmarks/corpus_host.py --gb 1,2 --before OLD_TREE --work /tmp/host \
        --output benchmarks/results/corpus_host.md
"""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

from corpus_scale import perturbed_corpus
from measure import parser, publish

REPO = Path(__file__).resolve().parents[1]

# clean_corpus.py run in this process, then what the process itself used (its children are the workers and tasks)
HOST = """
import json, resource, runpy, sys, time
start = time.perf_counter()
sys.argv = sys.argv[1:]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit as stop:
    if stop.code:
        raise
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"wall_s": time.perf_counter() - start, "cpu_s": usage.ru_utime + usage.ru_stime,
                  "peak_mib": usage.ru_maxrss / 1024}))
"""


def digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 24), b""):
            h.update(chunk)
    return h.hexdigest()


def clean(tree, corpus, out, launcher, workers):
    cmd = [sys.executable, "-c", HOST, str(tree / "preprocess" / "clean_corpus.py"), "--source", f"synthetic={corpus}",
           "--output-dir", str(out), "--lang", "es", "--langid", "off", "--workers", str(workers), "--quiet",
           "--overwrite"]
    if launcher != "local":
        cmd += ["--launcher", launcher]
    proc = subprocess.run(cmd, env={"PYTHONPATH": str(tree), "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"},
                          capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"{tree} {launcher} failed:\n{proc.stderr[-3000:]}")
    host = json.loads(proc.stdout.strip().splitlines()[-1])
    host["stages_s"] = json.loads((out / "timing.json").read_text())
    host["outputs"] = {name: digest(out / name) for name in ("train.txt", "valid.txt")}
    return host


def main():
    p = parser(__doc__)
    p.add_argument("--gb", default="1,2", help="corpus sizes in GB of JSON lines")
    p.add_argument("--launchers", default="local,submitit-local")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--before", type=Path, help="an earlier tree, cleaned with the local launcher for comparison")
    p.add_argument("--work", type=Path, required=True, help="a folder for the corpora and outputs (kept for reruns)")
    args = p.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    results_path = args.work / "results.json"
    results = json.loads(results_path.read_text()) if results_path.is_file() else {}
    runs = [("this", REPO, launcher) for launcher in args.launchers.split(",")]
    if args.before:
        runs.insert(0, ("before", args.before.resolve(), "local"))
    for gb in [float(g) for g in args.gb.split(",")]:
        corpus = args.work / f"corpus_{gb:g}gb.jsonl"
        if not corpus.is_file():
            written, copies = perturbed_corpus(f"{corpus}.tmp", gb)
            Path(f"{corpus}.tmp").rename(corpus)
        for name, tree, launcher in runs:
            key = f"{gb:g}/{name}/{launcher}"
            if key not in results:  # each run once: a rerun of the benchmark picks up where it stopped
                results[key] = clean(tree, corpus, args.work / "out", launcher, args.workers)
                results_path.write_text(json.dumps(results, indent=1))
            print(key, json.dumps(results[key]), flush=True)
    lines = ["# The submitting host while the corpus is cleaned", "",
             f"Command: `python benchmarks/corpus_host.py {' '.join(sys.argv[1:])}`", "",
             f"corpus_scale.py's perturbed clinical cases, `clean_corpus.py --langid off --workers {args.workers}`. "
             "*host*: the clean_corpus.py process itself (its CPU seconds and peak resident memory; not its workers' "
             "or array tasks'). *before*: the version whose merge and split read the whole corpus in the host "
             "process. Stage seconds are wall time (timing.json).", "",
             "| GB | version | launcher | host CPU s | host peak MiB | wall s | clean s | deduplicate s | split s | "
             "outputs |", "|---|---|---|---|---|---|---|---|---|---|"]
    for key, r in results.items():
        gb, name, launcher = key.split("/")
        reference = results.get(f"{gb}/{runs[0][0]}/{runs[0][2]}")
        same = "reference" if r is reference else ("identical" if reference and r["outputs"] == reference["outputs"]
                                                   else "DIFFERENT")
        s = r["stages_s"]
        lines.append(f"| {gb} | {name} | {launcher} | {r['cpu_s']:.1f} | {r['peak_mib']:.0f} | {r['wall_s']:.0f} | "
                     f"{s['clean_shards']:.0f} | {s['deduplicate']:.0f} | {s['split']:.0f} | {same} |")
    lines += ["", "Per run: " + json.dumps(results)]
    publish(lines, args.output)


if __name__ == "__main__":
    main()
