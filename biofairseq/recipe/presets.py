"""Every recipe's defaults and presets, as data: one table per recipe, each value that comes from a paper given with
its source, as ``(value, "source")``. ``biofairseq.recipe.table`` merges them, later layers winning:

    SHARED  <  the recipe's defaults  <  its preset (tiny, pilot, one_gpu, paper)  <  the environment

then computes the derived values (``Derived``) that no layer gave. A recipe's ``fixed`` values are what it records of
a setting it does not take (bio_lm's PEAK_LR is its BASE_LR): giving one is refused with the reason.

With INIT_FROM, ``continuation`` adds a layer over the preset, under the environment. docs/recipes.md shows the tables
(python -m biofairseq.recipe docs).
"""

import math
import os
from dataclasses import dataclass, field
from typing import Mapping


@dataclass(frozen=True)
class Derived:
    """A value computed from the resolved ones (the environment's included), where no layer gives one."""
    compute: object  # Values -> str
    described: str  # how, in the docs


@dataclass(frozen=True)
class Required:
    """A setting the preset cannot guess: the environment must give it."""
    message: str  # the refusal where it is not given: "needs SOURCES=..."
    allows_empty: bool = False


@dataclass(frozen=True)
class Fixed:
    """What a recipe records of a setting it does not take, and why, for the line that refuses it."""
    value: object  # str or Derived
    why: str


def same_as(name: str) -> Derived:
    return Derived(lambda v: v[name], name)


def percent_of(share: int, name: str) -> Derived:
    """share % of a whole setting, rounded up (bash's (x * share + 99) / 100)."""
    return Derived(lambda v: str(math.ceil(v.integer(name) * share / 100)), f"{share}% of {name}")


def cores(environ: Mapping = os.environ) -> str:
    """What nproc prints: the cores this process may use, or OMP_NUM_THREADS (which GNU nproc honours)."""
    available = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    threads = environ.get("OMP_NUM_THREADS", "").split(",")[0]
    return str(int(threads) if threads.isdigit() and int(threads) > 0 else available)


def sources(what: str) -> Required:
    return Required(f'needs SOURCES="NAME=PATH ..." ({what})')


def ner_data(example: str) -> Required:
    return Required(f'needs NER_DATA="NAME=DIR ..." (e.g. {example}), or NER_DATA= to pretrain and convert only',
                    allows_empty=True)


PHARMACONER = ner_data("pharmaconer=path/to/pharmaconer with train/ valid/ test/")
NCBI = ner_data("ncbi=path/to/ncbi_disease with train/ valid/ test/")

SHARED = {  # every recipe's
    "PRESET": "tiny",
    "RUN_DIR": Derived(lambda v: f"runs/{v['RECIPE']}/{v['PRESET']}", "runs/RECIPE/PRESET"),
    "STOP_AFTER": "none",
    "FORCE": "0",
    "NUM_GPUS": "",  # every GPU torch sees
    "NUM_NODES": "1",
    "WORKERS": Derived(lambda v: cores(), "all cores"),
    "NER_GPU": "0",
    "DISTRIBUTED_PORT": "12345",
    "TEXT_DOCS": "blank-line",
    "TEXT_FIELD": "text",
    "SHARD_MB": "0",
    "INIT_FROM": "",
    "PHASE2_SHARE": "0",
    "PHASE2_TOKENS_PER_SAMPLE": "512",
    "PHASE2_SEQUENCES_PER_UPDATE": same_as("SEQUENCES_PER_UPDATE"),
    "PHASE2_BATCH_PER_DEVICE": same_as("BATCH_PER_DEVICE"),
    "FAST_PATH": "0",
    "PRECISION": "fp16",
    "COMPILE": "none",
    "WEIGHT_DECAY_EXCLUDE": "none",
    "NER_LAYERWISE_DECAY": "1",
    "NER_LABELLINGS": "",
    "NER_EXTRA": "",
    "WEAK_PRETRAINING": "stop",
    "SEED": "1",
    "CORPUS_LAUNCHER": "local",
    "CORPUS_SLURM_PARTITION": "",
    "CORPUS_SLURM_TIME": "240",
    "CORPUS_SLURM_MEM_GB": "",
    "KEEP_INTERVAL_UPDATES": "2",
    "DATA_WORKERS": "2",
}

# Fine-tuning a small model (every recipe's tiny and pilot, bsc_bio_es's one_gpu): windows as long as the pretraining
# samples, batch 32 with 10% warm-up, beside a random-init twin; the report says whether pretraining beat word
# frequencies, and the recipe goes on either way.
SMALL_MODEL_NER = {
    "NER_MAX_LENGTH": same_as("TOKENS_PER_SAMPLE"),
    "NER_BATCH": "32",
    "NER_ACCUMULATION": "1",
    "NER_WARMUP_RATIO": "0.1",
    "BASELINE": "random-init",
    "WEAK_PRETRAINING": "continue",
}

# Every recipe's tiny preset: the bundled sample, and the schedule and NER sweep that fit it on 2 CPU cores, the same
# for each so that their reports compare.
TINY = {
    "SOURCES": Derived(lambda v: f"clinical={v['REPO']}/examples/data/clinical_cases.jsonl.gz", "the bundled sample"),
    "NER_DATA": Derived(lambda v: f"pharmaconer={v['REPO']}/examples/data/pharmaconer", "the bundled PharmaCoNER excerpt"),
    "VALID_DOCS": "50",
    "VOCAB_SIZE": "8000",
    "TOKENS_PER_SAMPLE": "128",
    "SEQUENCES_PER_UPDATE": "32",
    "BATCH_PER_DEVICE": "32",
    "WARMUP_UPDATES": "50",
    "MAX_UPDATE": "600",
    "SAVE_INTERVAL_UPDATES": "100",
    "LOG_INTERVAL": "20",
    # a 2-layer model of width 128 learns nothing at the papers' fine-tuning rates in a few epochs; at 2e-3 and above
    # it stays at all-O for most of them
    "NER_LRS": "5e-4,1e-3",
    "NER_SEEDS": "1,2",
    "NER_EPOCHS": "10",
    **SMALL_MODEL_NER,
}

# Every recipe's pilot: the user's corpus of a few million tokens and NER data in about an hour on 2 CPU cores (minutes
# on one GPU): a 2 x 128 model (the recipe's ARCH), 64 blocks of 128 tokens per update, 5,000 updates (a recipe whose
# step costs more sets fewer), the fast path, and one NER setting for every recipe, fixed before any pilot ran so that
# their reports compare (benchmarks/results/pilot_*.md).
PILOT = {
    "VALID_DOCS": "100",
    "VOCAB_SIZE": "8000",
    "TOKENS_PER_SAMPLE": "128",
    "SEQUENCES_PER_UPDATE": "64",
    "BATCH_PER_DEVICE": "64",
    "MAX_UPDATE": "5000",
    "WARMUP_UPDATES": "250",
    "SAVE_INTERVAL_UPDATES": "500",
    "LOG_INTERVAL": "100",
    "FAST_PATH": "1",
    "PRECISION": "bf16",
    "NER_LRS": "1e-3",
    "NER_SEEDS": "1,2,3",
    "NER_EPOCHS": "10",
    "NER_LAYERWISE_DECAY": "1",
    **SMALL_MODEL_NER,
}


@dataclass(frozen=True)
class Recipe:
    name: str
    defaults: dict  # over SHARED, under the preset
    presets: dict  # name: its table (the first is the default preset)
    fixed: dict = field(default_factory=dict)  # name: Fixed
    computed: dict = field(default_factory=dict)  # name: Derived, for the script only (not settings, not recorded)
    kinds: dict = field(default_factory=dict)  # name: a kind in place of the setting's own (biofairseq.recipe.kinds)


BSC_BIO_ES = Recipe(
    "bsc_bio_es",
    defaults={
        "CORPUS_LANG": ("es", "Spanish clinical and biomedical text"),
        "CLIP_NORM": ("0.0", "Table 3: no clipping"),
        "ADAM_BETAS": ("(0.9,0.98)", "Table 3"),
        "ADAM_EPS": ("1e-6", "Table 3"),
        "WEIGHT_DECAY": ("0.01", "Table 3"),
        "DROPOUT": ("0.1", "Table 3"),
        "ATTENTION_DROPOUT": ("0.1", "Table 3"),
        "MASK_PROB": ("0.15", "RoBERTa's"),
        "LEAVE_UNMASKED_PROB": ("0.1", "RoBERTa's 80/10/10"),
        "RANDOM_TOKEN_PROB": ("0.1", "RoBERTa's 80/10/10"),
    },
    presets={
        "tiny": {**TINY, "ARCH": "bio_roberta_tiny", "PEAK_LR": "1e-3"},
        # the masked-LM CPU pilot (benchmarks/results/pilot_bsc_bio_es.md)
        "pilot": {**PILOT, "SOURCES": sources("the in-house pretraining text, e.g. cases=clinical_cases.jsonl"),
                  "NER_DATA": PHARMACONER, "ARCH": "bio_roberta_tiny", "PEAK_LR": "1e-3"},
        # A small in-house corpus on one GPU, where data and not compute is the limit: ~30 passes with the LR decaying to
        # zero, validation every 250 updates, the checkpoint of lowest validation perplexity, then the NER sweep and its
        # random-init twin (benchmarks/results/pretraining_vs_random_init.md, one_gpu_recipe_gpu.md)
        "one_gpu": {
            "SOURCES": sources("the in-house pretraining text, e.g. cases=clinical_cases.jsonl"),
            "NER_DATA": PHARMACONER,
            "VALID_DOCS": "200",
            "VOCAB_SIZE": "8000",
            "ARCH": "bio_roberta_l6_h512",
            "TOKENS_PER_SAMPLE": "128",
            "SEQUENCES_PER_UPDATE": "256",
            "BATCH_PER_DEVICE": "256",
            "PEAK_LR": "1e-3",
            "WARMUP_UPDATES": "300",
            "MAX_UPDATE": "3000",
            "SAVE_INTERVAL_UPDATES": "250",
            "LOG_INTERVAL": "50",
            "CLIP_NORM": "1.0",
            "PRECISION": "bf16",
            "FAST_PATH": "1",
            "NER_LRS": "1e-4,2e-4,4e-4",
            "NER_SEEDS": "1,2,3",
            "NER_EPOCHS": "10",
            **SMALL_MODEL_NER,
        },
        "paper": {
            "SOURCES": sources("the raw pretraining corpora"),
            "NER_DATA": PHARMACONER,
            "VALID_DOCS": ("2000", "§3: 2,000 documents held out"),
            "VOCAB_SIZE": ("50262", "§3: byte-level BPE"),
            "ARCH": ("bio_roberta_base", "RoBERTa-base"),
            "TOKENS_PER_SAMPLE": ("512", "RoBERTa's, as §3 keeps it"),
            "SEQUENCES_PER_UPDATE": ("2048", "Table 3"),
            "BATCH_PER_DEVICE": "16",
            "PEAK_LR": ("5e-4", "Table 3"),
            "WARMUP_UPDATES": ("10000", "Table 3"),
            "MAX_UPDATE": ("125000", "Table 3"),
            "SAVE_INTERVAL_UPDATES": "2500",
            "LOG_INTERVAL": "100",
            "NER_LRS": ("8e-6,1e-5,2e-5,3e-5,5e-5", "§4, Table 4"),
            "NER_SEEDS": ("1,2,3", "§4: three seeds"),
            "NER_EPOCHS": ("20", "Table 4"),
            "NER_MAX_LENGTH": ("512", "§4"),
            "NER_BATCH": ("32", "§4"),
            "NER_ACCUMULATION": ("2", "§4"),
            "NER_WARMUP_RATIO": ("0", "§4, Table 4: no warm-up"),
            "BASELINE": "none",
        },
    },
)

BETO = Recipe(
    "beto",
    defaults={
        "CORPUS_LANG": "es",
        "WEIGHT_DECAY_EXCLUDE": ("norm_and_bias", "BERT's"),
        "CLIP_NORM": ("1.0", "BERT's"),
        "ADAM_BETAS": ("(0.9,0.999)", "BERT's"),
        "ADAM_EPS": ("1e-6", "BERT's"),
        "WEIGHT_DECAY": ("0.01", "BERT's"),
        "DROPOUT": ("0.1", "BERT's"),
        "ATTENTION_DROPOUT": ("0.1", "BERT's"),
        "MASK_PROB": ("0.15", "BERT's"),
        "LEAVE_UNMASKED_PROB": ("0.1", "BERT's 80/10/10"),
        "RANDOM_TOKEN_PROB": ("0.1", "BERT's 80/10/10"),
    },
    presets={
        "tiny": {**TINY, "ARCH": "bio_roberta_tiny", "PEAK_LR": "1e-3", "PHASE2_SHARE": "0.1",
                 "PHASE2_TOKENS_PER_SAMPLE": "512", "PHASE2_SEQUENCES_PER_UPDATE": "8", "PHASE2_BATCH_PER_DEVICE": "8"},
        # whole-word masking with SentencePiece at the masked-LM pilot's shape and schedule, one length
        "pilot": {**PILOT, "SOURCES": sources("the Spanish pretraining text, e.g. cases=clinical_cases.jsonl"),
                  "NER_DATA": PHARMACONER, "ARCH": "bio_roberta_tiny", "PEAK_LR": "1e-3"},
        "paper": {
            "SOURCES": sources("the raw pretraining corpora: Spanish Wikipedia and OPUS for BETO"),
            "NER_DATA": ner_data("conll2002=path/to/conll2002_es with train, dev and test"),
            "VALID_DOCS": "2000",
            "VOCAB_SIZE": ("32000", "SentencePiece 32k"),
            "ARCH": ("beto_base", "BERT-base"),
            "TOKENS_PER_SAMPLE": ("128", "phase 1: 2,048 x 128"),
            "SEQUENCES_PER_UPDATE": ("2048", "phase 1: 2,048 x 128"),
            "BATCH_PER_DEVICE": "64",
            "PHASE2_SHARE": ("0.55", "2M updates, the first 900k at 128 tokens"),
            "PHASE2_TOKENS_PER_SAMPLE": ("512", "phase 2: 256 x 512"),
            "PHASE2_SEQUENCES_PER_UPDATE": ("256", "phase 2: 256 x 512"),
            "PHASE2_BATCH_PER_DEVICE": "16",
            "PEAK_LR": ("1e-4", "BERT's; the paper gives none"),
            "WARMUP_UPDATES": ("10000", "BERT's"),
            "MAX_UPDATE": ("2000000", "2M steps"),
            "SAVE_INTERVAL_UPDATES": "10000",
            "LOG_INTERVAL": "100",
            "NER_LRS": ("2e-5,3e-5,5e-5", "BERT's grid, as BETO's XNLI runs"),
            "NER_SEEDS": "1,2,3",
            "NER_EPOCHS": ("4", "BERT's fine-tuning grid"),
            "NER_MAX_LENGTH": "512",
            "NER_BATCH": ("32", "BERT's fine-tuning grid"),
            "NER_ACCUMULATION": "1",
            "NER_WARMUP_RATIO": ("0.1", "BERT's"),
            "BASELINE": "none",
        },
    },
)

BIOELECTRA = Recipe(
    "bioelectra",
    defaults={
        "EMBEDDING_SHARING": ("tied", "ELECTRA's"),
        "MASK_PROB": ("0.15", "ELECTRA-base's"),
        "SAMPLING_TEMPERATURE": ("1", "ELECTRA's"),
        "SAMPLING_TEMPERATURE_FINAL": same_as("SAMPLING_TEMPERATURE"),
        "GENERATOR_FRACTION": "",  # ARCH's own: 1/2 for electra_tiny, 1/3 for base
        "WEIGHT_DECAY_EXCLUDE": ("norm_and_bias", "ELECTRA's"),
        "LEAVE_UNMASKED_PROB": ("0.15", "ELECTRA's: 85% of the selected tokens masked"),
        "DISCRIMINATOR_WEIGHT": ("50", "ELECTRA's lambda"),
        "CLIP_NORM": ("1.0", "ELECTRA's"),
        "ADAM_BETAS": ("(0.9,0.999)", "ELECTRA's"),
        "ADAM_EPS": ("1e-6", "ELECTRA's"),
        "WEIGHT_DECAY": ("0.01", "ELECTRA's"),
        "DROPOUT": ("0.1", "ELECTRA's"),
        "ATTENTION_DROPOUT": ("0.1", "ELECTRA's"),
    },
    presets={
        "tiny": {**TINY, "CORPUS_LANG": "es", "VOCAB_TYPE": "bytelevel-bpe", "ARCH": "electra_tiny", "PHASE2_SHARE": "0.1",
                 "PHASE2_TOKENS_PER_SAMPLE": "512", "PHASE2_SEQUENCES_PER_UPDATE": "8", "PHASE2_BATCH_PER_DEVICE": "8",
                 "PEAK_LR": ("5e-4", "ELECTRA-small's"),
                 "NER_LAYERWISE_DECAY": ("0.8", "BioELECTRA's")},
        # electra_tiny (the masked-LM pilot's 2 x 128 as its discriminator) in the masked-LM pilot's minutes, one length:
        # 3,000 updates, since its step costs more (benchmarks/results/electra_vs_mlm_step.md); the generator at 1/4 and
        # temperature 2 chosen on dev (benchmarks/results/pilot_bioelectra_variants.md, pilot_bioelectra.md)
        "pilot": {**PILOT, "SOURCES": sources("the pretraining text, e.g. cases=clinical_cases.jsonl"),
                  "NER_DATA": PHARMACONER, "MAX_UPDATE": "3000", "CORPUS_LANG": "es", "VOCAB_TYPE": "bytelevel-bpe",
                  "ARCH": "electra_tiny", "PEAK_LR": "5e-4", "SAMPLING_TEMPERATURE": "2", "GENERATOR_FRACTION": "0.25"},
        # ELECTRA against bsc_bio_es.sh's one_gpu masked LM at equal minutes on one GPU: its discriminator is that
        # model's shape (one random-init twin for both), its corpus stages, precision, packing, clipping (bioelectra.sh's 1.0) and NER setting theirs
        # (NER at the masked-LM run's 2e-4, benchmarks/results/one_gpu_recipe_gpu.md), the generator and temperature
        # the CPU pilots chose. MAX_UPDATE: the masked LM's 3,000 updates / 1.62, ELECTRA's step against masked LM's
        # on the GPU's fast path (benchmarks/results/electra_vs_mlm_step_gpu_fast.md, at base and 512 tokens: the
        # one_gpu shape's own ratio is not measured); warm-up 10% of it, as the masked LM's.
        "one_gpu": {
            "SOURCES": sources("the in-house pretraining text, e.g. cases=clinical_cases.jsonl"),
            "NER_DATA": PHARMACONER,
            "CORPUS_LANG": "es",
            "VALID_DOCS": "200",
            "VOCAB_TYPE": "bytelevel-bpe",
            "VOCAB_SIZE": "8000",
            "ARCH": "electra_l6_h512",
            "GENERATOR_FRACTION": "0.25",
            "SAMPLING_TEMPERATURE": "2",
            "TOKENS_PER_SAMPLE": "128",
            "SEQUENCES_PER_UPDATE": "256",
            "BATCH_PER_DEVICE": "256",
            "PEAK_LR": ("5e-4", "ELECTRA-small's"),
            "WARMUP_UPDATES": "185",
            "MAX_UPDATE": "1850",
            "SAVE_INTERVAL_UPDATES": "250",
            "LOG_INTERVAL": "50",
            "PRECISION": "bf16",
            "FAST_PATH": "1",
            "NER_LRS": "2e-4",
            "NER_SEEDS": "1,2,3",
            "NER_EPOCHS": "10",
            "NER_LAYERWISE_DECAY": "1",
            **SMALL_MODEL_NER,
        },
        "paper": {
            "SOURCES": sources("the raw pretraining corpora, PubMed for BioELECTRA"),
            "NER_DATA": NCBI,
            "CORPUS_LANG": "en",
            "VALID_DOCS": "2000",
            # PubMedBERT's uncased WordPiece of 30,522: WordPiece is not one of ours, so SentencePiece of that size
            "VOCAB_TYPE": "sentencepiece",
            "VOCAB_SIZE": ("30522", "PubMedBERT's vocabulary size"),
            "ARCH": ("bio_electra_base", "Table 5"),
            "TOKENS_PER_SAMPLE": ("128", "Table 5: 90% of steps at 128"),
            "SEQUENCES_PER_UPDATE": ("256", "ELECTRA-base's; the paper gives none"),
            "BATCH_PER_DEVICE": "32",
            "PHASE2_SHARE": ("0.1", "Table 5: 10% of steps at 512"),
            "PHASE2_TOKENS_PER_SAMPLE": ("512", "Table 5"),
            "PHASE2_SEQUENCES_PER_UPDATE": "256",
            "PHASE2_BATCH_PER_DEVICE": "8",
            "PEAK_LR": ("2e-4", "Table 5"),
            "WARMUP_UPDATES": ("10000", "Table 5"),
            "MAX_UPDATE": ("1000000", "Table 5"),
            "SAVE_INTERVAL_UPDATES": "10000",
            "LOG_INTERVAL": "100",
            "NER_LRS": ("3e-5,5e-5,1e-4,1.5e-4,2e-4", "the fine-tuning grid"),
            "NER_SEEDS": "1,2,3",
            "NER_EPOCHS": ("5", "the fine-tuning grid: 3 or 5"),
            "NER_MAX_LENGTH": "512",
            "NER_BATCH": "32",
            "NER_ACCUMULATION": "1",
            "NER_WARMUP_RATIO": ("0.1", "Table 6"),
            "NER_LAYERWISE_DECAY": ("0.8", "Table 6"),
            "BASELINE": "none",
        },
    },
)

BIOMEGATRON = Recipe(
    "biomegatron",
    defaults={
        "NER_LABELLINGS": "whole-word sub-token",
        "CHECKPOINT_ACTIVATIONS": "0",
        "WEIGHT_DECAY_EXCLUDE": ("norm_and_bias", "Megatron-LM's"),
        "CLIP_NORM": ("1.0", "Megatron-LM's"),
        "ADAM_BETAS": ("(0.9,0.999)", "Megatron-LM's"),
        "ADAM_EPS": ("1e-8", "Megatron-LM's"),
        "WEIGHT_DECAY": ("0.01", "Megatron-LM's"),
        "DROPOUT": ("0.1", "Megatron-LM's"),
        "ATTENTION_DROPOUT": ("0.1", "Megatron-LM's"),
        "MASK_PROB": ("0.15", "BERT's"),
        "LEAVE_UNMASKED_PROB": ("0.1", "BERT's 80/10/10"),
        "RANDOM_TOKEN_PROB": ("0.1", "BERT's 80/10/10"),
    },
    presets={
        "tiny": {**TINY, "CORPUS_LANG": "es", "VOCAB_SIZES": "4000,8000", "ARCH": "bio_megatron_tiny", "PEAK_LR": "1e-3"},
        # the pre-LN encoder at the masked-LM pilot's shape and schedule; one vocabulary, one labelling
        "pilot": {**PILOT, "SOURCES": sources("the pretraining text, e.g. cases=clinical_cases.jsonl"),
                  "NER_DATA": PHARMACONER, "CORPUS_LANG": "es", "VOCAB_SIZES": "8000", "ARCH": "bio_megatron_tiny",
                  "PEAK_LR": "1e-3", "NER_LABELLINGS": "whole-word"},
        # pretraining follows Megatron-LM's BERT, as the paper gives none of it
        "paper": {
            "SOURCES": sources("the raw pretraining corpora: PubMed abstracts and PMC for BioMegatron"),
            "NER_DATA": ner_data("ncbi=path/to/ncbi_disease with train, devel and test"),
            "CORPUS_LANG": "en",
            "VALID_DOCS": "2000",
            "VOCAB_SIZES": ("30000,50000", "§3: 30k and 50k"),
            "ARCH": ("bio_megatron_345m", "345M"),
            "TOKENS_PER_SAMPLE": ("512", "Megatron-LM's"),
            "SEQUENCES_PER_UPDATE": ("1024", "Megatron-LM's"),
            "BATCH_PER_DEVICE": "16",
            "PEAK_LR": ("1e-4", "Megatron-LM's"),
            "MAX_UPDATE": ("2000000", "Megatron-LM's; set it for about one epoch of your corpus"),
            "WARMUP_UPDATES": percent_of(1, "MAX_UPDATE"),  # Megatron-LM's
            "SAVE_INTERVAL_UPDATES": "10000",
            "LOG_INTERVAL": "100",
            "NER_LRS": ("5e-5", "Table 1"),
            "NER_SEEDS": "1,2,3",
            "NER_EPOCHS": ("30", "Table 1"),
            "NER_MAX_LENGTH": ("128", "Table 1"),
            "NER_BATCH": "32",
            "NER_ACCUMULATION": "1",
            "NER_WARMUP_RATIO": "0",
            "NER_EXTRA": ("--num-fc-layers 2 --fc-hidden-size 512 --fc-dropout 0.5", "Table 1's head"),
            "BASELINE": "none",
        },
    },
    fixed={"VOCAB_SIZE": Fixed(Derived(lambda v: v["VOCAB_SIZES"].split(",")[0], "the first of VOCAB_SIZES"),
                               "this recipe learns one vocabulary per entry of VOCAB_SIZES; set VOCAB_SIZES={value}")},
    computed={"VOCABULARIES": Derived(lambda v: " ".join(
        f"bio_{int(size) // 1000}k={size}" if int(size) % 1000 == 0 else f"bio_{size}={size}"
        for size in v["VOCAB_SIZES"].split(",")), "bio_30k=30000 ...: the models' names and sizes")},
)

BIO_LM_SHARED = {  # tiny and pilot: the paper's rates scaled to the tiny base's 1e-3 (large 4/6 of it, distillation 5/6)
    "CORPUS_LANG": "es",
    "BASE_ARCH": "bio_roberta_tiny",
    "LARGE_ARCH": "bio_roberta_small",
    "BASE_LR": "1e-3",
    "LARGE_LR": "7e-4",
    "DISTIL_LR": "8e-4",
}
BIO_LM_ONE_LENGTH = "bio-lm pretrains at one length (512 tokens); leave it unset"

BIO_LM = Recipe(
    "bio_lm",
    defaults={
        "DISTIL_WARMUP_UPDATES": percent_of(5, "DISTIL_UPDATES"),
        "LARGE_MAX_UPDATE": same_as("MAX_UPDATE"),
        "ALPHA_MLM": ("5.0", "§7.1"),
        "ALPHA_KL": ("2.0", "§7.1"),
        "TEMPERATURE": ("2.0", "§7.1"),
        "ALPHA_COS": ("1.0", "§7.1"),
        "CLIP_NORM": "0.0",
        "ADAM_BETAS": ("(0.9,0.98)", "§5.1"),
        "ADAM_EPS": ("1e-6", "§5.1"),
        "WEIGHT_DECAY": ("0.01", "§5.1"),
        "DROPOUT": ("0.1", "§5.1"),
        "ATTENTION_DROPOUT": ("0.1", "RoBERTa's"),
        "MASK_PROB": ("0.15", "§5.1"),
        "LEAVE_UNMASKED_PROB": ("0.1", "§5.1: 80/10/10"),
        "RANDOM_TOKEN_PROB": ("0.1", "§5.1: 80/10/10"),
    },
    presets={
        "tiny": {**TINY, **BIO_LM_SHARED, "MAX_UPDATE": "600", "DISTIL_UPDATES": "200",
                 "WARMUP_UPDATES": percent_of(5, "MAX_UPDATE")},
        # base is the masked-LM pilot; the teacher (4 x 256, about 5 times base's step) gets the same 5,000 updates, so
        # that it is a better model than its student; distillation and its control 1,000 more of base. About 3 hours
        # on 2 CPU cores, minutes on a GPU: the one pilot that does not fit an hour on a CPU (pilot_bio_lm.md)
        "pilot": {**PILOT, **BIO_LM_SHARED, "SOURCES": sources("the pretraining text, e.g. cases=clinical_cases.jsonl"),
                  "NER_DATA": PHARMACONER, "DISTIL_UPDATES": "1000"},
        "paper": {
            "SOURCES": sources("the raw pretraining corpora: PubMed, PMC, MIMIC-III for bio-lm"),
            "NER_DATA": NCBI,
            "CORPUS_LANG": "en",
            "VALID_DOCS": "2000",
            "VOCAB_SIZE": ("50000", "§4.1: 50k subword units"),
            "BASE_ARCH": ("bio_roberta_base", "RoBERTa-base"),
            "LARGE_ARCH": ("bio_roberta_large", "RoBERTa-large"),
            "TOKENS_PER_SAMPLE": ("512", "§5.1"),
            "SEQUENCES_PER_UPDATE": ("8192", "§5.1"),
            "BATCH_PER_DEVICE": "8",  # large at 512 tokens in fp16, with the teacher's forward beside it
            "BASE_LR": ("6e-4", "§5.1"),
            "LARGE_LR": ("4e-4", "§5.1"),
            "MAX_UPDATE": ("500000", "§5.1"),
            "DISTIL_UPDATES": ("50000", "§7.1"),
            "DISTIL_LR": ("5e-4", "§7.1"),
            "WARMUP_UPDATES": percent_of(5, "MAX_UPDATE"),  # §5.1
            "SAVE_INTERVAL_UPDATES": "5000",
            "LOG_INTERVAL": "100",
            "NER_LRS": ("1e-5", "§5.2"),
            "NER_SEEDS": ("1,2,3,4,5", "§5.2: 5 seeds"),
            "NER_EPOCHS": ("20", "§5.2"),
            "NER_MAX_LENGTH": "512",
            "NER_BATCH": ("32", "§5.2"),
            "NER_ACCUMULATION": "1",
            "NER_WARMUP_RATIO": ("0.06", "RoBERTa's; the paper gives none"),
            "BASELINE": "none",
        },
    },
    fixed={
        "ARCH": Fixed("", "bio-lm's shapes are BASE_ARCH and LARGE_ARCH; set those"),
        "PEAK_LR": Fixed(same_as("BASE_LR"), "bio-lm's peak learning rates are BASE_LR, LARGE_LR and DISTIL_LR; set those"),
        "INIT_FROM": Fixed("", "bio-lm pretrains from scratch here; leave it unset, or continue a RoBERTa with recipes/bsc_bio_es.sh INIT_FROM=..."),
        "PHASE2_SHARE": Fixed("0", BIO_LM_ONE_LENGTH),
        "PHASE2_TOKENS_PER_SAMPLE": Fixed("512", BIO_LM_ONE_LENGTH),
        "PHASE2_SEQUENCES_PER_UPDATE": Fixed(same_as("SEQUENCES_PER_UPDATE"), BIO_LM_ONE_LENGTH),
        "PHASE2_BATCH_PER_DEVICE": Fixed(same_as("BATCH_PER_DEVICE"), BIO_LM_ONE_LENGTH),
    },
    computed={"LARGE_WARMUP_UPDATES": Derived(
        lambda v: v["WARMUP_UPDATES"] if v.integer("LARGE_MAX_UPDATE") == v.integer("MAX_UPDATE")
        else str(math.ceil(v.integer("LARGE_MAX_UPDATE") * 5 / 100)), "WARMUP_UPDATES, or 5% of LARGE_MAX_UPDATE")},
)

MODERNBERT = Recipe(
    "modernbert",
    defaults={
        "FAST_PATH": ("1", "ModernBERT trains unpadded"),
        "CORPUS_LANG": "es",
        "MASK_PROB": ("0.3", "ModernBERT's"),
        "WEIGHT_DECAY": ("1e-5", "ModernBERT-base's"),
        "WEIGHT_DECAY_EXCLUDE": "norm_and_bias",
        "LEAVE_UNMASKED_PROB": "0.1",
        "RANDOM_TOKEN_PROB": "0.1",
        "CLIP_NORM": "1.0",
        "ADAM_BETAS": "(0.9,0.98)",
        "ADAM_EPS": "1e-6",
    },
    presets={
        "tiny": {**TINY, "ARCH": "bio_modernbert_tiny", "PEAK_LR": "1e-3", "PHASE2_SHARE": "0.1",
                 "PHASE2_TOKENS_PER_SAMPLE": "512", "PHASE2_SEQUENCES_PER_UPDATE": "8", "PHASE2_BATCH_PER_DEVICE": "8"},
        # ModernBERT's block at the masked-LM pilot's width, one length, in about the masked-LM pilot's minutes: 3,300
        # updates, since its step costs more (benchmarks/results/modernbert_step.md)
        "pilot": {**PILOT, "SOURCES": sources("the Spanish pretraining text, e.g. cases=clinical_cases.jsonl"),
                  "NER_DATA": PHARMACONER, "MAX_UPDATE": "3300", "WARMUP_UPDATES": "165", "ARCH": "bio_modernbert_tiny",
                  "PEAK_LR": "1e-3"},
        # ModernBERT-base's training where fairseq has it; AdamW instead of StableAdamW, linear decay instead of
        # warm-up-stable-decay, fixed batches, and your corpus
        "paper": {
            "SOURCES": sources("the raw pretraining corpora"),
            "NER_DATA": NCBI,
            "CORPUS_LANG": ("en", "ModernBERT's and BioClinical ModernBERT's corpora"),
            "VALID_DOCS": "2000",
            "VOCAB_SIZE": ("50368", "ModernBERT's"),
            "ARCH": ("bio_modernbert_base", "ModernBERT-base"),
            "TOKENS_PER_SAMPLE": ("1024", "ModernBERT's first phase"),
            "SEQUENCES_PER_UPDATE": "4096",
            "BATCH_PER_DEVICE": "64",
            "PHASE2_SHARE": "0.15",
            "PHASE2_TOKENS_PER_SAMPLE": ("8192", "ModernBERT's context extension"),
            "PHASE2_SEQUENCES_PER_UPDATE": "512",
            "PHASE2_BATCH_PER_DEVICE": "8",
            "PEAK_LR": ("8e-4", "ModernBERT-base's"),
            "WARMUP_UPDATES": "1000",
            "MAX_UPDATE": "400000",
            "SAVE_INTERVAL_UPDATES": "5000",
            "LOG_INTERVAL": "100",
            "NER_LRS": "3e-5,5e-5,8e-5",
            "NER_SEEDS": "1,2,3",
            "NER_EPOCHS": "5",
            "NER_MAX_LENGTH": "512",
            "NER_BATCH": "32",
            "NER_ACCUMULATION": "1",
            "NER_WARMUP_RATIO": "0.1",
            "BASELINE": "none",
            "PRECISION": ("bf16", "ModernBERT's"),
        },
    },
)

RECIPES = {r.name: r for r in (BSC_BIO_ES, BETO, BIOELECTRA, BIOMEGATRON, BIO_LM, MODERNBERT)}

# ---- continuing a published model (INIT_FROM): a layer over every preset, under the environment

HEAD_WARMUP_RECIPES = ("bsc_bio_es", "beto", "biomegatron", "modernbert")  # masked LM: document_mlm's --lm-head-only
TAPT = "TAPT's (Gururangan et al. 2020, Table 13)"
BERT_GRID = "BERT's fine-tuning grid (Devlin et al. 2019, A.3)"


def _init_model(v):
    """(family, config) of INIT_FROM's transformers folder, or None: a fairseq checkpoint is read when it converts, and
    a folder that does not convert is refused by the settings step's checks, which say why."""
    from pathlib import Path

    from biofairseq.convert import families

    if v["INIT_FROM"].endswith(".pt"):
        return None
    try:
        family, config, _ = families.inspect(families.Source(Path(v["INIT_FROM"])))
    except Exception:  # noqa: BLE001
        return None
    return family, config


def _ner_lrs(v):
    model = _init_model(v)
    return "2e-5" if model and int(getattr(model[1], "hidden_size", 768)) >= 1024 else "5e-5"


def _ner_max_length(v):
    model = _init_model(v)
    return str(min(512, model[0].max_length(model[1]))) if model else "512"


def _head_warmup(v):
    from biofairseq.convert.families import has_lm_head

    try:
        return "0" if has_lm_head(v["INIT_FROM"]) else "300"
    except Exception:  # noqa: BLE001  unreadable weights: the settings step's checks say why
        return "0"


# a value given with INIT_FROM above what a continuation in the literature takes gets a note: (ceiling, the note)
CONTINUATION_CEILINGS = {
    "PEAK_LR": (5e-4, "is a from-scratch rate on a published model; continued pretraining takes 1e-4 (TAPT) to 5e-4 "
                      "(DAPT, the largest in the literature)"),
    "NER_LRS": (1e-4, "holds a rate above 1e-4; published models fine-tune at 1e-5 to 5e-5 (the seeds' tables)"),
}


def continuation(recipe: str) -> dict:
    """The values a run continuing a published model takes where the user gives none, over every preset: TAPT's
    schedule (its learning rate, batch, 6% warm-up and 100 epochs, at most DAPT's 12,500 updates: biofairseq-train
    --fit-epochs), the model's own masking, one length, a warmed LM head where the folder has none, and NER at a
    published model's fine-tuning settings, beside the original as given."""
    r = RECIPES[recipe]
    values = {
        "PEAK_LR": ("1e-4", TAPT),
        "SEQUENCES_PER_UPDATE": ("256", TAPT),
        "MAX_UPDATE": ("12500", "DAPT's 12,500 updates, at most; fewer where CONTINUE_EPOCHS is reached first"),
        "CONTINUE_EPOCHS": ("100", TAPT),
        "WARMUP_UPDATES": Derived(lambda v: str(math.ceil(v.integer("MAX_UPDATE") * 6 / 100)),
                                  "6% of MAX_UPDATE (TAPT's), shortened with the run"),
        "SAVE_INTERVAL_UPDATES": Derived(lambda v: str(max(1, v.integer("MAX_UPDATE") // 10)),
                                         "10% of MAX_UPDATE, shortened with the run"),
        "PHASE2_SHARE": ("0", "TAPT's one length"),
        "MASK_PROB": (value_of(r.defaults.get("MASK_PROB", "0.15")), "the model's own pretraining's, as TAPT keeps it"),
        "LOG_INTERVAL": ("1", "fairseq's RoBERTa pretraining example's: a line an update, which a published model "
                              "on a CPU can take a minute for"),
        "NER_LRS": Derived(_ner_lrs, f"5e-5, the top of {BERT_GRID}; 2e-5 from 1,024 wide"),
        "NER_EPOCHS": ("4", BERT_GRID),
        "NER_MAX_LENGTH": Derived(_ner_max_length, "512 (BERT's), at most the model's positions"),
        "NER_BATCH": ("32", BERT_GRID),
        "NER_ACCUMULATION": "1",
        "NER_WARMUP_RATIO": ("0.1", "BERT's"),
        "BASELINE": ("original", "the model as given, fine-tuned beside the continued one"),
    }
    if recipe in HEAD_WARMUP_RECIPES:
        values["HEAD_WARMUP_UPDATES"] = Derived(_head_warmup, "300 (ours) where the folder has no trained LM head, as "
                                                "LP-FT trains a new head first, the features fixed (Kumar et al. 2022); "
                                                "else 0")
    return values


# what only a continuing recipe takes, off unless INIT_FROM is given (the continuation's layer sets them)
for _recipe in (r for r in RECIPES.values() if "INIT_FROM" not in r.fixed):
    _recipe.defaults["CONTINUE_EPOCHS"] = ""
for _name in HEAD_WARMUP_RECIPES:
    RECIPES[_name].defaults.update({"VOCAB_EXTEND": "0", "HEAD_WARMUP_UPDATES": "0", "HEAD_WARMUP_LR": (
        "1e-3", "a from-scratch rate (the pilots'): the head alone, from its random start")})



def value_of(entry: object) -> object:
    """The value of a table entry, without its source."""
    return entry[0] if isinstance(entry, tuple) else entry


def source_of(entry: object) -> str:
    return entry[1] if isinstance(entry, tuple) else None
