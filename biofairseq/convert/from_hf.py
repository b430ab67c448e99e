"""transformers RoBERTa-family directory -> fairseq checkpoint (model.pt), dict.txt and vocabulary files, so that
pretraining continues from a published model with fairseq-train --restore-file."""

from pathlib import Path

from transformers.initialization import no_init_weights

from biofairseq import checkpoints
from biofairseq.arguments import first_line
from biofairseq.convert import ConvertError, layouts, parity, vocabulary

FAIRSEQ_LAYER_NORM_EPS = 1e-5  # fairseq's LayerNorm has no other


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
            f"({', '.join(c for l in layouts.LAYOUTS for c in (l.model_class, *l.also_reads))})"
        )
    config = model.config
    settings = _settings(config, layout, hf_dir)
    flags = checkpoints.architecture_flags(settings)
    if flags is None:
        raise ConvertError(f"{hf_dir}: no fairseq RoBERTa architecture has these settings: {settings}")
    notes = []
    if config.layer_norm_eps != FAIRSEQ_LAYER_NORM_EPS:
        notes.append(f"layer_norm_eps {config.layer_norm_eps} becomes fairseq's 1e-5")
    if any(k.startswith("lm_head.") for k in info["missing_keys"]):
        notes.append("the model has no trained LM head: fairseq gets transformers' random initialisation")
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(hf_dir)
    except (ValueError, OSError, KeyError, TypeError) as error:
        raise ConvertError(f"{hf_dir}: no tokenizer transformers can load ({first_line(error)}); the folder "
                           "needs the model's tokenizer files (save the tokenizer with save_pretrained too)") from None
    vocabulary.export_fairseq_vocabulary(tokenizer, config.vocab_size, hf_dir, output)
    dictionary = checkpoints.load_dictionary(output / "dict.txt")
    if len(dictionary) != config.vocab_size:
        raise ConvertError(
            f"{hf_dir}: the mask token's id {tokenizer.mask_token_id} is outside vocab_size {config.vocab_size}"
        )
    with no_init_weights():  # the transformers model's weights overwrite them all
        fairseq, cfg = checkpoints.new_model(flags, final_output, dictionary)
    weights = fairseq.state_dict()
    hf_weights = model.state_dict()
    for f, h in layout.names(config.num_hidden_layers):
        weights[f] = hf_weights[h]
    token_types = next(v for k, v in hf_weights.items() if k.endswith("embeddings.token_type_embeddings.weight"))
    if token_types.abs().max() > 0:  # every token adds row 0; fairseq adds it through the positions instead
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
                      f"{hf_dir}: the converted checkpoint")
    return report
