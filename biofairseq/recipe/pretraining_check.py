"""Is the pretrained model clearly better than word frequencies? Checked before any fine-tuning.

    python -m biofairseq.recipe.pretraining_check BEST_JSON DATA_BIN --output check.json [--go-on]

A collapsed pretraining (one token predicted everywhere) is worse than none: NER fine-tuned from it can stay
at F1 0 where random initialisation learns. Three comparisons, all on the validation split of the data-bin:

- validation perplexity of the kept checkpoint against the unigram perplexity (token frequencies of the
  training split, add-one smoothed): the model must be at most ``PPL_RATIO`` times it;
- masked-token accuracy against always guessing the most frequent training token: at least ``ACC_MARGIN``
  points above it (where the criterion logs it: fairseq's own ``masked_lm`` does not, ``masked_lm_accuracy`` does);
- ELECTRA: the discriminator must have left the trivial solution (its validation loss clearly below that of
  always answering the replace rate); the perplexity and accuracy above are then the generator's;
- the last layer (ELECTRA: the discriminator's) must still tell tokens apart: the mean cosine between the final hidden states of the
  tokens of validation samples must stay below ``MAX_COSINE`` (a collapsed encoder maps every token to
  nearly the same vector, cosine near 1).

Writes the figures and the verdict to a JSON file and says it in one line. Exit status 3 when the model is
not clearly better, unless ``--go-on``.
"""

import argparse
import json
import sys
from pathlib import Path
from typing import Optional

import numpy as np

from biofairseq.atomic import write_text

PPL_RATIO = 0.9
ACC_MARGIN = 1.0
MAX_COSINE = 0.95
SAMPLES = 64


def frequency_baselines(data_bin: Path, special: np.ndarray) -> tuple:
    """(unigram perplexity, most-frequent-token accuracy in %) of the validation split's real tokens."""
    from biofairseq.corpus.vocab import recorded_counts, token_counts
    from biofairseq.data_bin import shards

    train = recorded_counts(data_bin, "train")  # binarize.sh counted them once, into dict.txt
    if train is None:
        train = sum(token_counts(shard, "train", len(special))[: len(special)] for shard in shards(data_bin))
    train = np.pad(train, (0, max(0, len(special) - len(train))))[: len(special)].astype(np.float64)
    valid = token_counts(shards(data_bin)[0], "valid", len(special))[: len(special)].astype(np.float64)
    train[special] = valid[special] = 0
    probability = np.where(special, 0, train + 1)
    probability /= probability.sum()
    real = valid > 0
    bits = -(valid[real] * np.log2(probability[real])).sum() / valid.sum()
    return float(2 ** bits), float(100 * valid[train.argmax()] / valid.sum())


def mean_token_cosine(checkpoint: Path, data_bin: Path, special: np.ndarray, samples: int = SAMPLES) -> float:
    """Mean pairwise cosine of the last layer's vectors of the real tokens in the first validation lines."""
    import torch
    from fairseq import checkpoint_utils
    from fairseq.data.indexed_dataset import MMapIndexedDataset

    # biofairseq's tasks and models are registered as fairseq loads (biofairseq/__init__)
    from biofairseq.data_bin import shards

    first = shards(data_bin)[0]  # the dictionary and the valid split
    models, _, task = checkpoint_utils.load_model_ensemble_and_task([str(checkpoint)], arg_overrides={"data": str(first)})
    model = models[0].eval()
    data = MMapIndexedDataset(str(first / "valid"))
    limit = min(task.cfg.tokens_per_sample, model.max_positions()) - 1
    lines = [data[i][:limit] for i in range(len(data)) if data.sizes[i] > 8][:samples]
    bos, pad = task.source_dictionary.bos(), task.source_dictionary.pad()
    batch = torch.full((len(lines), max(map(len, lines)) + 1), pad, dtype=torch.long)
    for i, line in enumerate(lines):
        batch[i, 0] = bos
        batch[i, 1 : len(line) + 1] = line.long()
    with torch.no_grad():  # ELECTRA: the discriminator, the tower that is fine-tuned
        features = (model.discriminator_features(batch) if hasattr(model, "discriminator_features")
                    else model(batch, features_only=True)[0]).float()
    keep = ~torch.from_numpy(special)[batch]
    vectors = torch.nn.functional.normalize(features[keep], dim=-1).double()
    n = len(vectors)
    total = vectors.sum(0)
    return float((total @ total - n) / (n * (n - 1)))


def check(best: dict, data_bin: Path) -> dict:
    from fairseq.data import Dictionary

    from biofairseq.data import special_symbols
    from biofairseq.data_bin import shards
    from biofairseq.recipe.objectives import Electra, objective_of

    special = special_symbols(_with_mask(Dictionary.load(str(shards(data_bin)[0] / "dict.txt"))))
    unigram_ppl, frequent_acc = frequency_baselines(data_bin, special)
    cosine = mean_token_cosine(best["checkpoint"], data_bin, special)
    objective = objective_of(best)
    ppl, accuracy = best[objective.ppl], best.get(objective.accuracy)
    problems = []
    if ppl > PPL_RATIO * unigram_ppl:
        problems.append(f"{'generator ' if objective is Electra else ''}validation perplexity {ppl:.2f} is not below {PPL_RATIO} x the unigram perplexity {unigram_ppl:.2f}")
    if accuracy is not None and accuracy < frequent_acc + ACC_MARGIN:
        problems.append(f"masked-token accuracy {accuracy:.2f}% is not {ACC_MARGIN:g} point above always guessing the most frequent token ({frequent_acc:.2f}%)")
    if objective is Electra and not Electra.off_trivial(best):
        problems.append(f"the discriminator is at the trivial solution: validation loss {best['disc_loss']:.3f} vs "
                        f"{best['disc_trivial']:.3f} for always answering the replace rate, "
                        f"{best.get('disc_acc_replaced', 0):.2f}% of replaced tokens found")
    if cosine >= MAX_COSINE:
        problems.append(f"the last layer has collapsed: mean cosine {cosine:.3f} between token vectors (>= {MAX_COSINE})")
    return {
        "checkpoint": best["checkpoint"], "update": best.get("update"), "objective": objective.name,
        "valid_ppl": ppl, "valid_accuracy": accuracy,
        "unigram_ppl": unigram_ppl, "most_frequent_token_accuracy": frequent_acc, "mean_token_cosine": cosine,
        "thresholds": {"ppl_ratio": PPL_RATIO, "accuracy_margin": ACC_MARGIN, "max_cosine": MAX_COSINE},
        "clearly_better": not problems, "problems": problems,
    }


def _with_mask(dictionary):
    dictionary.add_symbol("<mask>")  # as the task adds it; already in our dict.txt
    return dictionary


def sentence(result: dict) -> str:
    """The one-line verdict, as printed and as the report says it."""
    from biofairseq.recipe.objectives import Electra

    of = "generator " if result.get("objective") == Electra.name else ""
    logged = result["valid_accuracy"] is not None  # fairseq's masked_lm logs none
    accuracy = (f"{of}masked-token accuracy {result['valid_accuracy']:.2f}% vs most frequent token "
                f"{result['most_frequent_token_accuracy']:.2f}%" if logged else
                f"{of}masked-token accuracy not logged, so not compared (--criterion masked_lm_accuracy logs it)")
    figures = (f"{of}validation perplexity {result['valid_ppl']:.2f} vs unigram {result['unigram_ppl']:.2f}; {accuracy}; "
               f"mean token cosine {result['mean_token_cosine']:.3f}")
    if result["clearly_better"]:
        return f"the pretrained model is clearly better than word frequencies ({figures})"
    return f"the pretrained model is NOT clearly better than word frequencies: {'; '.join(result['problems'] + ([] if logged else [accuracy]))}"


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m biofairseq.recipe.pretraining_check", description=__doc__.split("\n")[0])
    parser.add_argument("best", type=Path, help="best.json written by biofairseq.recipe.best_checkpoint")
    parser.add_argument("data_bin", type=Path, help="the data-bin the model was trained on")
    parser.add_argument("--output", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--go-on", action="store_true", help="exit 0 even when the model is not clearly better")
    args = parser.parse_args(argv)
    from biofairseq.data_bin import shards

    try:
        first = shards(args.data_bin)[0]  # a sharded data-bin has its dictionary and valid split in shard0
    except FileNotFoundError as error:
        print(f"pretraining_check: error: {error}", file=sys.stderr)
        return 1
    for path in (args.best, first / "dict.txt", first / "valid.bin"):
        if not path.is_file():
            print(f"pretraining_check: error: {path}: missing; run the recipe's stages 3 and 5 first", file=sys.stderr)
            return 1
    result = check(json.loads(args.best.read_text()), args.data_bin)
    write_text(args.output, json.dumps(result, indent=1) + "\n")
    print(f"pretraining_check: {sentence(result)}", file=sys.stderr)
    if not result["clearly_better"] and not args.go_on:
        print("pretraining_check: stopping before fine-tuning; train longer or at a lower learning rate with a longer "
              "warm-up, or go on anyway (recipe: WEAK_PRETRAINING=continue; here: --go-on)", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
