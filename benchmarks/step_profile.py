"""Where a training step's time goes, operator by operator: masked LM and ELECTRA with the same discriminator shape
and batch (benchmarks/electra_vs_mlm_step.py's flags), each under torch.profiler for a few updates of its fairseq
trainer built in this process, after warm-up updates.

ELECTRA's step costs 1.6x masked LM's on a GPU where matmul FLOPs predict 1.14x; the two tables side by side say
which operators take the difference (device time on a GPU, CPU time on a CPU).

    .venv/bin/python benchmarks/step_profile.py                       # CPU: 4 x 384, 128 tokens
    python benchmarks/step_profile.py --layers 12 --width 768 --tokens 512 --batch 32 --gpu --bf16 --fast-path \\
        --output benchmarks/results/step_profile_gpu.md               # base, GPU, the fast path on both sides
"""

import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
from electra_vs_mlm_step import ELECTRA, MLM, flags  # noqa: E402
from measure import cases_data_bin, publish, trainer_command  # noqa: E402
from measure import parser as measure_parser  # noqa: E402

from biofairseq.dev.samples import trainer_in_process  # noqa: E402


TRAINER_RANGES = ("forward", "backward", "reduce-grads", "multiply-grads", "clip-grads", "optimizer")  # fairseq's


def profile(system_flags, data_bin, batch, warmup, steps, gpu):
    """(seconds per update, {op: (self seconds per update, calls per update)}, total self seconds per update) of
    ``steps`` updates on fixed batches after ``warmup`` updates."""
    import torch
    from fairseq.trainer import Trainer
    from torch.profiler import ProfilerActivity

    from biofairseq.train import MeteredTrainer

    command, system_flags = trainer_command(system_flags)
    trainer = trainer_in_process(data_bin, *system_flags, "--max-update", "1000", "--total-num-update", "1000",
                                 trainer=MeteredTrainer if command == "biofairseq-train" else Trainer, split="train")
    dataset = trainer.task.dataset("train")
    samples = [dataset.collater([dataset[(i * batch + j) % len(dataset)] for j in range(batch)])
               for i in range(warmup + steps)]
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    for sample in samples[:warmup]:
        trainer.train_step([sample])
    sync()
    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if gpu else [])]
    with torch.profiler.profile(activities=activities) as prof:
        start = time.perf_counter()
        for sample in samples[warmup:]:
            trainer.train_step([sample])
        sync()
        seconds = (time.perf_counter() - start) / steps
    averages = prof.key_averages()
    if gpu:  # the kernels themselves: an operator's device time is its kernels' again
        ops = {e.key: (e.self_device_time_total / 1e6 / steps, e.count / steps) for e in averages
               if e.device_type == torch.autograd.DeviceType.CUDA}
    else:
        ops = {e.key: (e.self_cpu_time_total / 1e6 / steps, e.count / steps) for e in averages}
    ops = {k: v for k, v in ops.items() if v[0] > 0}
    ranges = {e.key: e.cpu_time_total / 1e6 / steps for e in averages  # on a GPU a range is also a device event
              if e.key in TRAINER_RANGES and e.device_type == torch.autograd.DeviceType.CPU}
    del trainer
    if gpu:
        torch.cuda.empty_cache()
    return seconds, ops, sum(s for s, _ in ops.values()), ranges


def table(results, top):
    """The ops with the most self time in either system, ELECTRA's extra time first."""
    (m_step, m_ops, m_total, m_ranges), (e_step, e_ops, e_total, e_ranges) = results[MLM], results[ELECTRA]
    names = sorted(set(m_ops) | set(e_ops), key=lambda k: -(e_ops.get(k, (0, 0))[0] - m_ops.get(k, (0, 0))[0]))
    ms = lambda x: f"{1000 * x:.2f}"
    lines = [
        f"- step: masked LM {ms(m_step)} ms, ELECTRA {ms(e_step)} ms (**{e_step / m_step:.3f}x**); profiled self time "
        f"per update: {ms(m_total)} against {ms(e_total)} ms (the extra: {ms(e_total - m_total)} ms)",
        "- host time in fairseq's ranges per update (masked LM / ELECTRA, ms): " + ", ".join(
            f"{r} {ms(m_ranges.get(r, 0))} / {ms(e_ranges.get(r, 0))}" for r in TRAINER_RANGES),
        "",
        "| operator or kernel | masked LM ms | calls | ELECTRA ms | calls | ELECTRA's extra ms | share of the extra |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name in names[:top]:
        (ma, mc), (ea, ec) = m_ops.get(name, (0, 0)), e_ops.get(name, (0, 0))
        lines.append(f"| `{name}` | {ms(ma)} | {round(mc, 1):g} | {ms(ea)} | {round(ec, 1):g} | {ms(ea - ma)} | "
                     f"{100 * (ea - ma) / (e_total - m_total):.1f}% |")
    return lines


def main():
    parser = measure_parser(__doc__, data_bin=None, gpu=None)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--width", type=int, default=384)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--fast-path", action="store_true", help="both under biofairseq-train: SDPA attention, fused "
                        "AdamW, packed documents")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--top", type=int, default=25, help="operators in the table")
    args = parser.parse_args()
    args.compile, args.log_interval = "none", 10
    systems = flags(args)
    with cases_data_bin(args) as data_bin:
        results = {name: profile(f, data_bin, args.batch, args.warmup, args.steps, args.gpu)
                   for name, f in systems.items()}
    import torch

    device = torch.cuda.get_device_name() if args.gpu else f"{os.cpu_count()} CPU cores"
    lines = [
        "# Where a training step's time goes: masked LM against ELECTRA",
        "",
        f"Command: `python benchmarks/step_profile.py {' '.join(sys.argv[1:])}`",
        "",
        f"{args.layers} x {args.width}, {args.tokens} tokens, {args.batch} sequences per update, "
        f"{'the fast path, ' if args.fast_path else ''}{'bf16' if args.bf16 else 'fp16' if args.gpu else 'fp32'}; "
        f"{device}, torch {torch.__version__}; {args.steps} profiled updates after {args.warmup}. Self time per "
        f"update ({'device: kernels' if args.gpu else 'CPU: operators'}), sorted by ELECTRA's extra time.",
        "",
        *table(results, args.top),
    ]
    publish(lines, args.output)


if __name__ == "__main__":
    main()
