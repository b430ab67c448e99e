"""transformers RoBERTa-family directory -> fairseq checkpoint (model.pt), dict.txt and vocabulary files, so that
pretraining continues from a published model with fairseq-train --restore-file."""

from pathlib import Path

import torch

from transformers.initialization import no_init_weights

from biofairseq import checkpoints
from biofairseq.arguments import first_line
from biofairseq.convert import ConvertError, layouts, parity, vocabulary

FAIRSEQ_LAYER_NORM_EPS = 1e-5  # fairseq's LayerNorm has no other
# transformers tensors with a row per token id, reordered with the dictionary (``vocabulary.fairseq_order``)
VOCABULARY_ROWS = ("word_embeddings.weight", "tok_embeddings.weight", "decoder.weight", "decoder.bias", "lm_head.bias")


def _settings(config, layout, hf_dir):
    act = {v: k for k, v in layouts.ACTIVATIONS.items()}.get(config.hidden_act)
    problems = []
    if act is None:
        problems.append(f"hidden_act {config.hidden_act}")
    if getattr(config, "position_embedding_type", "absolute") != "absolute":
        problems.append(f"position_embedding_type {config.position_embedding_type}")
    if config.type_vocab_size != 1:
        problems.append(f"type_vocab_size {config.type_vocab_size} (fairseq RoBERTa has no token types)")
    if config.pad_token_id != 1:
        problems.append(f"pad_token_id {config.pad_token_id} (fairseq's positions need 1)")
    if getattr(config, "is_decoder", False):
        problems.append("is_decoder")
    if problems:
        raise ConvertError(f"{hf_dir}: {', '.join(problems)}: no fairseq RoBERTa computes this model")
    return {
        "encoder_layers": config.num_hidden_layers, "encoder_embed_dim": config.hidden_size,
        "encoder_ffn_embed_dim": config.intermediate_size, "encoder_attention_heads": config.num_attention_heads,
        "max_positions": config.max_position_embeddings - config.pad_token_id - 1, "activation_fn": act,
        "encoder_normalize_before": layout.normalize_before, "layernorm_embedding": layout.layernorm_embedding,
        "untie_weights_roberta": not config.tie_word_embeddings, "dropout": config.hidden_dropout_prob,
        "attention_dropout": config.attention_probs_dropout_prob,
    }


def _modernbert_settings(config, hf_dir):
    """The bio_modernbert settings of a transformers ModernBERT, or the reasons none computes it."""
    act = {v: k for k, v in layouts.ACTIVATIONS.items()}.get(config.hidden_activation)
    every = config.global_attn_every_n_layers if hasattr(config, "global_attn_every_n_layers") else 3
    layer_types = ["full_attention" if i % every == 0 else "sliding_attention" for i in range(config.num_hidden_layers)]
    rope = config.rope_parameters
    problems = [name for name, wrong in (
        (f"hidden_activation {config.hidden_activation}", act is None),
        (f"classifier_activation {config.classifier_activation} (fairseq's head uses hidden_activation's)",
         config.classifier_activation != config.hidden_activation),
        ("biases (norm_bias, attention_bias, mlp_bias or classifier_bias)",
         config.norm_bias or config.attention_bias or config.mlp_bias or config.classifier_bias),
        ("decoder_bias false", not config.decoder_bias),
        ("untied word embeddings", not config.tie_word_embeddings),
        (f"layer_types {config.layer_types} (not every n-th layer global from the first)",
         list(config.layer_types) != layer_types),
        ("rope scaling", any(rope[t].get("rope_type", "default") != "default" for t in rope)),
    ) if wrong]
    if problems:
        raise ConvertError(f"{hf_dir}: {', '.join(problems)}: no fairseq bio_modernbert computes this model")
    return {
        "encoder_layers": config.num_hidden_layers, "encoder_embed_dim": config.hidden_size,
        "encoder_ffn_embed_dim": config.intermediate_size, "encoder_attention_heads": config.num_attention_heads,
        "local_attention": config.local_attention, "global_attn_every_n_layers": every,
        "global_rope_theta": float(rope["full_attention"]["rope_theta"]),
        "local_rope_theta": float(rope["sliding_attention"]["rope_theta"]), "activation_fn": act,
        "max_positions": config.max_position_embeddings, "dropout": float(config.embedding_dropout),
        "activation_dropout": float(config.mlp_dropout), "attention_dropout": float(config.attention_dropout),
    }


def convert(hf_dir, output, final_output, verify=True, log=print):
    """Writes into ``output``; the checkpoint names ``final_output`` as its data-bin, where dict.txt will be."""
    import transformers

    hf_dir = Path(hf_dir)
    if not (hf_dir / "config.json").is_file():
        raise ConvertError(f"{hf_dir}: no config.json; give a transformers model folder (save_pretrained's output)")
    try:
        model, info = transformers.AutoModelForMaskedLM.from_pretrained(hf_dir, output_loading_info=True)
    except (ValueError, OSError, KeyError) as error:
        raise ConvertError(f"{hf_dir}: not loadable as a masked LM ({first_line(error)})") from None
    model = model.float().eval()
    layout = layouts.layout_for_hf(type(model).__name__)
    if layout is None:
        raise ConvertError(
            f"{hf_dir}: a {type(model).__name__}; from-hf converts RoBERTa-family masked LMs "
            f"({', '.join(c for l in (*layouts.LAYOUTS, layouts.MODERNBERT) for c in (l.model_class, *l.also_reads))})"
        )
    config = model.config
    modernbert = layout is layouts.MODERNBERT
    if modernbert:
        settings = _modernbert_settings(config, hf_dir)
        flags = checkpoints.architecture_flags(settings, checkpoints.MODERNBERT_PRESETS)
    else:
        settings = _settings(config, layout, hf_dir)
        flags = checkpoints.architecture_flags(settings)
    if flags is None:
        raise ConvertError(f"{hf_dir}: no fairseq RoBERTa architecture has these settings: {settings}")
    notes = []
    eps_name = "norm_eps" if modernbert else "layer_norm_eps"
    if getattr(config, eps_name) != FAIRSEQ_LAYER_NORM_EPS:
        notes.append(f"{eps_name} {getattr(config, eps_name)} becomes fairseq's 1e-5")
    if any(k.startswith(("lm_head.", "head.", "decoder.")) for k in info["missing_keys"]):
        notes.append("the model has no trained LM head: fairseq gets transformers' random initialisation")
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(hf_dir)
    except (ValueError, OSError, KeyError, TypeError) as error:
        raise ConvertError(f"{hf_dir}: no tokenizer transformers can load ({first_line(error)}); the folder "
                           "needs the model's tokenizer files (save the tokenizer with save_pretrained too)") from None
    order = vocabulary.export_fairseq_vocabulary(tokenizer, config.vocab_size, hf_dir, output, renumber=modernbert)
    if order[:4] != [0, 1, 2, 3]:
        notes.append(f"token ids renumbered for fairseq's dictionary: ids {order[:4]} are now <s>, <pad>, </s>, <unk> "
                     "(0-3), the others follow in their order")
    dictionary = checkpoints.load_dictionary(output / "dict.txt")
    if len(dictionary) != config.vocab_size:
        raise ConvertError(
            f"{hf_dir}: the mask token's id {tokenizer.mask_token_id} is outside vocab_size {config.vocab_size}"
        )
    with no_init_weights():  # the transformers model's weights overwrite them all
        fairseq, cfg = checkpoints.new_model(flags, final_output, dictionary)
    weights = fairseq.state_dict()
    hf_weights = model.state_dict()
    rows = torch.tensor(order)
    for f, h in layout.names(config.num_hidden_layers):
        if f in weights:  # ModernBERT's first layer has no attention norm
            weights[f] = hf_weights[h][rows] if h.endswith(VOCABULARY_ROWS) else hf_weights[h]
    token_types = next((v for k, v in hf_weights.items() if k.endswith("embeddings.token_type_embeddings.weight")), None)
    if token_types is not None and token_types.abs().max() > 0:  # every token adds row 0; fairseq adds it through the positions instead
        positions = layouts.FAIRSEQ_ENCODER + "embed_positions.weight"
        weights[positions] = weights[positions] + token_types[0]
        notes.append("the token type embedding (row 0) is folded into the position embeddings")
    fairseq.load_state_dict(weights, strict=True)
    checkpoints.save(output / "model.pt", fairseq, cfg)
    del fairseq, weights, hf_weights  # the check reloads what was written
    report = {
        "direction": "from-hf", "source": str(hf_dir.resolve()), "layout": layout.name, "transformers_class": type(model).__name__,
        "fairseq_flags": flags, "dictionary_size": len(dictionary), "notes": notes, "parity": None,
    }
    log(f"{type(model).__name__} -> fairseq {' '.join(flags)} ({layout.name})")
    for note in notes:
        log(f"note: {note}")
    if verify:
        reloaded = checkpoints.load(output / "model.pt", output / "dict.txt")
        encode = vocabulary.FairseqEncoding(vocabulary.from_folder(output), reloaded.dictionary)
        parity.verify(reloaded.model, encode, model, tokenizer, dictionary, report, log,
                      f"{hf_dir}: the converted checkpoint", long=layout.long_context, hf_ids=order)
    return report
