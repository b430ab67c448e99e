"""ELECTRA's training step against masked LM's, with the same discriminator shape, data and batch.

An ELECTRA step runs the generator (1/3 of the width at base), samples, and runs the discriminator; a masked-LM
step runs one encoder of the discriminator's shape. Both train with fairseq-train on the same real clinical
cases (document_mlm's blocks, the same --batch-size), interleaved (MLM, ELECTRA, MLM, ...) so that machine noise
hits both alike. Speed is fairseq's own updates/s over the logged intervals after the first; peak memory is the
maximum resident set size of each process (on a GPU, torch's peak memory allocated). The expected ratio comes from counting matmul FLOPs (below).

    .venv/bin/python benchmarks/electra_vs_mlm_step.py --rounds 3 --updates 60 \
        --output benchmarks/results/electra_vs_mlm_step.md                      # CPU: 4 x 384, 128 tokens
    python benchmarks/electra_vs_mlm_step.py --layers 12 --width 768 --tokens 512 --batch 32 --gpu \
        --output benchmarks/results/electra_vs_mlm_step_gpu.md                  # base, GPU (fp16: fairseq's --bf16 means TPU)
    python benchmarks/electra_vs_mlm_step.py --layers 12 --width 768 --tokens 512 --batch 32 --gpu --bf16 \
        --fast-path --compile inductor --rounds 1 --updates 120                 # base, GPU, the fast path on both sides

With --fast-path both train under biofairseq-train with SDPA attention, fused AdamW and packed documents (the same
rows for both: they read the same blocks); with --compile as well, each once more with its encoder layers compiled,
and a failing compiled run is reported rather than ending the benchmark.
"""

import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
from biofairseq.models.compiled_layers import COMPILE_CHOICES  # noqa: E402
from measure import cases_data_bin, compare, device_label, failure_lines, per_run, precision_flags, publish, ratio_line  # noqa: E402
from measure import parser as measure_parser  # noqa: E402
from measure import speed_table, step_and_memory_ratios, vocabulary  # noqa: E402

FRACTION = 1 / 3  # the generator's width at base (BioELECTRA's 768/256)
MLM, ELECTRA = "masked LM (document_mlm, bio_roberta_base shape)", "ELECTRA (electra, generator 1/3)"


def flags(args):
    shape = ["--encoder-layers", args.layers, "--encoder-embed-dim", args.width, "--encoder-ffn-embed-dim",
             4 * args.width, "--encoder-attention-heads", args.width // 64]
    common = [
        "--user-dir", REPO / "biofairseq", "--tokens-per-sample", args.tokens, "--batch-size", args.batch,
        "--adam-betas", "(0.9,0.999)", "--adam-eps", "1e-6", "--weight-decay", "0.01",
        "--lr", "2e-4", "--lr-scheduler", "polynomial_decay", "--warmup-updates", "10", "--num-workers", "2",
        "--seed", "1", "--log-format", "json", "--log-interval", args.log_interval, "--disable-validation", "--no-save",
        *precision_flags(args),
        *(["--attention", "sdpa", "--optimizer", "fused_adamw", "--pack-documents"] if args.fast_path
          else ["--optimizer", "adam"]),
    ]
    trainer = ["biofairseq-train"] if args.fast_path else []
    pair = {
        MLM: [
            *trainer, *common, "--task", "document_mlm", "--criterion", "masked_lm_accuracy", "--arch",
            "bio_roberta_base", *shape],
        ELECTRA: [
            *trainer, *common, "--task", "electra", "--criterion", "electra", "--arch", "electra_base", *shape,
            "--embedding-dim", args.width, "--generator-width-fraction", FRACTION],
    }
    if args.compile == "none":
        return pair
    return {**pair, **{compiled(name): [*f, "--compile", args.compile] for name, f in pair.items()}}


def compiled(name):
    return name.replace(" (", " compiled (", 1)


def pairs(results):
    """(masked LM, ELECTRA) names that both ran: the plain pair, then the compiled one."""
    return [(m, e) for m, e in [(MLM, ELECTRA), (compiled(MLM), compiled(ELECTRA))] if m in results and e in results]


def flop_ratio(layers, width, tokens, vocab, mask_prob=0.15):
    """ELECTRA / masked LM matmul FLOPs per token (forward; backward is twice that for both): each layer's
    projections and FFN (12 d^2) plus attention scores and values (2 T d); the masked LM's and the generator's
    output layers over the 15% selected tokens; the discriminator's head (d^2 + d). Embedding lookups count 0."""
    layer = lambda d: layers * (12 * d * d + 2 * tokens * d)
    g = int(round(width * FRACTION))
    mlm = layer(width) + mask_prob * (width * width + width * vocab)
    electra = layer(width) + layer(g) + width * g + mask_prob * (g * width + width * vocab) + width * width + width
    return electra / mlm


def main():
    parser = measure_parser(__doc__, rounds=3, updates=60, log_interval=10, data_bin=None, gpu=None)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--width", type=int, default=384, help="discriminator width (a multiple of 64)")
    parser.add_argument("--tokens", type=int, default=128, help="--tokens-per-sample")
    parser.add_argument("--batch", type=int, default=16, help="sequences per update")
    parser.add_argument("--fast-path", action="store_true", help="both under biofairseq-train: SDPA attention, fused "
                        "AdamW, packed documents (bf16 autocast with --gpu --bf16)")
    parser.add_argument("--compile", choices=COMPILE_CHOICES, default="none",
                        help="with --fast-path: each once more with its layers compiled by this torch.compile backend")
    args = parser.parse_args()
    if args.compile != "none" and not args.fast_path:
        parser.error("--compile needs --fast-path (biofairseq-train compiles the layers)")
    args.keep_going = args.compile != "none"  # a compiled system that fails leaves the uncompiled pair measured
    with cases_data_bin(args) as data_bin:
        vocab = vocabulary(data_bin)
        results, failures = compare(args, flags(args), data_bin)
    if not pairs(results):
        sys.exit(f"no pair of masked LM and ELECTRA ran: {', '.join(failures or ())} failed")
    publish(report(args, results, vocab, failures), args.output)


def report(args, results, vocab, failures=None):
    device = device_label(args)
    gpu = next(iter(results.values()))[0].get("device")
    device = f"{gpu} ({device})" if gpu else device
    command = " ".join(sys.argv[1:])
    path = ("both under biofairseq-train with SDPA attention, fused AdamW and packed documents"
            + (f", and each compiled ({args.compile})" if args.compile != "none" else "") + "; " if args.fast_path else "")
    ratios = []
    for mlm, electra in pairs(results):
        step, memory = step_and_memory_ratios(results, mlm, electra)
        label = "compiled: " if "compiled" in mlm else ""
        ratios += [ratio_line(f"{label}ELECTRA step time / masked LM step time", step, "; goal <= 1.35 at base"),
                   f"- {label}peak memory ratio: {statistics.median(memory):.3f}"]
    lines = [
        "# ELECTRA step time vs masked LM step time",
        "",
        f"Command: `python benchmarks/electra_vs_mlm_step.py {command}`",
        "",
        f"{args.rounds} interleaved rounds of {args.updates} updates each; discriminator and masked LM both "
        f"{args.layers} x {args.width} (FFN {4 * args.width}, {args.width // 64} heads), generator "
        f"{int(round(args.width * FRACTION))} wide; {args.tokens} tokens per sample, {args.batch} sequences per update, "
        f"400 real clinical cases (document blocks), vocabulary {vocab:,}; {path}{device}. Medians over rounds.",
        "",
        *speed_table(results),
        "",
        *ratios,
        f"- expected from matmul FLOPs at these shapes: {flop_ratio(args.layers, args.width, args.tokens, vocab):.3f} "
        f"(at base, 12 x 768, 512 tokens, 30k vocabulary: {flop_ratio(12, 768, 512, 30522):.3f})",
        "",
        *failure_lines(failures),
        per_run(results),
    ]
    return lines


if __name__ == "__main__":
    main()
