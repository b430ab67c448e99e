#!/usr/bin/env bash
# bio-lm's distillation study (Lewis et al. 2020, "Pretrained Language Models for Biomedical and Clinical Tasks",
# sections 5.1 and 7, Table 6): recipes/bsc_bio_es.sh's stages for four models, all fine-tuned on NER and reported side
# by side:
#   base         RoBERTa-base pretrained with masked LM (--task document_mlm)
#   large        RoBERTa-large pretrained the same way: the teacher
#   distilled    base distilled from large (--criterion mlm_distillation: 5.0 x MLM + 2.0 x KL at temperature 2 +
#                1.0 x cosine of the last hidden states through a learned projection), DISTIL_UPDATES more updates
#   base_longer  the paper's control: base trained DISTIL_UPDATES more updates with masked LM alone, same schedule
#
#   bash recipes/bio_lm.sh                                          # PRESET=tiny: the bundled sample, CPU, minutes
#   PRESET=paper SOURCES="pubmed=raw/pubmed mimic=raw/mimic" NER_DATA="ncbi=data/ncbi_disease" NUM_GPUS=8 bash recipes/bio_lm.sh
#
# Everything else works as in recipes/bsc_bio_es.sh; the settings and presets are in docs/recipes.md. Instead of ARCH
# and PEAK_LR it takes BASE_ARCH, LARGE_ARCH, BASE_LR, LARGE_LR, LARGE_MAX_UPDATE (the teacher's updates), and for the
# distillation and its control DISTIL_UPDATES, DISTIL_LR, DISTIL_WARMUP_UPDATES, ALPHA_MLM, ALPHA_KL, TEMPERATURE and
# ALPHA_COS (0: the paper's "distill" row without alignment); CORPUS_LANG. It pretrains at one length from scratch
# (no PHASE2_*, no INIT_FROM), and every model keeps its final checkpoint.
[ -n "${BASH_VERSION:-}" ] || { echo "bio_lm.sh: error: a bash script; run it with bash: bash $0" >&2; exit 1; }
set -euo pipefail

RECIPE=bio_lm
# shellcheck source=lib/recipe.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/recipe.sh"
recipe_run  # its stages: biofairseq/recipe/recipes.py
