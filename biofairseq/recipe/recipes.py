"""Each recipe's stages, on the shared stages of biofairseq.recipe.plan: its data, its models (plan.Model: the
objective's flags, the checkpoint kept) and their order. The scripts in recipes/ run them (their headers say what each
reproduces); the settings are in presets.py."""

from biofairseq.recipe.plan import Model, Plan
from biofairseq.recipe.table import flags


def masked_lm(p: Plan, vocab_type: str, *task_flags: str, **model: object) -> None:
    """One model pretrained with document-level masked LM from the corpus (or INIT_FROM, its vocabulary extended with
    VOCAB_EXTEND), then stages 5-8."""
    data = p.corpus(vocab_type)
    breakouts = p.breakout([data]) if data.extends else []  # VOCAB_EXTEND's vocabulary beside INIT_FROM's
    m = Model(p.mlm_task(*task_flags), p.model_flags(), p.optimizer(), arch=p.v.get("ARCH", ""), **model)
    p.pretrain(m, data)
    p.finish(m, data, breakouts=breakouts)


def bsc_bio_es(p: Plan) -> None:
    """Carrino et al. 2022: byte-level BPE, RoBERTa with document-level masked LM, the lowest validation perplexity."""
    masked_lm(p, "bytelevel-bpe")


def beto(p: Plan) -> None:
    """BETO (Cañete et al. 2020): SentencePiece, whole-word masking, two length phases; the final model kept."""
    masked_lm(p, "sentencepiece", "--mask-whole-words", keep="last")


def modernbert(p: Plan) -> None:
    """ModernBERT continued or from scratch: its attention is SDPA already, and it trains without dropout (its
    settings have none)."""
    masked_lm(p, "bytelevel-bpe", keep="last", sdpa=())


def bioelectra(p: Plan) -> None:
    """BioELECTRA (Kanakarajan et al. 2021): replaced-token detection; the final model kept, converted with its
    generator."""
    v = p.v
    data = p.corpus(v["VOCAB_TYPE"], from_hf=flags(v, "from-hf"), to_hf=["--generator"])
    task = ["--user-dir", p.repo / "biofairseq", "--task", "electra", "--criterion", "electra", *flags(v, "electra"),
            *p.masking()]
    # the generator's temperature anneals over the whole run; a model continued keeps its own sharing and widths
    model_flags = p.model_flags("--sampling-temperature-updates", v["MAX_UPDATE"], *([] if data.init else flags(v, "new_model")))
    m = Model(task, model_flags, p.optimizer(), arch=v["ARCH"], keep="last", best_metric="loss")
    p.pretrain(m, data)
    p.finish(m, data, ["--generator"], to_hf=["--generator"])


def biomegatron(p: Plan) -> None:
    """BioMegatron (Shin et al. 2020): a model per vocabulary (VOCABULARIES), their break-out rates on the NER sets,
    or one model continued from INIT_FROM."""
    v = p.v
    p.clean()
    if v["INIT_FROM"]:
        datas = [p.extend_vocabulary(p.init_from())]
        p.binarize(datas[0])
    else:
        datas = []
        for vocabulary in v["VOCABULARIES"].split():  # bio_30k=30000 ...
            datas.append(p.vocabulary("sentencepiece", *vocabulary.split("=", 1)))
            p.binarize(datas[-1])
    breakouts = p.breakout(datas)
    models, hfs = [], []
    for data in datas:
        m = Model(p.mlm_task(), p.model_flags(), p.optimizer(), name=data.name or "continued", arch=v["ARCH"], keep="last")
        p.pretrain(m, data)
        p.pick_checkpoint(m, data)
        hfs.append(p.convert(m))
        models.append(m)
    ner = p.ner([*hfs, *p.baseline(hfs[-1])])
    p.report(ner, [d for d in datas if d.name], breakouts, models)


def bio_lm(p: Plan) -> None:
    """Lewis et al. 2020's distillation study: base and large with masked LM, base distilled from large, and base
    trained as long again with masked LM alone; every model keeps its final checkpoint."""
    v = p.v
    data = p.corpus("bytelevel-bpe")
    mlm = ["--user-dir", p.repo / "biofairseq", "--task", "document_mlm", *p.masking()]

    def model(name: str, arch: str, lr: str, warmup: str, task: tuple = (*mlm, "--criterion", "masked_lm_accuracy")) -> Model:
        return Model(task, p.model_flags(), p.optimizer({"--lr": lr, "--warmup-updates": warmup}), name=name, arch=arch,
                     keep="last")

    base = model("base", v["BASE_ARCH"], v["BASE_LR"], v["WARMUP_UPDATES"])
    p.pretrain(base, data)
    p.pick_checkpoint(base, data)
    large = model("large", v["LARGE_ARCH"], v["LARGE_LR"], v["LARGE_WARMUP_UPDATES"])
    p.pretrain(large, data, v["LARGE_MAX_UPDATE"])
    p.pick_checkpoint(large, data)
    start, teacher = p.kept_checkpoint(base), p.kept_checkpoint(large)
    distilled = model("distilled", v["BASE_ARCH"], v["DISTIL_LR"], v["DISTIL_WARMUP_UPDATES"],
                      (*mlm, "--criterion", "mlm_distillation", "--teacher-path", teacher, *flags(v, "distillation")))
    p.pretrain(distilled, data, v["DISTIL_UPDATES"], ["--finetune-from-model", start])
    p.pick_checkpoint(distilled, data)
    longer = model("base_longer", v["BASE_ARCH"], v["DISTIL_LR"], v["DISTIL_WARMUP_UPDATES"])
    p.pretrain(longer, data, v["DISTIL_UPDATES"], ["--finetune-from-model", start])
    p.pick_checkpoint(longer, data)
    order = (base, longer, large, distilled)  # Table 6's
    hfs = [p.convert(m) for m in order]
    p.report(p.ner([*hfs, *p.baseline(hfs[0])]), pretrained=order)


BUILDERS = {f.__name__: f for f in (bsc_bio_es, beto, bioelectra, modernbert, biomegatron, bio_lm)}  # by script name
