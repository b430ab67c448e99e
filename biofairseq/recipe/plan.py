"""The stages every recipe is made of (clean, vocabulary, ..., report), each adding its block to the run's one bash
script (biofairseq.recipe.script) from what it is given: the run's values, and the Data and Model a recipe builds
(biofairseq.recipe.recipes). A stage reads nothing an earlier call left behind; what it makes that a later one needs
(a Data, a converted model's folder, the report's arguments) it returns.

Every command is fixed before any stage runs: what a later stage needs of an earlier one's files is read by the tool
that needs it (biofairseq-train reads a data-bin's shards and vocabulary, a from-hf folder's shape, where its
checkpoints stand: biofairseq.train_inputs), so the script is the run. A hyper-parameter reaches a command through
the flag its Setting carries (biofairseq.recipe.table.flags), not by its name here.
"""

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from biofairseq.recipe.script import Script
from biofairseq.recipe.table import flag_values, flags


def init_description(init: str) -> str:
    """INIT_FROM as a stage title names it: the folder (or checkpoint) and, from its config.json, its class and shape."""
    config = Path(init) / "config.json"
    try:
        c = json.loads(config.read_text())
        shape = f"{c['num_hidden_layers']} x {c['hidden_size']}"
        return f"{Path(init).name} ({(c.get('architectures') or [c.get('model_type', '?')])[0]}, {shape})"
    except (OSError, ValueError, KeyError, TypeError):
        return Path(init).name


@dataclass
class Run:
    """One run's resolved settings (strings, as recipe.env holds them, and the computed ones), its NER sets and what
    FORCE removes first."""
    recipe: str
    values: dict
    ner_sets: list = field(default_factory=list)  # (name, train, dev, test or "")
    force_remove: list = field(default_factory=list)  # paths under RUN_DIR
    python: str = "python"


@dataclass(frozen=True)
class Data:
    """A vocabulary and the data-bin encoded with it; ``init``: INIT_FROM converted (its weights and vocabulary), which
    the model continues."""
    vocab: Path
    data_bin: Path
    name: str = ""  # of one of several vocabularies: vocab/NAME, data-bin/NAME, the report's name
    init: Optional[Path] = None
    extends: Optional[Path] = None  # the vocabulary VOCAB_EXTEND extended (INIT_FROM's), for the break-out rates


@dataclass(frozen=True)
class Model:
    """A model to pretrain: its task (and criterion) flags, its own model and optimizer flags, its name (pretrain/NAME,
    hf/NAME; none: pretrain/, hf/RECIPE), its shape (arch, unless it continues the data's init), the checkpoint kept
    and the lowest metric that names fairseq's best."""
    task: tuple
    flags: tuple = ()
    optim: tuple = ()
    name: str = ""
    arch: str = ""
    keep: str = "best"
    best_metric: str = "ppl"
    sdpa: tuple = ("--attention", "sdpa")  # what the fast path adds to choose SDPA (ModernBERT's is already)


class Plan:
    def __init__(self, run: Run, stop_after: Optional[str] = None) -> None:
        v = self.v = run.values
        self.run, self.stop_after = run, v["STOP_AFTER"] if stop_after is None else stop_after
        self.repo, self.run_dir = Path(v["REPO"]), Path(v["RUN_DIR"])
        self.clean_dir = self.run_dir / "clean"
        self.script = Script(run.recipe, v["FORCE"])
        for path in run.force_remove:  # before the first stage, so that a run that stops early (STOP_AFTER=binarize)
            # leaves nothing of an earlier run's later stages to be taken for this one's
            self.script.remove(self.run_dir / path)

    @property
    def commands(self) -> list:
        return self.script.commands

    @property
    def stages(self) -> list:
        return self.script.stages

    def render(self, header: list, recorded: str) -> str:
        functions = (self.repo / "recipes" / "lib" / "stages.sh").read_text(encoding="utf-8")
        return self.script.render(header, functions, self.run_dir / "recipe.env", recorded)

    def py(self, *argv: object) -> list:
        return [self.run.python, *map(str, argv)]

    # ---- flags several stages build

    def optimizer(self, given: Optional[dict] = None) -> list:
        """Adam (AdamW), or adamw's parameter groups where weight decay excludes some; the fast path's fused_adamw;
        polynomial decay after warm-up; the settings' flags of it, ``given`` ({flag: value}) in place of some."""
        v = self.v
        name = "adam" if v["WEIGHT_DECAY_EXCLUDE"] == "none" else "adamw"
        return ["--optimizer", "fused_adamw" if v["FAST_PATH"] == "1" else name, "--lr-scheduler", "polynomial_decay",
                *flags(v, "optimizer", given)]

    def masking(self) -> list:
        return ["--sample-break-mode", "complete_doc", *flags(self.v, "masking")]

    def mlm_task(self, *more: object) -> list:
        """document_mlm with its accuracy-logging criterion and the settings' masking (and more task flags)."""
        return ["--user-dir", self.repo / "biofairseq", "--task", "document_mlm", "--criterion", "masked_lm_accuracy",
                *self.masking(), *more]

    def model_flags(self, *more: object) -> list:
        return [*flags(self.v, "model"), *more]

    # ---- 1-3. corpus, vocabulary (or INIT_FROM's), data-bin

    def corpus(self, vocab_type: str, from_hf: Sequence = (), to_hf: Sequence = ()) -> Data:
        """Stages 1-3 of a recipe with one vocabulary: learned, or INIT_FROM's (from_hf, to_hf: more flags of its
        conversion). Returns the Data."""
        self.clean()
        data = self.extend_vocabulary(self.init_from(from_hf, to_hf)) if self.v.get("INIT_FROM") else \
            self.vocabulary(vocab_type)
        self.binarize(data)
        return data

    def clean(self) -> None:
        v = self.v
        self.script.stage("clean", 1, "clean the sources", self.clean_dir, self.clean_dir / "stats.json")
        args = ["--output-dir", self.clean_dir, *flags(v, "clean")]
        if v["CORPUS_LAUNCHER"] != "local":  # every cleaning stage as job arrays: WORKERS tasks at a time
            args += flags(v, "clean_slurm")
        for source in v["SOURCES"].split():
            args += ["--source", source]
        self.script.command(*self.py(self.repo / "preprocess" / "clean_corpus.py", *args))

    def vocabulary(self, vocab_type: str, name: str = "", size: Optional[str] = None) -> Data:
        """A vocabulary learned from the corpus (of size entries: the settings' by default); name: one of several,
        in vocab/NAME and data-bin/NAME."""
        data = Data(self.run_dir / "vocab" / name, self.run_dir / "data-bin" / name, name) if name else \
            Data(self.run_dir / "vocab", self.run_dir / "data-bin")
        given = {"--vocab-size": size} if size else None
        entries = flag_values(self.v, "vocabulary", given)["--vocab-size"]
        self.script.stage("vocabulary", 2, f"learn the vocabulary ({vocab_type}, {entries} entries)", data.vocab)
        self.script.command(*self.py(self.repo / "preprocess" / "train_vocab.py", "--input", self.clean_dir / "train.txt",
                                     "--type", vocab_type, "--output-dir", data.vocab, *flags(self.v, "vocabulary", given)))
        return data

    def binarize(self, data: Data) -> None:
        self.script.stage("binarize", 3, "encode and binarize", data.data_bin)
        self.script.command("bash", self.repo / "preprocess" / "binarize.sh", self.clean_dir, data.vocab, data.data_bin,
                            self.v["WORKERS"], self.v["SHARD_MB"])

    def init_from(self, from_hf: Sequence = (), to_hf: Sequence = ()) -> Data:
        """Continual pretraining: INIT_FROM's weights and vocabulary in fairseq's format (biofairseq-convert from-hf,
        parity-checked), in place of a vocabulary learned on the corpus; its model's shape and weights go to
        biofairseq-train through --init-from."""
        init, folder = self.v["INIT_FROM"], self.run_dir / "init"
        self.script.stage("vocabulary", 2, f"take the weights and the vocabulary of INIT_FROM={init}", folder)
        if init.endswith(".pt"):
            hf = self.run_dir / "init.hf"
            self.script.command("rm", "-rf", hf)
            self.script.command("biofairseq-convert", "to-hf", init, hf, *to_hf)
            self.script.command("biofairseq-convert", "from-hf", hf, folder, *from_hf)
            self.script.command("rm", "-rf", hf)
        else:
            self.script.command("biofairseq-convert", "from-hf", init, folder, *from_hf)
        return Data(folder, self.run_dir / "data-bin", init=folder)

    def extend_vocabulary(self, data: Data) -> Data:
        """VOCAB_EXTEND new tokens for INIT_FROM's vocabulary from the cleaned training text, each initialised from its
        pieces (biofairseq-convert extend-vocab): the Data continuing the extended model; ``data`` where there are none."""
        size = self.v.get("VOCAB_EXTEND") or "0"
        if not int(size):
            return data
        folder = self.run_dir / "init_extended"
        self.script.stage("vocabulary", "2b", f"extend INIT_FROM's vocabulary by up to {int(size):,} words of the "
                          "training text", folder)
        self.script.command("biofairseq-convert", "extend-vocab", data.init, folder, "--text", self.clean_dir / "train.txt",
                            "--size", size, "--valid", self.clean_dir / "valid.txt")
        return Data(folder, data.data_bin, data.name, init=folder, extends=data.vocab)

    def breakout(self, datas: Sequence[Data]) -> list:
        """Each vocabulary's entity break-out rate on each NER training set (BioMegatron's Table 3), for the report:
        its arguments. An extended vocabulary is measured beside the one it extended."""
        vocabs = []
        for data in datas:
            if data.extends:
                vocabs.append(f"original={data.extends}")
            vocabs.append(f"{'extended' if data.extends else data.name or 'vocabulary'}={data.vocab}")
        args = []
        for name, train, _, _ in self.run.ner_sets:
            out = self.run_dir / "breakout" / name
            self.script.stage("ner", "3b", f"entity break-out rates of the vocabularies on {name}", f"{out}.json")
            self.script.mkdir(self.run_dir / "breakout")
            self.script.command(*self.py(self.repo / "preprocess" / "vocab_stats.py", "--vocab", *vocabs, "--ner", train,
                                         *flags(self.v, "breakout"), "--output", out))
            args += ["--breakout", f"{name}={out}.json"]
        return args

    # ---- 4. pretrain with biofairseq-train, in one or two length phases

    def pretrain_dir(self, model: Model) -> Path:
        return self.run_dir / "pretrain" / model.name if model.name else self.run_dir / "pretrain"

    def hf_dir(self, model: Model) -> Path:
        return self.run_dir / "hf" / (model.name or self.run.recipe)

    def kept_checkpoint(self, model: Model) -> Path:
        return self.pretrain_dir(model) / "checkpoints" / f"checkpoint_{model.keep}.pt"

    def launch(self) -> list:
        """srun (one task a machine, which starts one process a GPU) where NUM_NODES asks for several machines."""
        v = self.v
        if int(v["NUM_NODES"]) <= 1 or v["NUM_GPUS"] == "0":
            return []
        # fairseq's launcher reads Slurm's variables (and runs scontrol); the task gets the machine's cores (srun does
        # not inherit sbatch's --cpus-per-task since Slurm 22.05), and one failing machine stops them all
        return ["srun", "--nodes", v["NUM_NODES"], "--ntasks-per-node", "1", "--gpus-per-node", v["NUM_GPUS"],
                "--cpus-per-task", v["WORKERS"], "--kill-on-bad-exit", "1"]

    def hardware(self) -> list:
        v = self.v
        if v["NUM_GPUS"] == "0":
            return ["--cpu"]
        args = ["--fp16"] if v["PRECISION"] == "fp16" else ["--amp-bf16"]  # fairseq 0.12.3's own --bf16 means a TPU
        if args == ["--fp16"] and v["WEIGHT_DECAY_EXCLUDE"] != "none":
            args.append("--fp16-no-flatten-grads")  # fp16's one flat fp32 copy cannot tell LayerNorms and biases apart
        args += ["--distributed-world-size", v["DEVICES"]]
        if int(v["NUM_NODES"]) > 1:
            args += ["--distributed-port", v["DISTRIBUTED_PORT"]]
        return args

    def train(self, model: Model, data: Data, until: str, updates: str, extra: Sequence = (), second: bool = False,
              folder: Optional[Path] = None, optim: Optional[Sequence] = None, given: Optional[dict] = None) -> None:
        """The biofairseq-train command of a length phase (second: the second's lengths and batch) up to update
        ``until`` of a schedule of ``updates``, in folder (default: the model's pretrain folder) with optim's flags
        (default: the model's); given: {flag: value} of the run's training flags in place of the settings'."""
        v, folder = self.v, folder or self.pretrain_dir(model)
        shape = ["--init-from", str(data.init)] if data.init else ["--arch", model.arch]
        fast = [*model.sdpa, "--pack-documents"] if v["FAST_PATH"] == "1" else []  # same weights, other kernels
        self.script.command(
            *self.launch(), "biofairseq-train", data.data_bin, *model.task, *shape, *model.flags, *fast,
            *(optim or model.optim), "--total-num-update", updates, "--max-update", until,
            *flags(v, "length2" if second else "length"), "--update-freq", v["PHASE2_UPDATE_FREQ" if second else "UPDATE_FREQ"],
            "--save-dir", folder / "checkpoints", "--no-epoch-checkpoints", "--best-checkpoint-metric", model.best_metric,
            "--log-format", "json", "--log-file", folder / "train.log", "--tensorboard-logdir", folder / "tensorboard",
            *flags(v, "train", given), *self.hardware(), *extra)

    def pretrain(self, model: Model, data: Data, updates: Optional[str] = None, extra: Sequence = ()) -> None:
        """UPDATES (default MAX_UPDATE) updates of the model; extra flags go to biofairseq-train. Two length phases
        where PHASE2_SHARE is above 0: phase 2 continues phase 1's checkpoint (--new-phase-at), its optimizer state and
        one learning-rate schedule over MAX_UPDATE."""
        v, s, folder = self.v, self.script, self.pretrain_dir(model)
        if self.stop_after == "binarize":  # the corpus stages as a CPU job; pretraining in another, on the GPUs
            s.stop(f"{self.run.recipe}.sh: STOP_AFTER=binarize: stopped after the corpus stages [elapsed]; run again "
                   "without it to pretrain")
            return
        updates = str(updates or v["MAX_UPDATE"])
        named = f"{model.name}, " if model.name else ""
        title = f"continue {named}{init_description(v['INIT_FROM'])}" if data.init else f"pretrain {named}{model.arch}"
        s.stage("pretrain", 4, title, folder, folder / "finished")
        s.mkdir(folder)
        if not data.init:
            s.write(folder / "arch", model.arch)  # for the report
        if self.head_warmup(model, data):
            extra = [*extra, "--finetune-from-model", self.head_checkpoint(model)]
        if v.get("CONTINUE_EPOCHS") and data.init:
            extra = [*extra, "--fit-epochs", v["CONTINUE_EPOCHS"]]
            s.note(f"at most {int(updates):,} updates, fewer where {v['CONTINUE_EPOCHS']} passes over the training text "
                   "take fewer (CONTINUE_EPOCHS; biofairseq-train --fit-epochs)")
        if v["PHASE2_SHARE"] == "0":
            self.train(model, data, updates, updates, extra)
        else:
            phase1 = v["PHASE1_UPDATES"]
            s.note(f"phase 1: updates 1-{phase1} at {v['TOKENS_PER_SAMPLE']} tokens")
            self.train(model, data, phase1, updates, extra)
            s.note(f"phase 2: updates {int(phase1) + 1}-{updates} at {v['PHASE2_TOKENS_PER_SAMPLE']} tokens, "
                   f"{v['PHASE2_SEQUENCES_PER_UPDATE']} sequences per update; optimizer and learning-rate schedule "
                   "continue")
            self.train(model, data, updates, updates, [*extra, "--new-phase-at", phase1], second=True)
        s.mark(folder / "finished")

    def head_checkpoint(self, model: Model) -> Path:
        return self.pretrain_dir(model) / "head" / "checkpoints" / "checkpoint_last.pt"

    def head_warmup(self, model: Model, data: Data) -> bool:
        """HEAD_WARMUP_UPDATES of INIT_FROM's LM head alone (document_mlm --lm-head-only), the encoder held fixed,
        before the whole model trains from its last checkpoint; whether there are any."""
        updates = self.v.get("HEAD_WARMUP_UPDATES", "0")
        if updates == "0" or not data.init:
            return False
        folder, head = self.pretrain_dir(model) / "head", flag_values(self.v, "head")
        self.script.mkdir(folder)
        self.script.note(f"the LM head first: {int(updates):,} updates of the head alone at a peak learning rate of "
                         f"{head['--lr']}, the encoder held fixed (HEAD_WARMUP_UPDATES), then the whole model")
        warmup = str(max(1, round(int(updates) * 6 / 100)))
        # its checkpoint at its end (the original encoder with a trained head, which original_check measures); its
        # end-of-epoch validations in head/train.log show whether the head has levelled off
        self.train(model, data, updates, updates, ["--lm-head-only"], folder=folder,
                   optim=self.optimizer({**head, "--warmup-updates": warmup}), given={"--save-interval-updates": updates})
        return True

    # ---- 5-6. the checkpoint to keep, checked; transformers; baselines

    def pick_checkpoint(self, model: Model, data: Data) -> None:
        """The checkpoint to keep, and whether it is clearly better than word frequencies (one process: importing
        fairseq is most of the time of either step). A check that stops the run leaves no check.json behind."""
        p = self.pretrain_dir(model)
        self.script.stage("pretrain", 5, f"pick the checkpoint ({model.keep}), check it against word frequencies and for a "
                          "collapsed last layer", p / "check.json")
        args = ["-m", "biofairseq.recipe.best_checkpoint", p / "checkpoints", p / "train.log", "--keep", model.keep,
                "--output", p / "best.json", "--check", data.data_bin, "--check-output", p / "check.json"]
        self.script.command(*self.py(*args, *(["--go-on"] if self.v["WEAK_PRETRAINING"] == "continue" else [])))
        self.original(model, data)

    def original(self, model: Model, data: Data) -> None:
        """A continued masked LM's original, validated as the kept checkpoint was (biofairseq.recipe.original_check):
        INIT_FROM's weights, or, after a head warm-up, the original encoder with its warmed head."""
        if not data.init or "document_mlm" not in map(str, model.task):
            return
        p, warmed = self.pretrain_dir(model), self.v.get("HEAD_WARMUP_UPDATES", "0")
        head = self.head_checkpoint(model) if warmed != "0" else None
        self.script.stage("pretrain", "5b", "validate the original model as the continued one, on the same held-out "
                          "documents", p / "original.json")
        self.script.command(*self.py("-m", "biofairseq.recipe.original_check", head or data.init / "model.pt",
                                     self.kept_checkpoint(model), data.data_bin, "--output", p / "original.json",
                                     "--head-warmup", warmed if head else "0"))

    def convert(self, model: Model, *extra: str) -> Path:
        """The kept checkpoint as a transformers folder: its path."""
        hf = self.hf_dir(model)
        self.script.stage("convert", 6, f"convert {model.name + ' ' if model.name else ''}to transformers", hf)
        self.script.command("biofairseq-convert", "to-hf", self.kept_checkpoint(model), hf, *flags(self.v, "to-hf"), *extra)
        return hf

    def baseline(self, hf: Path, to_hf: Sequence = ()) -> list:
        """BASELINE: random-init (a randomly initialised copy of the model in hf) and/or original (INIT_FROM's model as
        it was given; to_hf: more flags of its conversion from a .pt), each fine-tuned beside it: their folders."""
        kinds, init, models = self.v["BASELINE"].split(), self.v.get("INIT_FROM", ""), []
        if "random-init" in kinds:
            out = self.run_dir / "hf" / "random_init"
            self.script.stage("convert", "6b", f"a randomly initialised copy of {hf.name}, as a baseline", out)
            self.script.command(*self.py("-m", "biofairseq.recipe.random_init", hf, out))
            models.append(out)
        if "original" in kinds:
            out = self.run_dir / "hf" / "original"
            self.script.stage("convert", "6c", "INIT_FROM's model as it was given, as a baseline", out)
            if init.endswith(".pt"):
                self.script.command("biofairseq-convert", "to-hf", init, out, *to_hf)
            else:
                self.script.command("ln", "-s", init, out)  # fine-tuned as the folder holds it
            models.append(out)
        return models

    # ---- 7-8. NER sweeps, the report

    def ner(self, models: Sequence[Path]) -> list:
        """The learning-rate x seed sweep of each data set and model (transformers folders); NER_LABELLINGS
        "whole-word sub-token" fine-tunes each model both ways (BioMegatron's comparison). Returns the report's
        arguments."""
        v, report = self.v, []
        labellings = v.get("NER_LABELLINGS", "").split() or ["default"]
        sweep_flags = [*flags(v, "ner"), *(flags(v, "ner_gpu") if v["NUM_GPUS"] != "0" else [])]
        for name, train, dev, test in self.run.ner_sets:
            for model in models:
                for labelling in labellings:
                    sweep = self.run_dir / "ner" / name / f"model={model.name}"
                    if labelling != "default":
                        sweep = sweep.with_name(f"{sweep.name},labels={labelling}")
                    report += ["--ner", f"{name}={sweep}"]
                    # a sweep of another model (pretrained again since), one whose report was cut short, or one of
                    # another grid runs again, keeping its finished runs
                    self.script.check(*self.py("-m", "biofairseq.finetune.fingerprint", "check-sweep", sweep, model,
                                               v["NER_LRS"], v["NER_SEEDS"]))
                    how = f", {labelling} labelling" if v.get("NER_LABELLINGS") else ""
                    self.script.stage("ner", 7, f"fine-tune {model.name} on {name}{how}", sweep, sweep / "report.json")
                    args = ["--model", model, "--train", train, "--dev", dev, *(["--test", test] if test else []),
                            "--output-dir", sweep, *sweep_flags]
                    args += {"whole-word": ["--label-scheme", "first-subtoken"],
                             "sub-token": ["--label-scheme", "all-subtokens"]}.get(labelling, [])
                    self.script.command("biofairseq-ner", "sweep", *args, *shlex.split(v["NER_EXTRA"]))  # as kinds checks it
        return report

    def report(self, ner_args: Sequence, datas: Sequence[Data] = (), breakouts: Sequence = (),
               pretrained: Sequence[Model] = ()) -> None:
        """The report: the NER sweeps (ner's arguments), the named vocabularies' data-bins, their break-out rates,
        the named models' pretraining folders (Models)."""
        report, s = self.run_dir / "report.md", self.script
        s.stale(report)  # a stage ran: the report is out of date
        s.stage("report", 8, "write the report", report)
        data_bins = [a for data in datas for a in ("--data-bin", f"{data.name}={data.data_bin}")]
        models = [a for model in pretrained for a in ("--pretrain", f"{model.name}={self.pretrain_dir(model)}")]
        s.command(*self.py("-m", "biofairseq.recipe.report", self.run_dir, *data_bins, *breakouts, *models, *ner_args))
        s.show(report)
        s.say(f"{self.run.recipe}.sh: done [elapsed]; the report is {report} (and .json, .png)")

    def finish(self, model: Model, data: Data, convert_flags: Sequence = (), to_hf: Sequence = (),
               breakouts: Sequence = ()) -> None:
        """Stages 5-8 of a recipe with one model; breakouts: the report's arguments of ``breakout``."""
        self.pick_checkpoint(model, data)
        hf = self.convert(model, *convert_flags)
        self.report(self.ner([hf, *self.baseline(hf, to_hf)]), breakouts=breakouts)
