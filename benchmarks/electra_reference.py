"""ELECTRA's replaced-token detection trained in a plain loop, by transformers' ElectraForMaskedLM and
ElectraForPreTraining (a reference we did not write) or by biofairseq's ``electra`` model and loss, on the same
blocks, masks, batches, optimizer and schedule. If transformers' discriminator leaves the trivial solution
("every token is original") and ours does not, the defect is ours; if neither does, it is the regime.

The batches come from biofairseq's ``electra`` task over a data-bin (document blocks, 15% of real tokens
selected, 85% of them <mask>), in the same order for both. Both sides: the generator's cross-entropy on the
selected tokens + 50 x the discriminator's binary cross-entropy over every real token; token embeddings shared
by both towers (the generator's output layer tied to them); AdamW (0.9, 0.999), eps 1e-6, weight decay 0.01
except on LayerNorm weights and biases; linear warm-up then linear decay to 0; gradients clipped at 1.0.
Every --eval-every updates both are scored on the validation blocks with the same masks and seeded sampling:
discriminator loss against the trivial loss (the binary entropy of the replace rate), AUC over all tokens,
share of replaced tokens found, generator accuracy.

    .venv/bin/python benchmarks/electra_reference.py --data runs/pilot/data-bin --model transformers \\
        --updates 1250 --json electra_transformers.json
"""

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parents[1]


def setup(args):
    """The electra task over the data-bin, its train and valid datasets, and (for biofairseq) model and loss."""
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    flags = [str(args.data), "--user-dir", str(REPO / "biofairseq"), "--task", "electra", "--criterion", "electra",
             "--arch", "electra_tiny", "--tokens-per-sample", str(args.tokens), "--sample-break-mode", "complete_doc",
             "--mask-prob", str(args.mask_prob), "--seed", str(args.seed), "--attention", "fairseq",
             "--generator-width-fraction", str(args.generator_fraction), "--sampling-temperature", str(args.temperature)]
    cfg = convert_namespace_to_omegaconf(options.parse_args_and_arch(options.get_training_parser(), flags))
    task = tasks.setup_task(cfg.task)
    for split in ("train", "valid"):
        task.load_dataset(split)
    return cfg, task


def batches(task, split, batch, seed, epoch):
    return task.get_batch_iterator(dataset=task.dataset(split), max_sentences=batch, seed=seed, epoch=epoch,
                                   ignore_invalid_inputs=True).next_epoch_itr(shuffle=split == "train")


class TransformersElectra(torch.nn.Module):
    """transformers' generator and discriminator with one embedding module, as the reference ties them."""

    def __init__(self, vocab, pad, width, layers, heads, generator_fraction, embedding_dim, temperature, max_positions=514):
        super().__init__()
        from transformers import ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining

        g = int(round(width * generator_fraction))
        shared = dict(vocab_size=vocab, embedding_size=embedding_dim, num_hidden_layers=layers, pad_token_id=pad,
                      max_position_embeddings=max_positions, hidden_act="gelu", hidden_dropout_prob=0.1,
                      attention_probs_dropout_prob=0.1, type_vocab_size=1)
        self.generator = ElectraForMaskedLM(ElectraConfig(
            hidden_size=g, num_attention_heads=max(1, g // 64), intermediate_size=4 * g, **shared))
        self.discriminator = ElectraForPreTraining(ElectraConfig(
            hidden_size=width, num_attention_heads=heads, intermediate_size=4 * width, **shared))
        self.discriminator.electra.embeddings = self.generator.electra.embeddings
        self.generator.generator_lm_head.weight = self.generator.electra.embeddings.word_embeddings.weight
        self.pad, self.temperature = pad, temperature

    def forward(self, src_tokens, targets):
        attention = src_tokens.ne(self.pad)
        selected = targets.ne(self.pad)
        hidden = self.generator.electra(input_ids=src_tokens, attention_mask=attention).last_hidden_state
        logits = self.generator.generator_lm_head(self.generator.generator_predictions(hidden[selected]))
        with torch.no_grad():
            samples = torch.multinomial(F.softmax(logits.float() / self.temperature, -1), 1).squeeze(-1)
            corrupted = src_tokens.clone()
            corrupted[selected] = samples
            replaced = corrupted.ne(torch.where(selected, targets, src_tokens))
        disc = self.discriminator(input_ids=corrupted, attention_mask=attention).logits
        return logits, targets[selected], disc[attention], replaced[attention]


class BiofairseqElectra(torch.nn.Module):
    def __init__(self, model, pad):
        super().__init__()
        self.model, self.pad = model, pad

    def forward(self, src_tokens, targets):
        out = self.model(src_tokens, targets)
        real = src_tokens.ne(self.pad)
        return (out["generator_logits"], targets[targets.ne(self.pad)], out["discriminator_logits"][real],
                out["replaced"][real])


def losses(outputs, weight):
    generator_logits, gold, disc_logits, replaced = outputs
    generator = F.cross_entropy(generator_logits.float(), gold)
    discriminator = F.binary_cross_entropy_with_logits(disc_logits.float(), replaced.float())
    return generator, discriminator, generator + weight * discriminator


def auc(scores, labels):
    ranks = scores.argsort().argsort().double() + 1
    positives = labels.sum().item()
    negatives = labels.numel() - positives
    return ((ranks[labels].sum().item() - positives * (positives + 1) / 2) / max(positives * negatives, 1))


def binary_entropy_bits(rate):
    return -(rate * math.log2(rate) + (1 - rate) * math.log2(1 - rate)) if 0 < rate < 1 else 0.0


@torch.no_grad()
def evaluate(model, task, args):
    model.eval()
    torch.manual_seed(1234)
    scores, labels, correct, selected, disc_loss = [], [], 0, 0, 0.0
    for sample in batches(task, "valid", args.batch, args.seed, 1):
        outputs = model(sample["net_input"]["src_tokens"], sample["target"])
        generator_logits, gold, disc_logits, replaced = outputs
        correct += generator_logits.argmax(-1).eq(gold).sum().item()
        selected += gold.numel()
        disc_loss += F.binary_cross_entropy_with_logits(disc_logits.float(), replaced.float(), reduction="sum").item()
        scores.append(disc_logits.float())
        labels.append(replaced)
    model.train()
    scores, labels = torch.cat(scores), torch.cat(labels)
    rate = labels.float().mean().item()
    found = (scores[labels] > 0).float().mean().item() if labels.any() else 0.0
    loss = disc_loss / labels.numel() / math.log(2)
    trivial = binary_entropy_bits(rate)
    return {"disc_loss": round(loss, 4), "disc_trivial": round(trivial, 4), "loss_over_trivial": round(loss / trivial, 4),
            "disc_auc": round(auc(scores, labels), 4), "disc_acc_replaced": round(100 * found, 2),
            "replace_rate": round(100 * rate, 2), "gen_acc": round(100 * correct / max(selected, 1), 2)}


def build(args, cfg, task):
    torch.manual_seed(args.seed)
    dictionary = task.source_dictionary
    if args.model == "transformers":
        return TransformersElectra(len(dictionary), dictionary.pad(), cfg.model.encoder_embed_dim,
                                   cfg.model.encoder_layers, cfg.model.encoder_attention_heads,
                                   args.generator_fraction, cfg.model.embedding_dim, args.temperature)
    return BiofairseqElectra(task.build_model(cfg.model), dictionary.pad())


def optimizer_and_schedule(model, args):
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    groups = [{"params": [p for n, p in named if p.dim() >= 2], "weight_decay": 0.01},
              {"params": [p for n, p in named if p.dim() < 2], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.999), eps=1e-6)
    ramp = lambda step: min((step + 1) / max(args.warmup, 1), max(0.0, (args.updates - step) / max(args.updates - args.warmup, 1)))
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, ramp)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="a data-bin from preprocess/binarize.sh")
    parser.add_argument("--model", choices=("transformers", "biofairseq"), required=True)
    parser.add_argument("--updates", type=int, default=1250)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--mask-prob", type=float, default=0.15)
    parser.add_argument("--generator-fraction", type=float, default=0.5)
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling temperature")
    parser.add_argument("--disc-weight", type=float, default=50.0, help="λ, the discriminator loss's weight")
    parser.add_argument("--eval-every", type=int, default=125)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--json", type=Path, help="write the curve here")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg, task = setup(args)
    model = build(args, cfg, task)
    optimizer, schedule = optimizer_and_schedule(model, args)
    curve, update, epoch, start = [], 0, 1, time.monotonic()
    model.train()
    while update < args.updates:
        for sample in batches(task, "train", args.batch, args.seed, epoch):
            generator, discriminator, loss = losses(model(sample["net_input"]["src_tokens"], sample["target"]), args.disc_weight)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            update += 1
            if update % args.eval_every == 0 or update == args.updates:
                point = {"update": update, "minutes": round((time.monotonic() - start) / 60, 2),
                         "train_gen_loss": round(generator.item(), 3), **evaluate(model, task, args)}
                curve.append(point)
                print(json.dumps(point), flush=True)
            if update == args.updates:
                break
        epoch += 1
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "curve": curve}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
