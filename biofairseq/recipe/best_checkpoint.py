"""The pretraining checkpoint to keep: the one with the lowest validation perplexity, or the last one.

    python -m biofairseq.recipe.best_checkpoint SAVE_DIR TRAIN_LOG --output best.json [--keep best|last]
        [--check DATA_BIN --check-output check.json [--go-on]]

fairseq-train already keeps it as SAVE_DIR/checkpoint_best.pt when it runs with ``--best-checkpoint-metric
ppl``. (With its default, ``loss``, it compares losses rounded to 3 decimals and keeps the later of equal
ones, whose perplexity, logged to 2 decimals, can be the higher.) This reads every validation of the run
from its log (``--log-format json --log-file``, appended to when a run resumes), checks that
checkpoint_best.pt holds the update with the best logged value of the metric it was chosen by, prints the
validations and writes them, with the choice, to a JSON file. With ``--check``, it then runs
``biofairseq.recipe.pretraining_check`` on the kept checkpoint in the same process (its exit status and
output), as the recipes do: importing fairseq is most of either's time.
"""

import argparse
import json
import sys
from pathlib import Path
from typing import Optional

from biofairseq.atomic import write_text


class BestCheckpointError(Exception):
    pass


def records(log_file: Path, kind: str) -> list:
    """The ``--log-format json`` records of a fairseq log: ``valid`` (validations) or ``train_inner`` (steps).

    Reads the ``--log-file`` (bare JSON lines) and captured console output (``... | valid | {...}``) alike.
    """
    out = []
    with open(log_file, encoding="utf-8") as f:
        for line in f:
            start = line.find('{"')
            if start < 0:
                continue
            try:
                record = json.loads(line[start:])
            except json.JSONDecodeError:
                continue
            if ("valid_loss" in record) if kind == "valid" else ("loss" in record and "num_updates" in record):
                out.append({k: _number(v) for k, v in record.items()})
    return out


def _number(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return value


SKIPPED = ("wps", "wpb", "bsz", "ntokens", "nsentences", "num_updates")


def validations(log_file: Path) -> list:
    """One record per validated update (a resumed run may validate an update twice: the last one counts), with
    every metric the criterion logged, named without ``valid_``: loss, ppl and accuracy for masked LM; gen_ppl,
    disc_acc_replaced, disc_auc, ... for ELECTRA."""
    by_update = {}
    for r in records(log_file, "valid"):
        metrics = {k[len("valid_"):]: v for k, v in r.items() if k.startswith("valid_") and k[len("valid_"):] not in SKIPPED}
        by_update[int(r["valid_num_updates"])] = {"update": int(r["valid_num_updates"]), "epoch": int(r["epoch"]), **metrics}
    return [by_update[u] for u in sorted(by_update)]


def saved_best(path: Path) -> tuple:
    """(update, best value, metric, maximize) that fairseq recorded in checkpoint_best.pt."""
    from biofairseq.training_state import load_state

    state = load_state(path)
    settings = state["cfg"]["checkpoint"] if state.get("cfg") else vars(state["args"])
    return (int(state["optimizer_history"][-1]["num_updates"]), float(state["extra_state"]["best"]),
            settings["best_checkpoint_metric"], bool(settings["maximize_best_checkpoint_metric"]))


def pick(save_dir: Path, log_file: Path, keep: str = "best") -> dict:
    save_dir, log_file = Path(save_dir), Path(log_file)
    if not log_file.is_file():
        raise BestCheckpointError(f"{log_file}: no training log; run fairseq-train with --log-format json --log-file {log_file}")
    history = validations(log_file)
    if not history:
        raise BestCheckpointError(f"{log_file}: no validation in the log; run fairseq-train without --disable-validation")
    checkpoint = save_dir / f"checkpoint_{keep}.pt"
    if not checkpoint.is_file():
        raise BestCheckpointError(f"{checkpoint}: missing; fairseq-train writes it unless --no-save; train again or give the right SAVE_DIR")
    update, value, metric, maximize = saved_best(checkpoint)
    logged = {v["update"]: v for v in history}
    if keep == "last":  # the end of training, with its validation (ELECTRA keeps the final model)
        if update not in logged:
            raise BestCheckpointError(f"{checkpoint}: saved at update {update}, which {log_file} never validated; is the log another run's? Retrain with FORCE=1")
        return {"checkpoint": str(checkpoint), "metric": "last", **logged[update], "validations": history}
    if metric not in history[0]:
        raise BestCheckpointError(f"{checkpoint}: chosen by --best-checkpoint-metric {metric}, which {log_file} does not log; use ppl")
    best = (max if maximize else min)(v[metric] for v in history)
    if update not in logged or logged[update][metric] != best:
        raise BestCheckpointError(
            f"{checkpoint}: saved at update {update} (valid {metric} {value:g}), but the best valid {metric} in {log_file} "
            f"is {best:g}; is the log another run's? Retrain with FORCE=1"
        )
    return {"checkpoint": str(checkpoint), "metric": metric, **logged[update], "validations": history}


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m biofairseq.recipe.best_checkpoint", description=__doc__.split("\n")[0])
    parser.add_argument("save_dir", type=Path, help="fairseq-train --save-dir")
    parser.add_argument("log_file", type=Path, help="fairseq-train --log-file (with --log-format json)")
    parser.add_argument("--output", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--keep", choices=("best", "last"), default="best",
                        help="best: checkpoint_best.pt, checked against the log (default); last: checkpoint_last.pt")
    parser.add_argument("--check", type=Path, metavar="DATA_BIN",
                        help="then compare the kept checkpoint with word frequencies on this data-bin "
                        "(python -m biofairseq.recipe.pretraining_check)")
    parser.add_argument("--check-output", type=Path, help="with --check: the check's JSON file")
    parser.add_argument("--go-on", action="store_true", help="with --check: exit 0 even when the model is not "
                        "clearly better")
    args = parser.parse_args(argv)
    if (args.check is None) != (args.check_output is None) or (args.go_on and args.check is None):
        parser.error("--check DATA_BIN and --check-output FILE go together (--go-on needs them)")
    try:
        chosen = pick(args.save_dir, args.log_file, args.keep)
    except BestCheckpointError as error:
        print(f"best_checkpoint: error: {error}", file=sys.stderr)
        return 1
    from biofairseq.text.tables import markdown_table

    from biofairseq.recipe.objectives import objective_of

    objective = objective_of(chosen)
    headers, rows = objective.table(chosen["validations"])
    rows = [row + ["<- kept" if v["update"] == chosen["update"] else ""] for row, v in zip(rows, chosen["validations"])]
    print(markdown_table(headers + [""], rows))
    write_text(args.output, json.dumps(chosen, indent=1) + "\n")
    why = "the final checkpoint" if args.keep == "last" else f"the best validation {chosen['metric']}"
    print(f"{chosen['checkpoint']}: update {chosen['update']:,}, {why} ({objective.summary(chosen)}); wrote {args.output}")
    if args.check is None:
        return 0
    from biofairseq.recipe import pretraining_check

    return pretraining_check.main([str(args.output), str(args.check), "--output", str(args.check_output),
                                   *(["--go-on"] if args.go_on else [])])


if __name__ == "__main__":
    from biofairseq.commands import quiet_known_noise
    from biofairseq.interrupts import ends_in_one_line

    quiet_known_noise()  # no "Please install tensorboardX" from fairseq's speech tasks as the check loads fairseq

    with ends_in_one_line("best_checkpoint", "nothing was written; run the same command again"):
        sys.exit(main())
