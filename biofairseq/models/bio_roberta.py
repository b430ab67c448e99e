"""Named RoBERTa shapes of the papers, registered on fairseq's own ``roberta`` model."""

from fairseq.models import register_model_architecture
from fairseq.models.roberta.model import base_architecture
from fairseq.utils import safe_getattr


def _preset(name, layers, embed_dim, ffn_dim, heads):
    def architecture(args):
        args.encoder_layers = safe_getattr(args, "encoder_layers", layers)
        args.encoder_embed_dim = safe_getattr(args, "encoder_embed_dim", embed_dim)
        args.encoder_ffn_embed_dim = safe_getattr(args, "encoder_ffn_embed_dim", ffn_dim)
        args.encoder_attention_heads = safe_getattr(args, "encoder_attention_heads", heads)
        # 512 positions + padding_idx + 1 = the 514 position embeddings of the released models.
        args.max_positions = safe_getattr(args, "max_positions", 512)
        base_architecture(args)  # dropout 0.1, attention dropout 0.1, post-LN, GELU, tied output

    architecture.__name__ = f"{name}_architecture"
    architecture.__doc__ = f"{name}: {layers} layers, {embed_dim} hidden, {ffn_dim} FFN, {heads} heads."
    return register_model_architecture("roberta", name)(architecture)


bio_roberta_tiny = _preset("bio_roberta_tiny", layers=2, embed_dim=128, ffn_dim=512, heads=2)
# the teacher of recipes/bio_lm.sh's tiny preset: twice bio_roberta_tiny's width and depth
bio_roberta_small = _preset("bio_roberta_small", layers=4, embed_dim=256, ffn_dim=1024, heads=4)
bio_roberta_base = _preset("bio_roberta_base", layers=12, embed_dim=768, ffn_dim=3072, heads=12)
bio_roberta_large = _preset("bio_roberta_large", layers=24, embed_dim=1024, ffn_dim=4096, heads=16)
