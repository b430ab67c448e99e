"""What a recipe reports of each pretraining objective: which logged numbers, in which table, in which words.

The stages (pick, check, report) read validations as the criterion logged them (``best_checkpoint.validations``)
and ask the objective found there how to show them, so that they do not depend on the objective.
"""

from typing import Optional

# ELECTRA's discriminator has left the trivial solution once its loss is this far below the loss of always
# answering the replace rate (disc_trivial).
LEFT_TRIVIAL = 0.9


class MaskedLM:
    name = "masked LM"
    ppl, accuracy, curve = "ppl", "accuracy", "ppl"  # the logged keys the check and the plot use

    @staticmethod
    def table(validations: list) -> tuple:
        rows = [[f"{v['update']:,}", f"{v['epoch']}", f"{v['loss']:.3f}", f"{v['ppl']:.2f}", percent(v.get("accuracy"))]
                for v in validations]
        return ["update", "epoch", "valid loss", "valid ppl", "masked acc. %"], rows

    @staticmethod
    def summary(v: dict) -> str:
        return f"validation perplexity {v['ppl']:.2f}, masked-token accuracy {percent(v.get('accuracy'))}%"

    @staticmethod
    def findings(validations: list) -> list:
        return []


class Electra:
    name = "ELECTRA"
    ppl, accuracy, curve = "gen_ppl", "gen_acc", "gen_ppl"

    @staticmethod
    def table(validations: list) -> tuple:
        rows = [[f"{v['update']:,}", f"{v['gen_ppl']:.2f}", percent(v.get("gen_acc")),
                 f"{v['disc_loss']:.3f} ({v['disc_trivial']:.3f})", percent(v.get("disc_acc_replaced")),
                 percent(v.get("disc_acc_original")), percent(v.get("disc_precision")), f"{v.get('disc_auc', float('nan')):.3f}",
                 f"{v['disc_cosine']:.3f}"] for v in validations]
        return ["update", "generator ppl", "generator acc. %", "disc. loss (trivial)", "replaced found %",
                "originals kept %", "disc. precision %", "disc. AUC", "token cosine"], rows

    @staticmethod
    def summary(v: dict) -> str:
        return (f"generator perplexity {v['gen_ppl']:.2f} (accuracy {percent(v.get('gen_acc'))}%); discriminator: "
                f"{percent(v.get('disc_acc_replaced'))}% of replaced tokens found, AUC {v.get('disc_auc', float('nan')):.3f}, "
                f"loss {v['disc_loss']:.3f} vs {v['disc_trivial']:.3f} for always answering the replace rate")

    @staticmethod
    def off_trivial(v: dict) -> bool:
        """Whether a validation's discriminator loss is clearly below the loss of always answering the replace rate."""
        return v["disc_loss"] < LEFT_TRIVIAL * v["disc_trivial"]

    @classmethod
    def left_trivial(cls, validations: list) -> Optional[int]:
        """The first validated update at which the discriminator is off the trivial solution, or None."""
        return next((v["update"] for v in validations if cls.off_trivial(v)), None)

    @classmethod
    def findings(cls, validations: list) -> list:
        update = cls.left_trivial(validations)
        if update is None:
            return [f"The discriminator never left the trivial solution in {validations[-1]['update']:,} updates: its "
                    f"validation loss stayed above {LEFT_TRIVIAL} x the loss of always answering the replace rate. "
                    "Its pretraining taught it little; ELECTRA needs far more updates than this."]
        return [f"The discriminator left the trivial solution at update {update:,} (validation loss below {LEFT_TRIVIAL} x "
                "the loss of always answering the replace rate)."]


class Distillation(MaskedLM):
    """--criterion mlm_distillation: ppl and accuracy are the student's MLM ones, as masked LM logs them."""

    name = "distillation"

    @staticmethod
    def table(validations: list) -> tuple:
        rows = [[f"{v['update']:,}", f"{v['epoch']}", f"{v['loss']:.3f}", f"{v['mlm_loss']:.3f}", f"{v['ppl']:.2f}",
                 percent(v.get("accuracy")), f"{v['kl_loss']:.3f}", f"{v['cos_loss']:.4f}", f"{v['teacher_ppl']:.2f}"]
                for v in validations]
        return ["update", "epoch", "valid loss", "MLM loss", "MLM ppl", "masked acc. %", "KL (x T²)", "1 - cosine",
                "teacher ppl"], rows

    @staticmethod
    def summary(v: dict) -> str:
        return (f"validation perplexity {v['ppl']:.2f} (the teacher's {v['teacher_ppl']:.2f}), masked-token accuracy "
                f"{percent(v.get('accuracy'))}%, KL {v['kl_loss']:.3f}, 1 - cosine {v['cos_loss']:.4f}")


def objective_of(record: dict) -> type:
    """The objective whose numbers a validation record (or best.json) holds."""
    if "gen_ppl" in record:
        return Electra
    return Distillation if "kl_loss" in record else MaskedLM


def percent(value: Optional[float]) -> str:
    """A percentage as the reports print it, '-' when not logged or undefined (NaN: nothing to divide by)."""
    return "-" if value is None or value != value else f"{value:.2f}"
