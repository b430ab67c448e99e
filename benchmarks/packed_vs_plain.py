"""Does --pack-documents train to a worse validation perplexity than plain rows? Seeds of each, one evaluation.

    python benchmarks/packed_vs_plain.py --seeds 1-10 --updates 200 --output benchmarks/results/packed_vs_plain.md
    python benchmarks/packed_vs_plain.py --seeds 1-3 --updates 5000 --batch 64 --warmup 250 --validate-every 500 \\
        --only plain,packed --output benchmarks/results/packed_vs_plain_pilot.md

The bundled clinical cases (or the full release under BIOFAIRSEQ_SHARED), prepared by bsc_bio_es.sh's own corpus
stages (a byte-level BPE of --vocab-size), train bio_roberta_tiny at 128 tokens, polynomial decay, once per system and
seed, two runs at a time (one thread each). Each run's model is seeded alike in every system; its data order is the
system's own.

fairseq's validation perplexity masks the validation blocks once, seeded by --seed; another masking of the same blocks
moves it by a few %. So every kept checkpoint (the last, and the best by fairseq's validation) is also scored on the
same blocks under --masks maskings (seeds 1 to N), the same for every run: the perplexity of the mean loss, which
compares runs on the same predicted tokens. Differences are packed (or another system) minus plain, paired by seed.
"""

import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
from measure import BIN, corpora, parser, publish  # noqa: E402

COMMON = ["--user-dir", str(REPO / "biofairseq"), "--task", "document_mlm", "--criterion", "masked_lm_accuracy",
          "--arch", "bio_roberta_tiny", "--tokens-per-sample", "128", "--adam-betas", "(0.9,0.98)", "--adam-eps", "1e-6",
          "--weight-decay", "0.01", "--lr-scheduler", "polynomial_decay", "--cpu", "--num-workers", "0",
          "--log-format", "json", "--no-epoch-checkpoints", "--best-checkpoint-metric", "ppl"]
SYSTEMS = {  # the first is the baseline
    "plain": ["--optimizer", "adam"],
    "packed": ["--optimizer", "adam", "--pack-documents", "--attention", "sdpa"],
    "fused": ["--optimizer", "fused_adamw"],
    "fast": ["--optimizer", "fused_adamw", "--pack-documents", "--attention", "sdpa"],  # FAST_PATH=1's three
}


def seeds(text):
    """'1-10' or '1,2,3'."""
    if "-" in text:
        first, last = map(int, text.split("-"))
        return list(range(first, last + 1))
    return [int(s) for s in text.split(",")]


def recipe_data_bin(work, vocab_size):
    """bsc_bio_es.sh's corpus stages (cleaning, vocabulary, binarizing) on the cases: its data-bin."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PYTHON": sys.executable, "PRESET": "tiny",
           "RUN_DIR": str(work), "SOURCES": f"cases={corpora()[0]}", "VOCAB_SIZE": str(vocab_size), "STOP_AFTER": "binarize"}
    proc = subprocess.run(["bash", str(REPO / "recipes" / "bsc_bio_es.sh")], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"bsc_bio_es.sh's corpus stages failed:\n{proc.stderr[-3000:]}")
    return Path(work) / "data-bin"


def train(data_bin, name, seed, args, save_dir):
    """One fairseq-train run: its logged validations (update, ppl) and tokens per update (the mean of its logs), kept
    in save_dir/run.json; a finished run is read back, a killed one resumes from its last checkpoint (fairseq's own
    resume), logging the validations from there on."""
    done = Path(save_dir) / "run.json"
    if done.is_file():
        return json.loads(done.read_text())
    resumed = resumed_at(save_dir)
    cmd = [str(BIN / "fairseq-train"), str(data_bin), *COMMON, *SYSTEMS[name], "--seed", str(seed),
           "--batch-size", str(args.batch), "--lr", str(args.lr), "--warmup-updates", str(args.warmup),
           "--max-update", str(args.updates), "--total-num-update", str(args.updates),
           "--validate-interval-updates", str(args.validate_every), "--save-interval-updates", str(args.validate_every),
           "--validate-interval", "1000000", "--save-interval", "1000000",  # at those updates only, not at epoch ends
           "--keep-interval-updates", "1", "--log-interval", str(min(50, args.updates)), "--save-dir", str(save_dir)]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    if proc.returncode != 0:
        sys.exit(f"{name} seed {seed} failed:\n{proc.stdout[-3000:]}")
    logged = [json.loads(l[l.index("{"):]) for l in proc.stdout.splitlines() if "| valid |" in l or "| train_inner |" in l]
    valid = [(int(r["valid_num_updates"]), float(r["valid_ppl"])) for r in logged if "valid_ppl" in r]
    tokens = statistics.mean(float(r["wpb"]) for r in logged if "wpb" in r)
    print(f"{name} seed {seed}: validations {valid}, {tokens:.0f} tokens an update", flush=True)
    run = {"valid": valid, "tokens_per_update": tokens, **({"resumed_after": resumed} if resumed else {})}
    done.write_text(json.dumps(run))
    return run


def resumed_at(save_dir):
    """The update a killed run will resume from: its latest interval checkpoint's (checkpoint_E_U.pt), or None."""
    updates = [int(p.stem.rsplit("_", 1)[1]) for p in Path(save_dir).glob("checkpoint_*_*.pt")]
    return max(updates) if updates else None


def scorer(data_bin, masks):
    """score(checkpoint): the perplexity of the mean masked-token loss over the validation blocks (unpacked), under
    maskings seeded 1 to masks, in eval mode; the same batches for every checkpoint."""
    import torch
    from fairseq import checkpoint_utils

    from biofairseq.dev.samples import build_in_process

    maskings = []
    for seed in range(1, masks + 1):
        task, model, criterion = build_in_process(data_bin, *COMMON[2:], "--optimizer", "adam", "--lr", "1e-3",
                                                  "--attention", "sdpa", "--total-num-update", "1", "--seed", str(seed))
        dataset = task.dataset("valid")
        batches = [dataset.collater([dataset[i] for i in range(s, min(s + 32, len(dataset)))]) for s in range(0, len(dataset), 32)]
        maskings.append((model, criterion, batches))

    def score(checkpoint):
        weights = checkpoint_utils.load_checkpoint_to_cpu(str(checkpoint))["model"]
        losses = []
        for model, criterion, batches in maskings:
            model.load_state_dict(weights)
            model.eval()
            with torch.no_grad():
                results = [criterion(model, batch) for batch in batches]
            losses.append(sum(float(loss) for loss, _, _ in results) / sum(size for _, size, _ in results))
        return math.exp(statistics.mean(losses))

    return score


def spread(values):
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f}" if len(values) > 1 else f"{values[0]:.2f}"


def differences(results, name, key):
    """Per seed, name's figure over plain's, minus 1, in %."""
    base = results["plain"]
    return [100 * (results[name][s][key] / base[s][key] - 1) for s in sorted(base)]


def report(args, results, data_bin):
    names, seed_list = list(results), sorted(results["plain"])
    lines = [
        "# Packed rows against plain rows: validation perplexity at equal updates (CPU)",
        "",
        f"Command: `python benchmarks/packed_vs_plain.py {' '.join(sys.argv[1:])}`",
        "",
        f"bio_roberta_tiny, 128 tokens, {args.batch} rows an update, peak LR {args.lr}, {args.warmup} warm-up updates, "
        f"polynomial decay to 0 at {args.updates} updates, fp32, {os.cpu_count()} CPU cores; data: bsc_bio_es.sh's corpus "
        f"stages on {corpora()[0].name}, byte-level BPE {args.vocab_size}. Systems: "
        + "; ".join(f"{n} `{' '.join(SYSTEMS[n])}`" for n in names) + ".",
        "",
        f"*scored*: the perplexity of each run's checkpoint on the validation blocks (unpacked) under {args.masks} maskings, "
        "the same for every run; *fairseq*: the validation perplexity fairseq logged (one masking, seeded by the run's "
        "seed, the same blocks masked alike in packed and plain rows). *last*: at the last update; *best*: the checkpoint "
        "of lowest fairseq validation perplexity.",
        "",
        "| system | tokens an update | scored, last | scored, best | fairseq, last | fairseq, best |",
        "|---|---|---|---|---|---|",
    ]
    for n in names:
        runs = [results[n][s] for s in seed_list]
        lines.append(f"| {n} | {statistics.mean(r['tokens_per_update'] for r in runs):.0f} | "
                     + " | ".join(spread([r[k] for r in runs]) for k in ("scored_last", "scored_best", "fairseq_last", "fairseq_best")) + " |")
    lines += ["", "Paired by seed, each system against plain (% of plain's perplexity; mean ± std over seeds; "
              "seeds worse than plain):", "",
              "| system | scored, last | scored, best | fairseq, last |", "|---|---|---|---|"]
    for n in names[1:]:
        cells = []
        for key in ("scored_last", "scored_best", "fairseq_last"):
            d = differences(results, n, key)
            cells.append(f"{spread(d)}% ({sum(x > 0 for x in d)}/{len(d)})")
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    lines += ["", "Per seed (scored, last): " + "; ".join(
        f"{s}: " + ", ".join(f"{n} {results[n][s]['scored_last']:.2f}" for n in names) for s in seed_list), "",
        "Per run: " + json.dumps(results)]
    return lines


def main():
    p = parser(__doc__, updates=200, only=None, data_bin=None)
    p.add_argument("--seeds", type=seeds, default=seeds("1-3"), help="'1-10' or '1,2,3'")
    p.add_argument("--batch", type=int, default=32, help="rows an update")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--validate-every", type=int, default=None, help="updates between validations (default: at the end)")
    p.add_argument("--vocab-size", type=int, default=3000)
    p.add_argument("--masks", type=int, default=8, help="maskings of the validation blocks each checkpoint is scored on")
    p.add_argument("--parallel", type=int, default=2, help="runs at a time, one thread each")
    p.add_argument("--work-dir", type=Path, help="where the corpus and the runs go, kept (default: a temporary folder)")
    args = p.parse_args()
    args.validate_every = args.validate_every or args.updates
    names = [n for n in SYSTEMS if n == "plain" or not args.only or any(w in n for w in args.only.split(","))]
    with tempfile.TemporaryDirectory() as tmp:
        if args.work_dir:
            args.work_dir.mkdir(parents=True, exist_ok=True)
            tmp = args.work_dir
        data_bin = args.data_bin if args.data_bin and (args.data_bin / "dict.txt").is_file() else recipe_data_bin(Path(tmp) / "corpus", args.vocab_size)
        runs = [(n, s) for s in args.seeds for n in names]
        with ThreadPoolExecutor(args.parallel) as pool:
            trained = dict(zip(runs, pool.map(lambda run: train(data_bin, *run, args, Path(tmp) / f"{run[0]}-{run[1]}"), runs)))
        score = scorer(data_bin, args.masks)
        results = {n: {} for n in names}
        for (n, s), run in trained.items():
            folder = Path(tmp) / f"{n}-{s}"
            last, best = run["valid"][-1], min(run["valid"], key=lambda v: v[1])
            scored_last = score(folder / "checkpoint_last.pt")
            results[n][s] = {"tokens_per_update": run["tokens_per_update"], "fairseq_last": last[1], "fairseq_best": best[1],
                             "scored_last": scored_last,
                             "scored_best": scored_last if best == last else score(folder / "checkpoint_best.pt"),
                             "valid": run["valid"], **{k: run[k] for k in ("resumed_after",) if k in run}}
            print(f"{n} seed {s}: {results[n][s]}", flush=True)
        publish(report(args, results, data_bin), args.output)


if __name__ == "__main__":
    main()
