"""Each recipe's stages, on the shared builders of biofairseq.recipe.plan: its objective's flags and the order of its
models. The scripts in recipes/ run them (their headers say what each reproduces); the settings are in presets.py."""


def masked_lm(p, vocab_type, *task_flags, dropout=True):
    """One model pretrained with document-level masked LM from the corpus (or INIT_FROM), then stages 5-8."""
    p.corpus(vocab_type)
    p.task_args = p.mlm_task_args(*task_flags)
    p.model_args = [*p.arch_args(), *(p.dropout_args() if dropout else [])]
    p.optim_args = p.adam_args()
    p.pretrain()
    p.finish()


def bsc_bio_es(p):
    """Carrino et al. 2022: byte-level BPE, RoBERTa with document-level masked LM, the lowest validation perplexity."""
    masked_lm(p, "bytelevel-bpe")


def beto(p):
    """BETO (Cañete et al. 2020): SentencePiece, whole-word masking, two length phases; the final model kept."""
    p.keep = "last"
    masked_lm(p, "sentencepiece", "--mask-whole-words")


def bioelectra(p):
    """BioELECTRA (Kanakarajan et al. 2021): replaced-token detection; the final model kept, converted with its
    generator."""
    v = p.v
    p.keep, p.best_metric = "last", "loss"
    p.init_args = ["--generator-fraction", v["GENERATOR_FRACTION"]] if v["GENERATOR_FRACTION"] else []
    p.init_to_hf_args = ["--generator"]
    p.corpus(v["VOCAB_TYPE"])
    p.task_args = ["--user-dir", p.repo / "biofairseq", "--task", "electra", "--criterion", "electra",
                   "--discriminator-weight", v["DISCRIMINATOR_WEIGHT"], *p.masking_args(random_token=False)]
    p.model_args = [*p.arch_args(), "--sampling-temperature", v["SAMPLING_TEMPERATURE"],
                    "--sampling-temperature-final", v["SAMPLING_TEMPERATURE_FINAL"],
                    "--sampling-temperature-updates", v["MAX_UPDATE"], *p.dropout_args()]
    if not v["INIT_FROM"]:
        p.model_args += ["--embedding-sharing", v["EMBEDDING_SHARING"]]
        p.model_args += ["--generator-width-fraction", v["GENERATOR_FRACTION"]] if v["GENERATOR_FRACTION"] else []
    p.optim_args = p.adam_args()
    p.pretrain()
    p.finish("--generator")


def modernbert(p):
    """ModernBERT continued or from scratch: its attention is SDPA already, and it trains without dropout."""
    p.keep, p.sdpa = "last", []
    masked_lm(p, "bytelevel-bpe", dropout=False)


def biomegatron(p):
    """BioMegatron (Shin et al. 2020): a model per vocabulary (VOCABULARIES), their break-out rates on the NER sets,
    or one model continued from INIT_FROM."""
    v = p.v
    p.keep = "last"
    p.clean()
    names = [""]
    if v["INIT_FROM"]:
        p.init_from()
        p.binarize()
    else:
        names = []
        for vocabulary in v["VOCABULARIES"].split():  # bio_30k=30000 ...
            name, size = vocabulary.split("=", 1)
            p.data(name)
            p.vocabulary("sentencepiece", size)
            p.binarize()
            names.append(name)
    p.breakout()
    p.task_args = p.mlm_task_args()
    p.optim_args = p.adam_args()
    p.model_args = [*p.arch_args(), *p.dropout_args()]
    p.model_args += ["--checkpoint-activations"] if v["CHECKPOINT_ACTIVATIONS"] != "0" else []
    for name in names:
        if name:
            p.data(name)
        p.model(name or "continued")
        p.pretrain()
        p.pick()
        p.convert()
    p.baseline()
    p.ner()
    p.report()


def bio_lm(p):
    """Lewis et al. 2020's distillation study: base and large with masked LM, base distilled from large, and base
    trained as long again with masked LM alone; every model keeps its final checkpoint."""
    v = p.v
    p.keep = "last"
    p.corpus("bytelevel-bpe")
    mlm = ["--user-dir", p.repo / "biofairseq", "--task", "document_mlm", *p.masking_args()]

    def model_and_optimizer(arch, lr, warmup):
        p.arch = arch
        p.model_args = ["--arch", arch, *p.dropout_args()]
        p.optim_args = p.adam_args(lr, warmup)

    p.task_args = [*mlm, "--criterion", "masked_lm_accuracy"]
    p.model("base")
    model_and_optimizer(v["BASE_ARCH"], v["BASE_LR"], v["WARMUP_UPDATES"])
    p.pretrain()
    p.pick()
    p.model("large")
    model_and_optimizer(v["LARGE_ARCH"], v["LARGE_LR"], v["LARGE_WARMUP_UPDATES"])
    p.pretrain(v["LARGE_MAX_UPDATE"])
    p.pick()
    start, teacher = p.kept_checkpoint(p.run_dir / "pretrain" / "base"), p.kept_checkpoint(p.run_dir / "pretrain" / "large")
    model_and_optimizer(v["BASE_ARCH"], v["DISTIL_LR"], v["DISTIL_WARMUP_UPDATES"])
    p.model("distilled")
    p.task_args = [*mlm, "--criterion", "mlm_distillation", "--teacher-path", teacher, "--alpha-mlm", v["ALPHA_MLM"],
                   "--alpha-kl", v["ALPHA_KL"], "--temperature", v["TEMPERATURE"], "--alpha-cos", v["ALPHA_COS"]]
    p.pretrain(v["DISTIL_UPDATES"], ["--finetune-from-model", start])
    p.pick()
    p.model("base_longer")
    p.task_args = [*mlm, "--criterion", "masked_lm_accuracy"]
    p.pretrain(v["DISTIL_UPDATES"], ["--finetune-from-model", start])
    p.pick()
    for name in ("base", "base_longer", "large", "distilled"):  # Table 6's order
        p.model(name)
        p.convert()
    p.model("base")
    p.baseline()
    p.ner()
    p.report()


RECIPES = {f.__name__: f for f in (bsc_bio_es, beto, bioelectra, modernbert, biomegatron, bio_lm)}  # by script name
