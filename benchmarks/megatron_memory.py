"""Peak memory of bio_megatron training steps with and without activation checkpointing (--checkpoint-activations).

Each configuration is its own fairseq-train process on real clinical cases (SentencePiece data-bin, sequences of
exactly 512 tokens), a few updates of Adam. On a CPU the measure is the process's peak resident set size (os.wait4):
weights, gradients, Adam's two moments, the activations of one step and the process's fixed cost (Python,
torch, fairseq, data). On a GPU (--gpu, fp16 or --bf16) it is torch's peak memory allocated on the device over
the whole run. Running a configuration at two batch sizes separates the activations per sequence from the rest;
on a GPU, --fit then trains the largest preset measured at the number of sequences that this line predicts to
fill 90% of the device (a margin for the allocator's fragmentation), to confirm that it fits.

    .venv/bin/python benchmarks/megatron_memory.py --output benchmarks/results/megatron_memory.md   # CPU, ~10 min
    python benchmarks/megatron_memory.py --gpu --archs bio_megatron_345m,bio_megatron_800m,bio_megatron_1_2b \\
        --batches 4,8 --updates 3 --train-docs 4000 --vocab-size 30000 --fit \\
        --output benchmarks/results/megatron_memory_gpu.md                                    # one 80 GB GPU
"""

import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
from measure import cases_data_bin, fairseq_train_speed, precision_flags, publish  # noqa: E402
from measure import parser as measure_parser  # noqa: E402

from biofairseq.dev.samples import expected_parameters  # noqa: E402

# fairseq's masked_lm with --sample-break-mode none: every sequence holds exactly 512 tokens. document_mlm's
# blocks end with their document (a third of them are full at 512), and batches group similar lengths, so the
# peak would depend on which batches come first.
FLAGS = ["--user-dir", str(REPO / "biofairseq"), "--task", "masked_lm", "--criterion", "masked_lm",
         "--tokens-per-sample", "512", "--sample-break-mode", "none",
         "--optimizer", "adam", "--lr", "1e-4", "--lr-scheduler", "polynomial_decay", "--warmup-updates", "1",
         "--num-workers", "0", "--seed", "1", "--log-format", "json", "--log-interval", "1",
         "--disable-validation", "--no-save", "--required-batch-size-multiple", "1"]


# Bytes per parameter of training state: fairseq's --fp16/--bf16 keeps 16-bit weights and gradients, an fp32
# master copy and its gradient, and Adam's two fp32 moments; fp32 keeps weights, gradients and the two moments.
STATE_BYTES = {"fp16": 2 + 2 + 4 + 4 + 8, "bf16": 2 + 2 + 4 + 4 + 8, "fp32": 4 + 4 + 8}


def shapes(archs, data_bin):
    """preset -> (layers, width, FFN, parameters), as fairseq-train configures the preset on this data-bin."""
    from biofairseq.checkpoints import load_dictionary, training_config

    vocabulary = len(load_dictionary(data_bin / "dict.txt"))
    out = {}
    for arch in archs:
        m = training_config(["--arch", arch], data_bin).model
        layers, width, ffn = m.encoder_layers, m.encoder_embed_dim, m.encoder_ffn_embed_dim
        out[arch] = layers, width, ffn, expected_parameters(vocabulary, layers, width, ffn, pre_ln=True)
    return vocabulary, out


def peak_mib(result, gpu):
    return result["cuda_allocated_mb"] if gpu else result["peak_rss_mb"]


def main():
    parser = measure_parser(__doc__, updates=2, data_bin=None, gpu=None)
    parser.add_argument("--archs", default="bio_megatron_345m", help="presets, comma-separated")
    parser.add_argument("--batches", default="1,2", help="two batch sizes (sequences of 512 tokens)")
    parser.add_argument("--train-docs", type=int, default=200, help="clinical cases to learn the vocabulary on")
    parser.add_argument("--vocab-size", type=int, default=6000)
    parser.add_argument("--fit", action="store_true", help="on a GPU, train the last preset at the predicted capacity")
    args = parser.parse_args()
    archs = args.archs.split(",")
    small, large = map(int, args.batches.split(","))
    with cases_data_bin(args, "sentencepiece", args.train_docs, args.vocab_size) as data_bin:
        with tempfile.TemporaryDirectory(prefix="megatron_memory.") as work:
            report_lines = peaks(args, archs, small, large, data_bin, Path(work))
    publish(report_lines, args.output)


def peaks(args, archs, small, large, data_bin, work):
    """Each preset's peak memory at both batches, with activation checkpointing and without; the Markdown report."""
    common = [*FLAGS, *precision_flags(args)]
    results = {}
    for arch in archs:
        for checkpointing in (False, True):
            for batch in (small, large):
                flags = [*common, "--arch", arch, "--batch-size", batch,
                         *(["--checkpoint-activations"] if checkpointing else [])]
                r = fairseq_train_speed(data_bin, flags, args.updates, work / "save")
                results[arch, checkpointing, batch] = r
                print(f"{arch}, checkpointing {checkpointing}, batch {batch}: {r}", flush=True)
    vocabulary, models = shapes(archs, data_bin)
    per_sequence = {key: (peak_mib(results[(*key, large)], args.gpu) - peak_mib(results[(*key, small)], args.gpu))
                    / (large - small) for key in {(a, c) for a, c, _ in results}}
    fit = None
    if args.fit and args.gpu:
        arch = archs[-1]
        r = results[arch, False, small]
        batch = int(small + (0.9 * r["cuda_total_mb"] - r["cuda_allocated_mb"]) // per_sequence[arch, False])
        flags = [*common, "--arch", arch, "--batch-size", batch]
        fit = (arch, batch, fairseq_train_speed(data_bin, flags, args.updates, work / "save", allow_oom=True))
        print(f"fit {arch}, batch {batch}: {fit[2]}", flush=True)
    return report(args, vocabulary, models, results, per_sequence, fit, small, large)


def report(args, vocabulary, models, results, per_sequence, fit, small, large):
    device = next(iter(results.values())).get("device", "CPU") if args.gpu else "CPU"
    precision = ("bf16" if args.bf16 else "fp16") if args.gpu else "fp32"
    measure = "torch's peak memory allocated on the GPU (MiB)" if args.gpu else "peak RSS (MiB)"
    lines = [
        f"# bio_megatron: peak memory of a training step, activation checkpointing off and on ({device}, {precision})",
        "",
        f"`python benchmarks/megatron_memory.py {' '.join(sys.argv[1:])}`: fairseq-train (masked_lm) with Adam on "
        f"sequences of exactly 512 tokens of real clinical cases, a "
        f"{vocabulary:,}-entry SentencePiece vocabulary learned on {args.train_docs:,} cases, {args.updates} "
        f"updates per run; {measure} of each run.",
        "",
        "| preset | shape | parameters | activation checkpointing | sequences | peak (MiB) | s/update |",
        "|---|---|---|---|---|---|---|",
    ]
    for (arch, checkpointing, batch), r in results.items():
        layers, width, ffn, params = models[arch]
        seconds = f"{1 / r['ups']:.2f}" if r["ups"] else "-"
        lines.append(f"| {arch} | {layers} x {width}, FFN {ffn} | {params / 1e6:,.0f}M | "
                     f"{'on' if checkpointing else 'off'} | {batch} | {peak_mib(r, args.gpu):,.0f} | {seconds} |")
    lines += ["", f"Growth of the peak per added sequence (from {small} to {large} sequences):", ""]
    for arch, (*_, params) in models.items():
        off, on = per_sequence[arch, False], per_sequence[arch, True]
        state = params * STATE_BYTES[precision] / 2 ** 20
        flat = on < 0.05 * off
        lines.append(f"- {arch}: **{off:,.0f} MiB** without checkpointing, **{max(on, 0):,.0f} MiB** with it"
                     + (" (with checkpointing the peak is the same at both sizes: the kept activations stay below the "
                        "peak reached outside the forward and backward passes)" if flat else f" ({off / on:.1f}x less)")
                     + f"; training state {state:,.0f} MiB ({STATE_BYTES[precision]} bytes per parameter).")
    if fit:
        arch, batch, r = fit
        verdict = ("fits: no out-of-memory batch" if r["ooms"] == 0 else f"does not fit: {r['ooms']} out-of-memory warnings")
        lines += ["", f"Capacity, measured: {arch} without checkpointing, at the {batch} sequences that the line "
                      f"above predicts to fill 90% of this {r['cuda_total_mb'] / 1024:,.1f} GiB device, {verdict} "
                      f"(peak {r['cuda_allocated_mb']:,.0f} MiB allocated, {r['cuda_reserved_mb']:,.0f} MiB reserved)."]
    return lines


if __name__ == "__main__":
    main()
