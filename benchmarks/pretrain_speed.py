"""Pretraining speed: stock fairseq's RoBERTa path against ours, on the same data and batch, interleaved.

Systems, for each model and length:
- **stock**: fairseq's own ``--arch roberta_base`` (its MultiheadAttention) with its ``--optimizer adam``, ``--fp16``
  on a GPU: what fairseq's RoBERTa example runs. fairseq has no ELECTRA, so ELECTRA's stock is ours with fairseq's
  parts (``--attention fairseq --optimizer adam``, fp16), under fairseq-train.
- **ours fp16** (GPU only): ``--attention sdpa --optimizer fused_adamw``, fp16, under biofairseq-train (its trainer
  reads the metrics only when it prints them).
- **ours bf16**: the same with ``--amp-bf16`` (bf16 autocast, fp32 weights); on a CPU, ours in fp32.
- **ours, packed**: and ``--pack-documents``, several document blocks per row (so more tokens per batch), each
  attending within its document through a dense document mask (benchmarks/packed_attention.py: why not the jagged
  tensors).
- **ours, packed, compiled** (``--compile inductor``): and ``biofairseq-train --compile``, the encoder layers
  through torch.compile.
All train ``document_mlm`` (ELECTRA: ``electra``) on one data-bin of real clinical cases with the same sequences
per batch, the same seed and learning-rate schedule, and run in turn in each round so that machine noise hits
all alike.

Measured: fairseq's own tokens/s (real tokens; padding is not counted) and updates/s, averaged over the logged
intervals after the first; step time = 1 / updates/s; model FLOP utilisation (MFU) = model FLOPs per token x
tokens/s / peak FLOP/s; host-device synchronisations in one in-process training step (biofairseq.dev.host_syncs), by
the code that asks. Model FLOPs count, per token, training = 3 x forward: 6 x the weights of the encoder
layers' matmuls (q, k, v, out, FFN; biases, layer norms and embedding lookups not counted); attention 12 x layers
x width x T, T the token-weighted mean length of the document block the token is in (the useful attention: none
across documents or to padding); the output layer over the 15% masked tokens, 6 x (width^2 + vocabulary x
width); ELECTRA adds its generator's layers (and embedding projection) the same way and the discriminator's head
(width^2 + width) on every token. Recomputation and padding are not counted, so padding lowers MFU. Peak: the
GPU's dense bf16/fp16 tensor-core figure where its name is known (H100 SXM and H200: 989 TFLOP/s), and a large
matmul measured in this run (bf16 on a GPU, fp32 on a CPU). The padded share of the batches' tokens is counted
from the batches fairseq builds. The loss curves of round 1 are printed side by side.

    .venv/bin/python benchmarks/pretrain_speed.py --output benchmarks/results/pretrain_speed.md   # CPU, tiny shapes
    python benchmarks/pretrain_speed.py --gpu --size base --models roberta --tokens 512 --updates 300 \\
        --compile inductor --output benchmarks/results/pretrain_speed_gpu_roberta_512.md        # GPU, one model x length
"""

import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
from measure import cases_data_bin, chosen, compare, failure_lines, per_run, publish, ratio_line, round_ratios, trainer_command, vocabulary  # noqa: E402
from measure import parser as measure_parser  # noqa: E402

from biofairseq.models.compiled_layers import COMPILE_CHOICES  # noqa: E402

SHAPES = {  # layers, width, FFN, heads
    "tiny": (2, 128, 512, 2),
    "base": (12, 768, 3072, 12),
}
ELECTRA_ARCH = {"tiny": "electra_tiny", "base": "electra_base"}
SPEC_PEAK = {"H100 80GB HBM3": 989.4e12, "H100 SXM": 989.4e12, "H200": 989.4e12, "H100 PCIe": 756e12,
             "H100 NVL": 835e12, "A100": 312e12}  # dense bf16/fp16 tensor-core FLOP/s
MASK_PROB = 0.15


def systems(model, size, tokens, batch, gpu, data_flags, compile="none"):
    """name -> fairseq-train flags, stock first; ours start with biofairseq-train, the trainer they run under. With
    a torch.compile backend, ours packed once more with biofairseq-train --compile."""
    layers, width, ffn, heads = SHAPES[size]
    common = [
        "--user-dir", REPO / "biofairseq", "--tokens-per-sample", tokens, "--batch-size", batch,
        "--adam-betas", "(0.9,0.98)", "--adam-eps", "1e-6", "--weight-decay", "0.01", "--lr", "5e-4",
        "--lr-scheduler", "polynomial_decay", "--warmup-updates", "50", "--num-workers", "2", "--seed", "1",
        "--log-format", "json", "--disable-validation", "--no-save", *data_flags,
        *([] if gpu else ["--cpu"]),
    ]
    if model == "roberta":
        shape = ["--encoder-layers", layers, "--encoder-embed-dim", width, "--encoder-ffn-embed-dim", ffn,
                 "--encoder-attention-heads", heads]
        mlm = [*common, "--task", "document_mlm", *shape]
        stock = [*mlm, "--arch", "roberta_base", "--criterion", "masked_lm", "--optimizer", "adam"]
        ours = ["biofairseq-train", *mlm, "--arch", "bio_roberta_base", "--criterion", "masked_lm_accuracy", "--attention", "sdpa",
                "--optimizer", "fused_adamw"]
    else:
        electra = [*common, "--task", "electra", "--criterion", "electra", "--arch", ELECTRA_ARCH[size]]
        stock = [*electra, "--attention", "fairseq", "--optimizer", "adam"]
        ours = ["biofairseq-train", *electra, "--attention", "sdpa", "--optimizer", "fused_adamw"]
    if not gpu:
        runs = {"stock (fp32)": stock, "ours (fp32)": ours, "ours (fp32, packed)": [*ours, "--pack-documents"]}
    else:
        runs = {"stock (fp16)": [*stock, "--fp16"], "ours (fp16)": [*ours, "--fp16"], "ours (bf16)": [*ours, "--amp-bf16"],
                "ours (bf16, packed)": [*ours, "--amp-bf16", "--pack-documents"]}
    if compile != "none":
        name = next(reversed(runs))
        runs[name.replace(")", ", compiled)")] = [*runs[name], "--compile", compile]
    return runs


def electra_shape(size):
    from argparse import Namespace

    from biofairseq.models.electra import ElectraModelConfig, generator_shape

    layers, width, _, _ = SHAPES[size]
    fraction = {"tiny": 1 / 2, "base": 1 / 3}[size]
    embedding = width
    cfg = Namespace(**{**ElectraModelConfig().__dict__, "encoder_embed_dim": width, "generator_width_fraction": fraction})
    return layers, width, embedding, generator_shape(cfg)


def flops_per_token(model, size, block_length, vocab):
    """Model FLOPs of one trained token (forward and backward), as the module docstring counts them."""
    layers, width, ffn, _ = SHAPES[size]
    layer = lambda d, f: 6 * (4 * d * d + 2 * d * f) + 12 * d * block_length
    if model == "roberta":
        return layers * layer(width, ffn) + 6 * MASK_PROB * (width * width + vocab * width)
    layers, width, embedding, (g, g_ffn, _) = electra_shape(size)
    generator = layers * layer(g, g_ffn) + (6 * embedding * g if g != embedding else 0)
    generator_head = 6 * MASK_PROB * (g * embedding + vocab * embedding)
    discriminator = layers * layer(width, 4 * width) + 6 * (width * width + width)
    return generator + generator_head + discriminator


def measured_peak(gpu):
    """FLOP/s of a large matmul here: bf16 8192^3 on the GPU (best of 12), fp32 2048^3 on the CPU (best of 4)."""
    import torch

    device, dtype, n = ("cuda", torch.bfloat16, 8192) if gpu else ("cpu", torch.float32, 2048)
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    best = float("inf")
    for _ in range(12 if gpu else 4):
        if gpu:
            torch.cuda.synchronize()
        start = time.perf_counter()
        a @ b
        if gpu:
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return 2 * n ** 3 / best


def training_set(data_bin, tokens, batch, packed=False):
    """(document_mlm's task, its train set, the sizes of the set's rows), as fairseq-train builds them (the same
    blocks ELECTRA reads), packed or not; unpacked, a row is one document block."""
    import numpy as np
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(data_bin), "--user-dir", str(REPO / "biofairseq"), "--task", "document_mlm", "--arch", "bio_roberta_tiny",
        "--tokens-per-sample", str(tokens), "--batch-size", str(batch), "--seed", "1", "--cpu",
        *(["--pack-documents"] if packed else [])])
    cfg = convert_namespace_to_omegaconf(args)
    task = tasks.setup_task(cfg.task)
    task.load_dataset("train")
    dataset = task.dataset("train")
    sizes = np.asarray(dataset.sizes[0] if isinstance(dataset.sizes, list) else dataset.sizes, dtype=np.float64)
    return task, dataset, sizes


def batch_statistics(data_bin, tokens, batch, packed=False):
    """(token-weighted mean row length, padded share of the tokens in the epoch's batches, rows), packed or not."""
    task, dataset, sizes = training_set(data_bin, tokens, batch, packed)
    iterator = task.get_batch_iterator(dataset, max_sentences=batch, seed=1, num_workers=0).next_epoch_itr(shuffle=True)
    real = padded = 0
    pad = task.source_dictionary.pad()
    for sample in iterator:
        src = sample["net_input"]["src_tokens"]
        padded += src.numel()
        real += int(src.ne(pad).sum())
    return float((sizes ** 2).sum() / sizes.sum()), 1 - real / padded, len(dataset)


def main():
    parser = measure_parser(__doc__, rounds=2, updates=40, log_interval=10, only=None, keep_going=None, data_bin=None,
                            gpu=None)
    parser.add_argument("--models", default="roberta,electra", help="comma-separated: roberta, electra")
    parser.add_argument("--tokens", default="128,512", help="comma-separated --tokens-per-sample values")
    parser.add_argument("--size", choices=SHAPES, default="tiny", help="tiny: 2 x 128 (CPU); base: 12 x 768")
    parser.add_argument("--batch-tokens", type=int, help="sequences per batch x tokens (default: 16384 on a GPU, "
                        "2048 on a CPU)")
    parser.add_argument("--train-docs", type=int, default=400, help="clinical cases in the data-bin")
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--compile", choices=COMPILE_CHOICES, default="none",
                        help="also run ours packed with biofairseq-train --compile and this backend (inductor needs a "
                        "C++ compiler on a CPU; its compilation is in the first logged interval, which is not counted)")
    parser.add_argument("--no-syncs", action="store_true", help="do not count host-device synchronisations (a "
                        "trainer built in this process per system: time saved on a lent GPU)")
    args = parser.parse_args()
    batch_tokens = args.batch_tokens or (16384 if args.gpu else 2048)
    peak = measured_peak(args.gpu)
    with cases_data_bin(args, train_docs=args.train_docs, vocab_size=args.vocab_size) as data_bin:
        vocab = vocabulary(data_bin)
        sections = []
        for model in args.models.split(","):
            for tokens in map(int, args.tokens.split(",")):
                batch = max(1, batch_tokens // tokens)
                block_length, padded, blocks = batch_statistics(data_bin, tokens, batch)
                _, padded_packed, rows = batch_statistics(data_bin, tokens, batch, packed=True)
                padded = (padded, padded_packed, rows)
                runs = chosen(args, systems(model, args.size, tokens, batch, args.gpu,
                                            ["--log-interval", args.log_interval], args.compile))
                results, failures = compare(args, runs, data_bin, curve=True)
                if next(iter(runs)) not in results:
                    sys.exit(f"the baseline, {next(iter(runs))}, failed: nothing to compare with")
                flops = flops_per_token(model, args.size, block_length, vocab)
                syncs = {} if args.no_syncs else {name: host_syncs_per_step(runs[name], data_bin, batch)
                                                  for name in results}
                sections.append(section(model, tokens, batch, results, flops, peak, block_length, padded, blocks)
                                + failure_lines(failures) + (sync_lines(syncs) if syncs else []))
    publish(report(args, vocab, peak, sections), args.output)


def host_syncs_per_step(flags, data_bin, batch):
    """Where one update (the second; the first builds optimizer state) of the system's trainer (fairseq's, or
    biofairseq-train's where its flags start with that name) makes the host wait for the device, found by
    biofairseq.dev.host_syncs: a list of (op, code) pairs. None for compiled layers, whose graphs the counting modes do
    not see into (dynamo's guards read sizes and strides, not values, so compiling adds none)."""
    if "--compile" in flags:
        return None
    import torch
    from fairseq.trainer import Trainer

    from biofairseq.dev.host_syncs import update_syncs
    from biofairseq.train import MeteredTrainer
    from biofairseq.dev.samples import trainer_in_process

    command, flags = trainer_command(flags)
    trainer = trainer_in_process(data_bin, *flags, "--max-update", "10", "--total-num-update", "10",
                                 trainer=MeteredTrainer if command == "biofairseq-train" else Trainer, split="train")
    dataset = trainer.task.dataset("train")
    first, second = (dataset.collater([dataset[i] for i in range(start, start + batch)]) for start in (0, batch))
    found = update_syncs(trainer, first, second).found
    del trainer
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return found


def sync_lines(syncs):
    """A table: each system's synchronisations per step, by the code that asked (its innermost frame)."""
    lines = ["Host-device synchronisations in one training step (`biofairseq.dev.host_syncs`; each makes the host wait "
             "for all queued GPU work):", "", "| system | count | where (count) |", "|---|---|---|"]
    for name, found in syncs.items():
        if found is None:
            lines.append(f"| {name} | not counted | compiled layers (see host_syncs_per_step) |")
            continue
        sites = {}
        for _, where in found:
            frames = where.replace(str(REPO) + "/", "").split(" <- ")
            site = next((f for f in frames if not f.startswith("fairseq/utils.py")), frames[0])  # item(): its caller
            sites[site] = sites.get(site, 0) + 1
        lines.append(f"| {name} | {len(found)} | " + ", ".join(f"{s} ({n})" for s, n in sites.items()) + " |")
    return [*lines, ""]


def spec_peak(device):
    return next((flops for name, flops in SPEC_PEAK.items() if name in (device or "")), None)


def section(model, tokens, batch, results, flops, peak, block_length, padded, blocks):
    names = list(results)
    device = results[names[0]][0].get("device")
    spec = spec_peak(device)
    stats = {n: {"wps": statistics.median(r["wps"] for r in runs), "ups": statistics.median(r["ups"] for r in runs)}
             for n, runs in results.items()}
    arch = {"roberta": "RoBERTa", "electra": "ELECTRA"}[model]
    lines = [
        f"## {arch}, {tokens} tokens, {batch} sequences per batch",
        "",
        f"{blocks:,} document blocks (rows of one block); token-weighted mean block length {block_length:.0f}; model FLOPs per token "
        f"{flops / 1e6:.1f} M. " + (
            f"Padding: {100 * padded[0]:.1f}% of the batches' tokens one block per row, {100 * padded[1]:.1f}% packed "
            f"({padded[2]:,} rows)."),
        "",
        "| system | tokens/s | step time (ms) | MFU vs measured matmul |" + (" MFU vs spec peak |" if spec else ""),
        "|---|---|---|---|" + ("---|" if spec else ""),
    ]
    for name, s in stats.items():
        row = f"| {name} | {s['wps']:,.0f} | {1000 / s['ups']:.1f} | {100 * flops * s['wps'] / peak:.1f}% |"
        lines.append(row + (f" {100 * flops * s['wps'] / spec:.1f}% |" if spec else ""))
    lines.append("")
    for name in names[1:]:
        lines.append(ratio_line(f"{name} tokens/s / {names[0]} tokens/s", round_ratios(results, name, names[0], "wps")))
    curves = {n: dict(runs[0]["curve"]) for n, runs in results.items()}
    updates = sorted(set.intersection(*(set(c) for c in curves.values())))
    lines += ["", "Loss (fairseq's, in bits) of round 1 at each logged update:", "",
              "| update | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    lines += [f"| {u} | " + " | ".join(f"{curves[n][u]:.3f}" for n in names) + " |" for u in updates]
    last = updates[len(updates) // 2:]
    for name in names[1:]:
        gap = max(abs(curves[name][u] - curves[names[0]][u]) for u in last)
        lines.append(f"\n- {name} vs {names[0]}: largest loss gap over the second half of the run {gap:.3f} bits")
    for runs in results.values():
        for run in runs:
            run.pop("curve")
    lines += ["", per_run(results), ""]
    return lines


def report(args, vocab, peak, sections):
    device = "GPU (bf16 matmul)" if args.gpu else "CPU (fp32 matmul)"
    return [
        "# Pretraining speed: stock fairseq vs ours",
        "",
        f"Command: `python benchmarks/pretrain_speed.py {' '.join(sys.argv[1:])}`",
        "",
        f"{args.size} shapes ({' x '.join(map(str, SHAPES[args.size][:2]))}), {args.rounds} interleaved rounds of "
        f"{args.updates} updates, vocabulary {vocab:,}, measured matmul peak here {peak / 1e12:.2f} TFLOP/s on the "
        f"{device}. Medians over rounds. What is counted: see the module docstring.",
        "",
        *(line for lines in sections for line in lines),
    ]


if __name__ == "__main__":
    main()
