"""A recipe's stages as finished commands, built once from the settings: bash runs them (recipes/lib/stages.sh reads
them as NUL-separated records, so no value is parsed twice), and STOP_AFTER=settings prints them as a script.

Every command is fixed before any stage runs: what a later stage needs of an earlier one's files is read by the tool
that needs it (biofairseq-train reads a data-bin's shards and vocabulary, a from-hf folder's shape, where its
checkpoints stand: biofairseq.train_inputs), so the script a preview prints is the run.

The stage builders (clean, vocabulary, ..., report) are the steps every recipe is made of, in the order
biofairseq.recipe.recipes calls them; each adds records:

    say MESSAGE            a line on stderr ([elapsed] becomes the time so far)
    remove PATH            FORCE: an earlier run's output, removed before the first stage
    check ARGV             a command run quietly before the next stage's skip test (it may remove that stage's output)
    stage N TITLE OUT DONE a stage: skipped where DONE exists; the records up to the next stage are its own
    run ARGV               a command of the stage, printed, then run
    note MESSAGE           a line of the stage, said where it runs
    mkdir PATH, write PATH LINE, mark PATH (the date)   files of the stage
    stale PATH             removed where any stage ran (the report)
    show PATH              printed on stdout
    stop MESSAGE           the run ends here (STOP_AFTER=binarize)

biofairseq.recipe.settings adds the first say (the run's devices) and, for STOP_AFTER=settings, ``out TEXT`` (printed
on stdout as it is: the script) and an empty stop.
"""

import shlex
from dataclasses import dataclass, field
from pathlib import Path

from biofairseq.recipe.commands import ner_sweep_args


def init_description(init):
    """INIT_FROM as a stage title names it: the folder (or checkpoint) and, from its config.json, its class and shape."""
    import json

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


class Plan:
    def __init__(self, run, stop_after=None):
        v = self.v = run.values
        self.run, self.records, self.stopped, self.stages = run, [], False, []
        self.stop_after = v["STOP_AFTER"] if stop_after is None else stop_after
        self.repo, self.run_dir = Path(v["REPO"]), Path(v["RUN_DIR"])
        self.clean_dir, self.vocab, self.data_bin = self.run_dir / "clean", self.run_dir / "vocab", self.run_dir / "data-bin"
        self.model_name, self.pretrain_dir, self.hf_model = "", self.run_dir / "pretrain", self.run_dir / "hf" / run.recipe
        self.models, self.pretrained, self.vocab_names, self.breakout_args, self.report_args = [], [], [], [], []
        self.arch, self.init_dir = v.get("ARCH", ""), None  # init_dir: INIT_FROM converted (--init-from)
        self.task_args, self.model_args, self.optim_args = [], [], []
        self.init_args, self.init_to_hf_args = [], []  # more from-hf flags (an ELECTRA's), and to-hf's for a .pt
        self.keep, self.best_metric = "best", "ppl"  # the checkpoint kept, and fairseq's best by the lowest metric
        self.sdpa = ["--attention", "sdpa"]  # what the fast path adds to choose SDPA (ModernBERT: [])
        for path in run.force_remove:
            self.add("remove", str(self.run_dir / path))

    # ---- records

    def add(self, kind, *words):
        if not self.stopped:
            self.records.append([kind, *map(str, words)])

    def stage(self, forced, number, title, output, done=None):
        """A stage whose outputs FORCE=forced (a key of table.FORCED) removes with the later stages'."""
        self.stages.append((forced, str(number), Path(output)))
        self.add("stage", number, title, output, done or output)

    def command(self, *argv, kind="run"):
        self.add(kind, len(argv), *argv)

    def py(self, *argv):
        return [self.run.python, *map(str, argv)]

    # ---- settings that several stages read

    def optimizer_args(self):
        """fairseq's adam (AdamW) on every parameter; with WEIGHT_DECAY_EXCLUDE, adamw's parameter groups; the fast
        path's fused_adamw."""
        v = self.v
        args = ["--optimizer", "adam"] if v["WEIGHT_DECAY_EXCLUDE"] == "none" else \
            ["--optimizer", "adamw", "--weight-decay-exclude", v["WEIGHT_DECAY_EXCLUDE"]]
        if v["FAST_PATH"] == "1":
            args[1] = "fused_adamw"
        return args

    def adam_args(self, lr=None, warmup=None):
        """The recipes' optimizer: Adam(W) with the settings' betas, eps, decay and clipping, polynomial decay from
        lr (default PEAK_LR) after warmup updates (default WARMUP_UPDATES)."""
        v = self.v
        return [*self.optimizer_args(), "--adam-betas", v["ADAM_BETAS"], "--adam-eps", v["ADAM_EPS"],
                "--weight-decay", v["WEIGHT_DECAY"], "--clip-norm", v["CLIP_NORM"], "--lr", lr or v["PEAK_LR"],
                "--lr-scheduler", "polynomial_decay", "--warmup-updates", warmup or v["WARMUP_UPDATES"]]

    def masking_args(self, random_token=True):
        v = self.v
        args = ["--sample-break-mode", "complete_doc", "--mask-prob", v["MASK_PROB"],
                "--leave-unmasked-prob", v["LEAVE_UNMASKED_PROB"]]
        return args + (["--random-token-prob", v["RANDOM_TOKEN_PROB"]] if random_token else [])

    def mlm_task_args(self, *more):
        """document_mlm with its accuracy-logging criterion and the settings' masking (and more task flags)."""
        return ["--user-dir", self.repo / "biofairseq", "--task", "document_mlm", "--criterion", "masked_lm_accuracy",
                *self.masking_args(), *more]

    def arch_args(self):
        """The model's shape: the recipe's ARCH, or INIT_FROM's (biofairseq-train --init-from)."""
        return ["--init-from", str(self.init_dir)] if self.init_dir else ["--arch", self.arch]

    def dropout_args(self):
        return ["--dropout", self.v["DROPOUT"], "--attention-dropout", self.v["ATTENTION_DROPOUT"]]

    # ---- 1-3. corpus, vocabulary (or INIT_FROM's), data-bin

    def corpus(self, vocab_type):
        """Stages 1-3 of a recipe with one vocabulary."""
        self.clean()
        if self.v.get("INIT_FROM"):
            self.init_from()
        else:
            self.vocabulary(vocab_type, self.v["VOCAB_SIZE"])
        self.binarize()

    def clean(self):
        v = self.v
        self.stage("clean", 1, "clean the sources", self.clean_dir, self.clean_dir / "stats.json")
        args = ["--output-dir", self.clean_dir, "--lang", v["CORPUS_LANG"], "--valid-docs", v["VALID_DOCS"],
                "--workers", v["WORKERS"], "--text-docs", v["TEXT_DOCS"], "--text-field", v["TEXT_FIELD"]]
        if v["CORPUS_LAUNCHER"] != "local":  # every cleaning stage as job arrays: WORKERS tasks at a time
            args += ["--launcher", v["CORPUS_LAUNCHER"], "--slurm-time", v["CORPUS_SLURM_TIME"]]
            args += ["--slurm-partition", v["CORPUS_SLURM_PARTITION"]] if v["CORPUS_SLURM_PARTITION"] else []
            args += ["--slurm-mem-gb", v["CORPUS_SLURM_MEM_GB"]] if v["CORPUS_SLURM_MEM_GB"] else []
        for source in v["SOURCES"].split():
            args += ["--source", source]
        self.command(*self.py(self.repo / "preprocess" / "clean_corpus.py", *args))

    def data(self, name):
        """A run with several vocabularies: stages 2-4 of NAME use vocab/NAME and data-bin/NAME."""
        self.vocab, self.data_bin = self.run_dir / "vocab" / name, self.run_dir / "data-bin" / name
        if name not in self.vocab_names:
            self.vocab_names.append(name)  # the report's vocabularies, in this order

    def vocabulary(self, vocab_type, size):
        self.stage("vocabulary", 2, f"learn the vocabulary ({vocab_type}, {size} entries)", self.vocab)
        self.command(*self.py(self.repo / "preprocess" / "train_vocab.py", "--input", self.clean_dir / "train.txt",
                              "--type", vocab_type, "--vocab-size", size, "--output-dir", self.vocab,
                              "--workers", self.v["WORKERS"]))

    def binarize(self):
        self.stage("binarize", 3, "encode and binarize", self.data_bin)
        self.command("bash", self.repo / "preprocess" / "binarize.sh", self.clean_dir, self.vocab, self.data_bin,
                     self.v["WORKERS"], self.v["SHARD_MB"])

    def init_from(self):
        """Continual pretraining: INIT_FROM's weights and vocabulary in fairseq's format (biofairseq-convert from-hf,
        parity-checked), in place of a vocabulary learned on the corpus; its model's shape and weights go to
        biofairseq-train through --init-from."""
        init = self.v["INIT_FROM"]
        self.vocab = self.init_dir = self.run_dir / "init"
        self.arch = ""  # INIT_FROM's shape, not the preset's ARCH
        self.stage("vocabulary", 2, f"take the weights and the vocabulary of INIT_FROM={init}", self.vocab)
        if init.endswith(".pt"):
            hf = self.run_dir / "init.hf"
            self.command("rm", "-rf", hf)
            self.command("biofairseq-convert", "to-hf", init, hf, *self.init_to_hf_args)
            self.command("biofairseq-convert", "from-hf", hf, self.vocab, *self.init_args)
            self.command("rm", "-rf", hf)
        else:
            self.command("biofairseq-convert", "from-hf", init, self.vocab, *self.init_args)

    def breakout(self):
        """Each vocabulary's entity break-out rate on each NER training set (BioMegatron's Table 3), for the report."""
        vocabs = [f"{name}={self.run_dir / 'vocab' / name}" for name in self.vocab_names] or [f"vocabulary={self.vocab}"]
        for name, train, _, _ in self.run.ner_sets:
            out = self.run_dir / "breakout" / name
            self.stage("ner", "3b", f"entity break-out rates of the vocabularies on {name}", f"{out}.json")
            self.add("mkdir", self.run_dir / "breakout")
            self.command(*self.py(self.repo / "preprocess" / "vocab_stats.py", "--vocab", *vocabs, "--ner", train,
                                  "--lang", self.v["CORPUS_LANG"], "--output", out))
            self.breakout_args += ["--breakout", f"{name}={out}.json"]

    # ---- 4. pretrain with biofairseq-train, in one or two length phases

    def model(self, name):
        """Stages 4-6 of model NAME, in pretrain/NAME and hf/NAME."""
        self.model_name, self.pretrain_dir, self.hf_model = name, self.run_dir / "pretrain" / name, self.run_dir / "hf" / name

    def launch(self):
        """srun (one task a machine, which starts one process a GPU) where NUM_NODES asks for several machines."""
        v = self.v
        if int(v["NUM_NODES"]) <= 1 or v["NUM_GPUS"] == "0":
            return []
        # fairseq's launcher reads Slurm's variables (and runs scontrol); the task gets the machine's cores (srun does
        # not inherit sbatch's --cpus-per-task since Slurm 22.05), and one failing machine stops them all
        return ["srun", "--nodes", v["NUM_NODES"], "--ntasks-per-node", "1", "--gpus-per-node", v["NUM_GPUS"],
                "--cpus-per-task", v["WORKERS"], "--kill-on-bad-exit", "1"]

    def hardware_args(self):
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

    def train_command(self, phase, until, updates, extra, folder=None, optim=None, save_every=None):
        """The biofairseq-train command of a length phase (phase: "" or "PHASE2_", its settings' prefix), in folder
        (default: the model's pretrain folder) with optim's flags (default: the recipe's), a checkpoint every
        save_every updates (default: SAVE_INTERVAL_UPDATES)."""
        v, folder = self.v, folder or self.pretrain_dir
        save = folder / "checkpoints"
        tokens, batch, freq = v[f"{phase}TOKENS_PER_SAMPLE"], v[f"{phase}BATCH_PER_DEVICE"], v[f"{phase}UPDATE_FREQ"]
        fast = []
        if v["FAST_PATH"] == "1":  # same weights and schedule, other kernels; several documents per row
            fast = [*self.sdpa, "--pack-documents"]
        if v["COMPILE"] != "none":
            fast += ["--compile", v["COMPILE"]]
        checkpoints = ["--save-dir", save, "--save-interval-updates", save_every or v["SAVE_INTERVAL_UPDATES"],
                       "--keep-interval-updates", v["KEEP_INTERVAL_UPDATES"], "--no-epoch-checkpoints",
                       "--best-checkpoint-metric", self.best_metric]
        logs = ["--log-format", "json", "--log-interval", v["LOG_INTERVAL"], "--log-file", folder / "train.log",
                "--tensorboard-logdir", folder / "tensorboard", "--seed", v["SEED"]]
        self.command(*self.launch(), "biofairseq-train", self.data_bin, *self.task_args, "--tokens-per-sample", tokens,
                     *self.model_args, *fast, *(optim or self.optim_args), "--total-num-update", updates, "--max-update", until,
                     "--batch-size", batch, "--update-freq", freq, "--num-workers", v["DATA_WORKERS"], *checkpoints, *logs,
                     *self.hardware_args(), *extra)

    def pretrain(self, updates=None, extra=()):
        """UPDATES (default MAX_UPDATE) updates of the model the recipe's task, model and optimizer flags describe;
        extra flags go to biofairseq-train. Two length phases where PHASE2_SHARE is above 0: phase 2 continues phase
        1's checkpoint (--new-phase-at), its optimizer state and one learning-rate schedule over MAX_UPDATE."""
        v = self.v
        if self.stop_after == "binarize":  # the corpus stages as a CPU job; pretraining in another, on the GPUs
            self.add("stop", f"{self.run.recipe}.sh: STOP_AFTER=binarize: stopped after the corpus stages [elapsed]; run "
                             "again without it to pretrain")
            self.stopped = True
            return
        updates = str(updates or v["MAX_UPDATE"])
        named = f"{self.model_name}, " if self.model_name else ""
        title = f"pretrain {named}{self.arch}" if self.arch else f"continue {named}{init_description(v['INIT_FROM'])}"
        self.stage("pretrain", 4, title, self.pretrain_dir, self.pretrain_dir / "finished")
        self.add("mkdir", self.pretrain_dir)
        if self.arch:
            self.add("write", self.pretrain_dir / "arch", self.arch)  # for the report
        if self.head_warmup():
            extra = [*extra, "--finetune-from-model", self.head_checkpoint()]
        if v.get("CONTINUE_EPOCHS") and self.init_dir:
            extra = [*extra, "--fit-epochs", v["CONTINUE_EPOCHS"]]
            self.add("note", f"at most {int(updates):,} updates, fewer where {v['CONTINUE_EPOCHS']} passes over the "
                             "training text take fewer (CONTINUE_EPOCHS; biofairseq-train --fit-epochs)")
        if v["PHASE2_SHARE"] == "0":
            self.train_command("", updates, updates, extra)
        else:
            phase1 = v["PHASE1_UPDATES"]
            self.add("note", f"phase 1: updates 1-{phase1} at {v['TOKENS_PER_SAMPLE']} tokens")
            self.train_command("", phase1, updates, extra)
            self.add("note", f"phase 2: updates {int(phase1) + 1}-{updates} at {v['PHASE2_TOKENS_PER_SAMPLE']} tokens, "
                             f"{v['PHASE2_SEQUENCES_PER_UPDATE']} sequences per update; optimizer and learning-rate "
                             "schedule continue")
            self.train_command("PHASE2_", updates, updates, [*extra, "--new-phase-at", phase1])
        self.add("mark", self.pretrain_dir / "finished")

    def head_checkpoint(self):
        return self.pretrain_dir / "head" / "checkpoints" / "checkpoint_last.pt"

    def head_warmup(self):
        """HEAD_WARMUP_UPDATES of INIT_FROM's LM head alone (document_mlm --lm-head-only), the encoder held fixed,
        before the whole model trains from its last checkpoint; whether there are any."""
        v = self.v
        updates = v.get("HEAD_WARMUP_UPDATES", "0")
        if updates == "0" or not self.init_dir:
            return False
        folder = self.pretrain_dir / "head"
        self.add("mkdir", folder)
        self.add("note", f"the LM head first: {int(updates):,} updates of the head alone at a peak learning rate of "
                         f"{v['HEAD_WARMUP_LR']}, the encoder held fixed (HEAD_WARMUP_UPDATES), then the whole model")
        warmup = str(max(1, round(int(updates) * 6 / 100)))
        # its checkpoint at its end (the original encoder with a trained head, which original_check measures); its
        # end-of-epoch validations in head/train.log show whether the head has levelled off
        self.train_command("", updates, updates, ["--lm-head-only"], folder, self.adam_args(v["HEAD_WARMUP_LR"], warmup),
                           save_every=updates)
        return True

    # ---- 5-6. the checkpoint to keep, checked; transformers; baselines

    def kept_checkpoint(self, pretrain_dir=None):
        return (pretrain_dir or self.pretrain_dir) / "checkpoints" / f"checkpoint_{self.keep}.pt"

    def pick(self):
        """The checkpoint to keep, and whether it is clearly better than word frequencies (one process: importing
        fairseq is most of the time of either step). A check that stops the run leaves no check.json behind."""
        p = self.pretrain_dir
        self.stage("pretrain", 5, f"pick the checkpoint ({self.keep}), check it against word frequencies and for a collapsed last "
                      "layer", p / "check.json")
        args = ["-m", "biofairseq.recipe.best_checkpoint", p / "checkpoints", p / "train.log", "--keep", self.keep,
                "--output", p / "best.json", "--check", self.data_bin, "--check-output", p / "check.json"]
        self.command(*self.py(*args, *(["--go-on"] if self.v["WEAK_PRETRAINING"] == "continue" else [])))
        self.original()

    def original(self):
        """A continued masked LM's original, validated as the kept checkpoint was (biofairseq.recipe.original_check):
        INIT_FROM's weights, or, after a head warm-up, the original encoder with its warmed head."""
        if not self.init_dir or "document_mlm" not in map(str, self.task_args):
            return
        p, head = self.pretrain_dir, self.head_checkpoint() if self.v.get("HEAD_WARMUP_UPDATES", "0") != "0" else None
        self.stage("pretrain", "5b", "validate the original model as the continued one, on the same held-out documents",
                   p / "original.json")
        self.command(*self.py("-m", "biofairseq.recipe.original_check", head or self.init_dir / "model.pt",
                              self.kept_checkpoint(), self.data_bin, "--output", p / "original.json",
                              "--head-warmup", self.v["HEAD_WARMUP_UPDATES"] if head else "0"))

    def convert(self, *extra):
        self.stage("convert", 6, f"convert {self.model_name + ' ' if self.model_name else ''}to transformers", self.hf_model)
        self.command("biofairseq-convert", "to-hf", self.kept_checkpoint(), self.hf_model, "--language",
                     self.v["CORPUS_LANG"], *extra)
        self.models.append(self.hf_model)
        if self.model_name:
            self.pretrained += ["--pretrain", f"{self.model_name}={self.pretrain_dir}"]  # the report's, in this order

    def baseline(self):
        """BASELINE: random-init (a randomly initialised copy of the model converted last) and/or original (INIT_FROM's
        model as it was given), each fine-tuned beside it."""
        kinds, init = self.v["BASELINE"].split(), self.v.get("INIT_FROM", "")
        if "random-init" in kinds:
            out = self.run_dir / "hf" / "random_init"
            self.stage("convert", "6b", f"a randomly initialised copy of {self.hf_model.name}, as a baseline", out)
            self.command(*self.py("-m", "biofairseq.recipe.random_init", self.hf_model, out))
            self.models.append(out)
        if "original" in kinds:
            out = self.run_dir / "hf" / "original"
            self.stage("convert", "6c", "INIT_FROM's model as it was given, as a baseline", out)
            if init.endswith(".pt"):
                self.command("biofairseq-convert", "to-hf", init, out, *self.init_to_hf_args)
            else:
                self.command("ln", "-s", init, out)  # fine-tuned as the folder holds it
            self.models.append(out)

    # ---- 7-8. NER sweeps, the report

    def ner(self):
        """The learning-rate x seed sweep of each data set and model; NER_LABELLINGS "whole-word sub-token" fine-tunes
        each model both ways (BioMegatron's comparison)."""
        v = self.v
        labellings = v.get("NER_LABELLINGS", "").split() or ["default"]
        for name, train, dev, test in self.run.ner_sets:
            for model in self.models:
                for labelling in labellings:
                    sweep = self.run_dir / "ner" / name / f"model={model.name}"
                    if labelling != "default":
                        sweep = sweep.with_name(f"{sweep.name},labels={labelling}")
                    self.report_args += ["--ner", f"{name}={sweep}"]
                    # a sweep of another model (pretrained again since), one whose report was cut short, or one of
                    # another grid runs again, keeping its finished runs
                    self.command(*self.py("-m", "biofairseq.finetune.fingerprint", "check-sweep", sweep, model,
                                          v["NER_LRS"], v["NER_SEEDS"]), kind="check")
                    how = f", {labelling} labelling" if v.get("NER_LABELLINGS") else ""
                    self.stage("ner", 7, f"fine-tune {model.name} on {name}{how}", sweep, sweep / "report.json")
                    args = ["--model", model, "--train", train, "--dev", dev, *(["--test", test] if test else []),
                            "--output-dir", sweep, *ner_sweep_args(v)]
                    args += {"whole-word": ["--label-scheme", "first-subtoken"],
                             "sub-token": ["--label-scheme", "all-subtokens"]}.get(labelling, [])
                    self.command("biofairseq-ner", "sweep", *args, *shlex.split(v["NER_EXTRA"]))  # as kinds checks it

    def report(self):
        report = self.run_dir / "report.md"
        self.add("stale", report)  # a stage ran: the report is out of date
        self.stage("report", 8, "write the report", report)
        data_bins = [a for name in self.vocab_names for a in ("--data-bin", f"{name}={self.run_dir / 'data-bin' / name}")]
        self.command(*self.py("-m", "biofairseq.recipe.report", self.run_dir, *data_bins, *self.breakout_args,
                              *self.pretrained, *self.report_args))
        self.add("show", report)
        self.add("say", f"{self.run.recipe}.sh: done [elapsed]; the report is {report} (and .json, .png)")

    def finish(self, *convert_flags):
        """Stages 5-8 of a recipe with one model."""
        self.pick()
        self.convert(*convert_flags)
        self.baseline()
        self.ner()
        self.report()

    # ---- out

    def stream(self):
        """The records for recipes/lib/stages.sh, NUL-separated (run and check: the count of words, then the words)."""
        return "".join(word + "\0" for record in self.records for word in record)

    def script(self, header, recorded):
        """The commands as a plain bash script: recipe.env written (``recorded``: its text; the report reads it, and
        a recipe run afterwards compares its settings with it), then one command a line, in order, without the
        recipe's skipping of finished stages (each tool resumes what it finds)."""
        env = self.run_dir / "recipe.env"
        lines = ["#!/usr/bin/env bash", *(f"# {line}".replace("\n", "\\n") if line else "#" for line in header),
                 "set -euo pipefail", "",
                 f"# ---- the settings -> {env}", shlex.join(["mkdir", "-p", str(self.run_dir)]),
                 f"cat >{shlex.quote(str(env))} <<'RECIPE_ENV'", *recorded.splitlines(), "RECIPE_ENV"]
        checks = []  # a stage's check, printed under its title
        for kind, *words in self.records:
            if kind == "stage":
                lines += ["", f"# ---- {words[0]} {words[1]} -> {words[2]}".replace("\n", "\\n"), *checks]
                checks = []
            elif kind == "check":
                checks.append(shlex.join(words[1:]))
            elif kind == "run":
                lines.append(shlex.join(words[1:]))
            elif kind == "remove":
                lines.append(shlex.join(["rm", "-rf", words[0]]))
            elif kind == "mkdir":
                lines.append(shlex.join(["mkdir", "-p", words[0]]))
            elif kind == "write":
                lines.append(f"printf '%s\\n' {shlex.quote(words[1])} >{shlex.quote(words[0])}")
            elif kind == "mark":
                lines.append(f"date -Is >{shlex.quote(words[0])}")
            elif kind in ("note", "stop", "say"):
                lines.append(f"# {words[0].replace(' [elapsed]', '')}".replace("\n", "\\n"))
            elif kind == "show":
                lines.append(shlex.join(["cat", words[0]]))
            elif kind != "stale":  # the script writes the report anew
                raise ValueError(f"no script line for the record {kind}")
        return "\n".join(lines) + "\n"
