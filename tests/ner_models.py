"""Tiny transformers encoders for the NER tests: a real byte-level BPE learned on PharmaCoNER text, random weights.

The directory has the shape ``biofairseq-convert to-hf`` writes (a masked LM with its tokenizer), so the
NER commands load it the way they load a converted checkpoint.
"""

from pathlib import Path

from biofairseq.dev.samples import PHARMACONER


def tiny_roberta(out_dir, vocab_size=2000, max_positions=130, seed=0):
    import torch
    from transformers import RobertaConfig, RobertaForMaskedLM, RobertaTokenizer

    from biofairseq.corpus.vocab import train_bytelevel_bpe

    out_dir = Path(out_dir)
    vocab = out_dir / "vocab"
    vocab.mkdir(parents=True, exist_ok=True)
    train_bytelevel_bpe(sorted((PHARMACONER / "train").glob("*.txt"))[:200], vocab, vocab_size)
    tokenizer = RobertaTokenizer(str(vocab / "vocab.json"), str(vocab / "merges.txt"), model_max_length=max_positions - 2)
    torch.manual_seed(seed)
    config = RobertaConfig(vocab_size=len(tokenizer), hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=128, max_position_embeddings=max_positions, pad_token_id=tokenizer.pad_token_id,
                           bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, layer_norm_eps=1e-5)
    RobertaForMaskedLM(config).save_pretrained(out_dir / "model")
    tokenizer.save_pretrained(out_dir / "model")
    return out_dir / "model"
