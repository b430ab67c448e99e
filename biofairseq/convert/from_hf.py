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


def _other_eps(config, modernbert):
    """The setting and value of a transformers model's LayerNorm epsilon where it is not fairseq's, else None."""
    name = "norm_eps" if modernbert else "layer_norm_eps"
    return (name, getattr(config, name)) if getattr(config, name) != FAIRSEQ_LAYER_NORM_EPS else None


def differences(config, modernbert):
    """The settings of a transformers model that its conversion computes otherwise, named for the messages: its
    LayerNorm epsilon (fairseq's is 1e-5 only). The parity check tells whether that matters for these weights."""
    other = _other_eps(config, modernbert)
    return [f"{other[0]} {other[1]} (fairseq's LayerNorms use 1e-5)"] if other else []


def _refuse(hf_dir, problems, config, modernbert):
    """One line naming every setting no fairseq model of the family computes (and the epsilon, where it differs too)."""
    named = "; ".join(problems + differences(config, modernbert))
    return ConvertError(
        f"{hf_dir}: {named}: no fairseq {'bio_modernbert' if modernbert else 'RoBERTa'} computes this model, so it "
        "cannot be converted (its weights were trained with these settings: editing config.json would change the model)"
    )


def _settings(config, layout, hf_dir):
    """The fairseq settings of a transformers RoBERTa-family model, or one line naming what no fairseq RoBERTa
    computes. Token types are not among them: fairseq has none, and transformers without token_type_ids uses
    type 0 only, which the conversion folds into the positions."""
    act = {v: k for k, v in layouts.ACTIVATIONS.items()}.get(config.hidden_act)
    pad, rows = config.pad_token_id, config.max_position_embeddings
    problems = [name for name, wrong in (
        (f"hidden_act {config.hidden_act} (fairseq computes {', '.join(layouts.ACTIVATIONS.values())} only)",
         act is None),
        (f"position_embedding_type {getattr(config, 'position_embedding_type', None)} (fairseq has learned absolute "
         "positions only)", getattr(config, "position_embedding_type", None) not in (None, "absolute")),
        (f"pad_token_id {pad} (RoBERTa's learned positions start at pad_token_id + 1, fairseq's at 2: it needs 1)",
         pad != 1),
        (f"max_position_embeddings {rows} (positions start at pad_token_id + 1 = 2: it leaves none)",
         pad == 1 and rows <= 2),
        ("is_decoder (causal attention; fairseq's encoder attends both ways)", getattr(config, "is_decoder", False)),
    ) if wrong]
    if problems:
        raise _refuse(hf_dir, problems, config, False)
    return {
        "encoder_layers": config.num_hidden_layers, "encoder_embed_dim": config.hidden_size,
        "encoder_ffn_embed_dim": config.intermediate_size, "encoder_attention_heads": config.num_attention_heads,
        "max_positions": rows - pad - 1, "activation_fn": act,
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
        raise _refuse(hf_dir, problems, config, True)
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
    if any(k.startswith(("lm_head.", "head.", "decoder.")) for k in info["missing_keys"]):
        notes.append("the model has no trained LM head: fairseq gets transformers' random initialisation")
    if getattr(config, "type_vocab_size", 1) > 1:
        notes.append(f"type_vocab_size {config.type_vocab_size}: only token type 0 is kept (fairseq has no token types; "
                     "transformers uses type 0 without token_type_ids, and a RoBERTa tokenizer gives none)")
    if not vocabulary.has_tokenizer(hf_dir):
        raise ConvertError(f"{hf_dir}: no tokenizer: looked for {vocabulary.TOKENIZER_FILES}; save the model's "
                           f"tokenizer into the folder too (tokenizer.save_pretrained(\"{hf_dir}\"))")
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(hf_dir)
    except (ValueError, OSError, KeyError, TypeError) as error:
        raise ConvertError(f"{hf_dir}: no tokenizer transformers can load ({first_line(error)}); the folder "
                           "needs the model's tokenizer files (save the tokenizer with save_pretrained too)") from None
    other = _other_eps(config, modernbert)
    if other:  # what that alone changes, measured on the transformers model before any conversion work
        (name, eps), moved = other, parity.layer_norm_eps_effect(model, tokenizer, FAIRSEQ_LAYER_NORM_EPS,
                                                                  layout.long_context)
        if verify and moved > parity.TOLERANCE:
            raise ConvertError(
                f"{hf_dir}: {name} {eps} in config.json, and fairseq's LayerNorms use 1e-5 (there is no other): with "
                f"1e-5 this model's outputs move by {moved:.2e} (tolerance {parity.TOLERANCE:.0e}), so it cannot be "
                f"converted exactly; setting 1e-5 in config.json changes the transformers model as much (its weights "
                f"were trained with {eps}); --no-verify converts it anyway, that difference included"
            )
        notes.append(f"{name} {eps} becomes fairseq's 1e-5: outputs move by {moved:.2e}")
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
                      f"{hf_dir}: the converted checkpoint", long=layout.long_context, hf_ids=order,
                      differs=differences(config, modernbert))
    return report
