"""A from-hf folder with its vocabulary extended (``biofairseq.corpus.vocab_extension``): the same model with a row for
each new token, the mean of the rows of the pieces the old vocabulary cut it into, in every tensor that has a row a
token (the embeddings, an LM head's own output rows and its bias); nothing else changes.

Two checks, on the validation text: where a line holds no new token, the extended model's logits over the old
vocabulary equal the original's (the ids are the same, and so is every weight they meet); where it does, the new
tokens' masked-LM loss before any training (update 0), beside that of as many old tokens of the same lines.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

import torch

from biofairseq import checkpoints
from biofairseq.convert import ConvertError, vocabulary
from biofairseq.corpus import vocab_extension

TOLERANCE = 1e-5
CHECK_LINES = 16  # lines without a new token whose logits are compared
LOSS_LINES = 64  # lines with one whose new tokens are masked
MAX_TOKENS = 128  # a line's tokens kept for the checks (its start)


def fairseq_symbol(vocab: vocabulary.Vocabulary) -> Callable[[str], str]:
    """A piece's name in dict.txt: a WordPiece token itself, a byte-level BPE token's id."""
    if vocab.kind == "wordpiece":
        return lambda piece: piece
    ids = json.loads(Path(vocab.files["vocab"]).read_text(encoding="utf-8"))
    return lambda piece: str(ids[piece])


def extended_weights(weights: dict, built: dict, rows: list, old_size: int) -> dict:
    """``weights`` with the new tokens' rows: each the mean of its old pieces' rows (``rows``: their fairseq indices),
    in every tensor that ``built`` (the model on the extended dictionary) has longer by the new tokens."""
    out = {}
    for key, tensor in weights.items():
        target = built.get(key)
        if target is None or target.shape == tensor.shape:
            out[key] = tensor
            continue
        if tensor.shape[0] != old_size or target.shape[0] != old_size + len(rows) or target.shape[1:] != tensor.shape[1:]:
            raise ConvertError(f"{key}: shape {tuple(tensor.shape)} against {tuple(target.shape)} with the extended "
                               "dictionary; only tensors with a row a token grow")
        means = torch.stack([tensor[torch.tensor(ids)].float().mean(0) for ids in rows]).to(tensor.dtype)
        out[key] = torch.cat([tensor, means])
    return out


def _batch(lines_ids, pad):
    width = max(map(len, lines_ids))
    tokens = torch.full((len(lines_ids), width), pad, dtype=torch.long)
    for row, ids in zip(tokens, lines_ids):
        row[: len(ids)] = torch.tensor(ids)
    return tokens


def _cut(ids):
    return ids if len(ids) <= MAX_TOKENS else ids[: MAX_TOKENS - 1] + ids[-1:]


def same_logits(original: checkpoints.FairseqRoberta, extended: checkpoints.FairseqRoberta, old_ids: list,
                new_ids: list) -> dict[str, Any]:
    """Lines the extension leaves as they were: whether their ids are the same, and the largest difference of the
    logits over the old vocabulary."""
    pad, size = original.dictionary.pad(), len(original.dictionary)
    same = old_ids == new_ids
    if not old_ids:
        return {"lines": 0, "ids_identical": True, "max_abs_diff_logits": 0.0, "tolerance": TOLERANCE}
    tokens = _batch(old_ids, pad)
    real = tokens.ne(pad)
    with torch.no_grad():
        a = original.model(tokens)[0]
        b = extended.model(_batch(new_ids, pad) if not same else tokens)[0][..., :size]
    diff = (a - b).abs()[real].max().item() if same else math.inf
    return {"lines": len(old_ids), "ids_identical": same, "max_abs_diff_logits": diff, "tolerance": TOLERANCE}


def new_token_loss(extended: checkpoints.FairseqRoberta, lines_ids: list, old_size: int, seed: int = 1) -> dict[str, Any]:
    """The masked-LM loss (base 2, as fairseq logs it) and accuracy of the new tokens of these lines, each masked, at
    update 0; and of as many old tokens of the same lines, masked in the same passes (chosen at random)."""
    d = extended.dictionary
    rng = random.Random(seed)
    specials = {d.bos(), d.eos(), d.pad(), d.unk(), d.index("<mask>")}
    totals = {"new": [0.0, 0, 0], "old": [0.0, 0, 0]}  # loss, correct, count
    for start in range(0, len(lines_ids), 8):
        chunk = lines_ids[start:start + 8]
        tokens = _batch(chunk, d.pad())
        masked = {"new": torch.zeros_like(tokens, dtype=torch.bool), "old": torch.zeros_like(tokens, dtype=torch.bool)}
        for row, ids in enumerate(chunk):
            new = [i for i, t in enumerate(ids) if t >= old_size]
            old = [i for i, t in enumerate(ids) if t < old_size and t not in specials]
            masked["new"][row, new] = True
            masked["old"][row, rng.sample(old, min(len(old), len(new)))] = True
        inputs = tokens.masked_fill(masked["new"] | masked["old"], d.index("<mask>"))
        with torch.no_grad():
            logits = extended.model(inputs)[0].float()
        for kind, where in masked.items():
            if where.any():
                target, scores = tokens[where], logits[where]
                totals[kind][0] += torch.nn.functional.cross_entropy(scores, target, reduction="sum").item()
                totals[kind][1] += (scores.argmax(-1) == target).sum().item()
                totals[kind][2] += int(where.sum())
    return {f"{kind}_tokens": {"masked": n, "loss": loss / n / math.log(2) if n else None,
                               "accuracy": correct / n if n else None}
            for kind, (loss, correct, n) in totals.items()} | {"lines": len(lines_ids)}


def extend(init_dir: str | Path, output: Path, final_output: Path, text: str | Path, size: int,
           valid: Optional[str | Path] = None, min_count: int = 2,
           log: Callable[[str], None] = print) -> dict[str, Any]:
    """Writes the extended folder into ``output`` (which will be ``final_output``): vocabulary, dict.txt, model.pt and
    conversion.json (init_dir's, with the extension's record); returns that record."""
    from biofairseq.training_state import load_state

    start = time.perf_counter()
    init_dir = Path(init_dir)
    for name in ("model.pt", "dict.txt", "conversion.json"):
        if not (init_dir / name).is_file():
            raise ConvertError(f"{init_dir}: no {name}; give a folder of biofairseq-convert from-hf")
    old_vocab = vocabulary.from_folder(init_dir)
    problem = vocab_extension.refusal(old_vocab.kind if old_vocab else "unknown")
    if problem:
        raise ConvertError(f"{init_dir}: {problem}")
    try:
        new = vocab_extension.extend(init_dir, output, text, size, min_count, log)
    except vocab_extension.ExtensionError as error:
        raise ConvertError(str(error)) from None
    original = checkpoints.load(init_dir / "model.pt", init_dir / "dict.txt")
    old_size = len(original.dictionary)
    new_dictionary = checkpoints.load_dictionary(output / "dict.txt")
    if len(new_dictionary) != old_size + len(new):
        raise ConvertError(f"{output / 'dict.txt'}: {len(new_dictionary)} entries, not {old_size} + {len(new)}")
    symbol = fairseq_symbol(old_vocab)
    rows = [[original.dictionary.index(symbol(p)) for p in token.pieces] for token in new]
    state = load_state(init_dir / "model.pt")
    from transformers.initialization import no_init_weights

    with no_init_weights():
        built = checkpoints.DictionaryTask(new_dictionary).build_model(original.args).state_dict()
    state["model"] = extended_weights(dict(state["model"]), built, rows, old_size)
    state["cfg"]["task"]["data"] = str(final_output)
    torch.save(state, output / "model.pt")
    del state, built

    extended = checkpoints.load(output / "model.pt", output / "dict.txt")
    record = {**json.loads((output / "vocab_info.json").read_text())["extension"],
              "seconds": round(time.perf_counter() - start, 1)}  # the vocabulary and the model, before the checks
    if valid is not None:
        old_encode = vocabulary.FairseqEncoding(old_vocab, original.dictionary)
        new_encode = vocabulary.FairseqEncoding(vocabulary.from_folder(output), extended.dictionary)
        unchanged, old_ids, holding = [], [], []
        with open(valid, encoding="utf-8", newline="\n") as f:
            for line in (line.strip() for line in f):
                if not line:
                    continue
                ids = _cut(new_encode(line))
                if max(ids) >= old_size:
                    if len(holding) < LOSS_LINES:
                        holding.append(ids)
                elif len(unchanged) < CHECK_LINES:
                    unchanged.append(ids)
                    old_ids.append(_cut(old_encode(line)))
                if len(holding) == LOSS_LINES and len(unchanged) == CHECK_LINES:
                    break
        same = same_logits(original, extended, old_ids, unchanged)
        log(f"lines without a new token ({same['lines']}): ids {'identical' if same['ids_identical'] else 'differ'}, "
            f"max |logit difference| over the old vocabulary {same['max_abs_diff_logits']:.1e} (tolerance {TOLERANCE:.0e})")
        if not same["ids_identical"] or same["max_abs_diff_logits"] > TOLERANCE:
            raise ConvertError(f"{output}: the extended model differs from {init_dir} on text without a new token: "
                               f"ids {'identical' if same['ids_identical'] else 'differ'}, max |logit difference| "
                               f"{same['max_abs_diff_logits']:.1e}")
        loss = new_token_loss(extended, holding, old_size)
        new_loss, old_loss = loss["new_tokens"], loss["old_tokens"]
        if new_loss["masked"]:
            log(f"update 0, {loss['lines']} validation lines: the new tokens' masked-LM loss {new_loss['loss']:.2f} "
                f"(accuracy {new_loss['accuracy']:.1%}, {new_loss['masked']} masked), old tokens' {old_loss['loss']:.2f} "
                f"(accuracy {old_loss['accuracy']:.1%})")
        record = {**record, "unchanged_text": same, "update_0": loss}
    conversion = json.loads((init_dir / "conversion.json").read_text())
    conversion["vocabulary_extension"] = record
    conversion["dictionary_size"] = len(extended.dictionary)
    (output / "conversion.json").write_text(json.dumps(conversion, indent=1) + "\n")
    info = json.loads((output / "vocab_info.json").read_text())
    (output / "vocab_info.json").write_text(json.dumps({**info, "extension": record}, indent=1) + "\n")
    return record
