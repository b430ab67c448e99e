"""Packed rows' attention: the jagged tensors (variable-length, over the batch's segments) against the dense document
mask, on a real packed batch of the clinical cases; and whole training steps of ours unpacked, packed through each.

Prints, for RoBERTa at base size (tiny on a CPU) and DATA_BIN's blocks of TOKENS: train_step times (the mean of 10 steps
after 3 warm-up steps), a torch.profiler table of three jagged packed steps, and one attention's forward and
backward through each kernel (jagged with and without dropout, dense SDPA with the document mask, SDPA unmasked, and
torch's varlen_attn where it exists, which has no dropout). The data-bin is the one pretrain_speed.py builds.

    python benchmarks/packed_attention.py DATA_BIN 512      # on the GPU; 128 too
"""
import sys
import time
from pathlib import Path
import torch
import torch.nn.functional as F
sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import trainer_command
from pretrain_speed import systems
from biofairseq.dev.samples import trainer_in_process
from biofairseq.models import documents as docs
from biofairseq.models.attention import over_segments

data_bin, tokens = Path(sys.argv[1]), int(sys.argv[2])
gpu = torch.cuda.is_available()
batch = (16384 if gpu else 2048) // tokens
dev, dt = ("cuda", torch.bfloat16) if gpu else ("cpu", torch.float32)
runs = systems("roberta", "base" if gpu else "tiny", tokens, batch, gpu, ["--log-interval", "20"])
names = ["ours (bf16)", "ours (bf16, packed)"] if gpu else ["ours (fp32)", "ours (fp32, packed)"]
sync = torch.cuda.synchronize if gpu else (lambda: None)

def timed(fn, n=10):
    for _ in range(3):
        fn()
    sync()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    sync()
    return (time.perf_counter() - t) / n * 1000

def samples_of(name):
    _, flags = trainer_command(runs[name])
    trainer = trainer_in_process(data_bin, *flags, "--max-update", "1000", "--total-num-update", "1000", split="train")
    ds = trainer.task.dataset("train")
    return trainer, [ds.collater([ds[i] for i in range(s, s + batch)]) for s in range(0, batch * 6, batch)]

for name in names:
    trainer, samples = samples_of(name)
    docs.VARLEN_DEVICES = ("cuda",)  # packed: the jagged tensors first (the default before 2026-11-26)
    k = iter(range(10 ** 9))
    step = lambda: trainer.train_step([samples[next(k) % len(samples)]])
    print(f"{name}: train_step {timed(step):.1f} ms", flush=True)
    if "packed" in name:
        seg = samples[0]["net_input"]["segments"]
        print("segments", len(seg["offsets"]) - 1, "shortest", seg["shortest"], "longest", seg["longest"], flush=True)
        docs.VARLEN_DEVICES = ()  # the dense document mask
        print(f"{name} dense mask: train_step {timed(step):.1f} ms", flush=True)
        docs.VARLEN_DEVICES = ("cuda",)  # the jagged tensors, profiled
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if gpu else [])) as prof:
            for _ in range(3):
                step()
            sync()
        print(prof.key_averages().table(sort_by="cuda_time_total" if gpu else "cpu_time_total", row_limit=22, max_name_column_width=60), flush=True)
    trainer = None  # its memory back before the next build

# attention alone, on the first packed batch's segments
T, B, H, D = samples[0]["net_input"]["src_tokens"].shape[1], batch, *((12, 64) if gpu else (2, 64))
qkv = torch.randn(T, B, 3 * H * D, device=dev, dtype=dt, requires_grad=True)
seg = {k: (v.to(dev) if torch.is_tensor(v) else v) for k, v in samples[0]["net_input"]["segments"].items()}
mask = docs.document_mask(samples[0]["net_input"]["src_tokens"].to(dev), 0, 1)
def split():
    return qkv.view(T, B, 3, H, D).permute(2, 1, 3, 0, 4)
def bw(x):
    x.float().sum().backward()
cases = {
    "jagged (ours), dropout 0.1": lambda: bw(over_segments(qkv, seg, H, 0.1)),
    "jagged (ours), no dropout": lambda: bw(over_segments(qkv, seg, H, 0.0)),
    "dense SDPA + document mask, dropout 0.1": lambda: bw(F.scaled_dot_product_attention(*split(), attn_mask=mask, dropout_p=0.1)),
    "dense SDPA, no mask, dropout 0.1": lambda: bw(F.scaled_dot_product_attention(*split(), dropout_p=0.1)),
}
try:
    from torch.nn.attention.varlen import varlen_attn
    cu = seg["offsets"].to(torch.int32)
    def varlen():
        x = qkv.view(T, B, 3, H, D).permute(2, 1, 0, 3, 4).reshape(3, B * T, H, D)
        bw(varlen_attn(x[0], x[1], x[2], cu, cu, seg["longest"], seg["longest"]))
    if gpu:
        cases["varlen_attn (no dropout)"] = varlen
except ImportError as e:
    print("no varlen_attn", e)
for label, fn in cases.items():
    try:
        print(f"attention fwd+bwd, {label}: {timed(fn, 20):.2f} ms", flush=True)
    except Exception as e:
        print(f"attention {label}: FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
