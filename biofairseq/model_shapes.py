"""The named model shapes (fairseq-train --arch), as data: the models register them (bio_roberta.py, electra.py), and
the recipes check ARCH against them before any work without importing fairseq (biofairseq/recipe/table.py)."""

# name: dict(layers, embed_dim, ffn_dim, heads[, pre_ln]) of the bio_roberta model
BIO_ROBERTA = {
    "bio_roberta_tiny": dict(layers=2, embed_dim=128, ffn_dim=512, heads=2),
    # the teacher of recipes/bio_lm.sh's tiny preset: twice bio_roberta_tiny's width and depth
    "bio_roberta_small": dict(layers=4, embed_dim=256, ffn_dim=1024, heads=4),
    # Turc et al. 2019's miniature BERT L-6_H-512_A-8, for a few million tokens of in-house text (recipes/bsc_bio_es.sh's
    # PRESET=one_gpu): the shape that beat its random-init twin on one H100 (benchmarks/results/pretraining_vs_random_init.md)
    "bio_roberta_l6_h512": dict(layers=6, embed_dim=512, ffn_dim=2048, heads=8),
    "bio_roberta_base": dict(layers=12, embed_dim=768, ffn_dim=3072, heads=12),
    "bio_roberta_large": dict(layers=24, embed_dim=1024, ffn_dim=4096, heads=16),
    # BETO (Cañete et al.): BERT-base, with a 32k SentencePiece vocabulary (the recipe's, not the shape's)
    "beto_base": dict(layers=12, embed_dim=768, ffn_dim=3072, heads=12),
    # BioMegatron (Shin et al. 2020). The paper gives parameter counts only. 345m is Megatron-LM's BERT-large shape (its
    # model card: 24 layers, 16 heads, 1024 hidden). 800m and 1.2b are our choice of Megatron-LM shapes that have those
    # counts: 36 x 1280 (GPT-2 large's shape, 0.71B in the layers), and 24 x 2048 (Megatron-LM's "1.3B" BERT, 1.21B in
    # the layers, the general-domain model that BioMegatron-1.2b continued from).
    "bio_megatron_tiny": dict(layers=2, embed_dim=128, ffn_dim=512, heads=2, pre_ln=True),
    "bio_megatron_345m": dict(layers=24, embed_dim=1024, ffn_dim=4096, heads=16, pre_ln=True),
    "bio_megatron_800m": dict(layers=36, embed_dim=1280, ffn_dim=5120, heads=20, pre_ln=True),
    "bio_megatron_1_2b": dict(layers=24, embed_dim=2048, ffn_dim=8192, heads=32, pre_ln=True),
}

# name: dict(layers, width, ffn, heads) of the bio_modernbert model; ffn is GeGLU's inner width (ModernBERT's
# intermediate_size). base and large are ModernBERT's (Warner et al. 2024); tiny, for tests and pilots, has
# bio_roberta_tiny's layer parameters within 1% (399,360 against 396,544; 3 x 128: a global layer and two local ones,
# as ModernBERT alternates them; GeGLU 176, 1.375 x the width where ModernBERT-base has 1.5).
BIO_MODERNBERT = {
    "bio_modernbert_tiny": dict(layers=3, width=128, ffn=176, heads=2),
    "bio_modernbert_base": dict(layers=22, width=768, ffn=1152, heads=12),
    "bio_modernbert_large": dict(layers=28, width=1024, ffn=2624, heads=16),
}

# name: dict(layers, width, heads, embedding_dim, fraction) of the electra model: google-research/electra's
# configure_pretraining.py model sizes; BioELECTRA's is base (768/256)
ELECTRA = {
    "electra_tiny": dict(layers=2, width=128, heads=2, embedding_dim=128, fraction=1 / 2),
    # the pilot's deeper and wider discriminator: bio_roberta_small's shape (4 x 256), for ELECTRA against masked LM
    "electra_l4_h256": dict(layers=4, width=256, heads=4, embedding_dim=256, fraction=1 / 2),
    # bioelectra.sh's PRESET=one_gpu: the discriminator of bsc_bio_es.sh's one_gpu masked LM (bio_roberta_l6_h512), so
    # that both compare with one random-init twin; the generator 1/4 as wide, as the CPU pilots chose
    "electra_l6_h512": dict(layers=6, width=512, heads=8, embedding_dim=512, fraction=1 / 4),
    "electra_small": dict(layers=12, width=256, heads=4, embedding_dim=128, fraction=1 / 4),
    "electra_base": dict(layers=12, width=768, heads=12, embedding_dim=768, fraction=1 / 3),
    "electra_large": dict(layers=24, width=1024, heads=16, embedding_dim=1024, fraction=1 / 4),
    "bio_electra_base": dict(layers=12, width=768, heads=12, embedding_dim=768, fraction=1 / 3),
}

# --embedding-sharing of the electra model; the recipe checks EMBEDDING_SHARING against the same list
ELECTRA_SHARING = ("tied", "gdes", "detached", "none")


def electra_generator(width: int, fraction: float) -> tuple[int, int, int]:
    """(width, FFN width, heads) of ELECTRA's generator beside a discriminator this wide: width x fraction, heads =
    its width / 64 (at least 1), FFN 4 x its width, as google-research/electra sizes it."""
    generator = int(round(width * fraction))
    heads = max(1, generator // 64)
    if generator < 1:
        raise ValueError(f"--generator-width-fraction {fraction}: a generator of width 0 beside {width}; choose a larger one")
    if generator % heads:
        raise ValueError(f"--generator-width-fraction {fraction}: generator width {generator} is not a multiple of its "
                         f"{heads} heads; choose a fraction that gives a multiple of 64")
    return generator, 4 * generator, heads
