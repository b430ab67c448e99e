"""biofairseq-convert on ELECTRA checkpoints of the real clinical-cases vocabulary: both towers, every embedding
sharing, the same parity bar as RoBERTa."""

import json

import pytest
import torch

from test_electra import ELECTRA, SHARING


def electra_checkpoint(data_bin, folder, *flags):
    """folder/checkpoint_last.pt: an ELECTRA built as fairseq-train builds it (the recipe test converts one that
    fairseq-train trained), every weight moved off its initial value, GDES's delta included, and saved in fairseq's
    checkpoint format with its --bpe settings."""
    from fairseq import tasks

    from biofairseq.bpe_flags import flags as bpe_flags  # what `python -m biofairseq.bpe_flags` prints
    from biofairseq.checkpoints import save
    from biofairseq.dev.samples import fairseq_train_config

    cfg = fairseq_train_config(data_bin, *ELECTRA, "--total-num-update", "1", *flags, *bpe_flags(data_bin))
    torch.manual_seed(0)
    model = tasks.setup_task(cfg.task).build_model(cfg.model)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.02 * torch.randn_like(parameter))
    save(folder / "checkpoint_last.pt", model, cfg)
    return folder / "checkpoint_last.pt"


@pytest.fixture(scope="module")
def electra_runs(bytebpe_corpus, tmp_path_factory):
    """sharing -> folder with checkpoint_last.pt of electra_tiny (see electra_checkpoint)."""
    return {sharing: electra_checkpoint(bytebpe_corpus.data_bin, tmp_path_factory.mktemp(f"electra_{sharing}"),
                                        "--embedding-sharing", sharing).parent for sharing in SHARING}


def convert(*args):
    from biofairseq.convert.cli import main

    return main([str(a) for a in args])


@pytest.mark.parametrize("sharing", SHARING)
def test_both_towers_convert_with_parity_for_every_sharing(sharing, electra_runs, tmp_path):
    import transformers
    from safetensors.torch import load_file

    save_dir = electra_runs[sharing]
    checkpoint = save_dir / "checkpoint_last.pt"
    out = tmp_path / "hf"
    assert convert("to-hf", checkpoint, out, "--generator") == 0
    report = json.loads((out / "conversion.json").read_text())
    for parity in (report["parity"], report["generator"]["parity"]):
        assert parity["ids_identical"] and max(parity["max_abs_diff_logits"], parity["max_abs_diff_hidden"]) <= 1e-4
    discriminator = transformers.ElectraForPreTraining.from_pretrained(out)
    generator = transformers.ElectraForMaskedLM.from_pretrained(out / "generator")
    assert transformers.AutoModelForTokenClassification.from_pretrained(out, num_labels=3).__class__.__name__ == \
        "ElectraForTokenClassification"
    assert discriminator.config.max_position_embeddings == 512 and discriminator.config.layer_norm_eps == 1e-5
    assert generator.config.hidden_size == 64 and generator.config.embedding_size == 128
    state = torch.load(checkpoint)["model"]
    written = load_file(out / "model.safetensors")["electra.embeddings.word_embeddings.weight"]
    if sharing == "gdes":  # the discriminator's table is materialised: the generator's plus its delta
        delta = state["discriminator_embeddings.token_delta"]
        assert delta.abs().sum() > 0
        assert torch.equal(written, state["embeddings.embed_tokens.weight"] + delta)
    elif sharing in ("tied", "detached"):
        assert torch.equal(written, state["embeddings.embed_tokens.weight"])
    else:
        assert torch.equal(written, state["discriminator_embeddings.embed_tokens.weight"])
    # positions from 0 in transformers: fairseq's padding_idx + 1 leading rows are gone
    assert torch.equal(generator.electra.embeddings.position_embeddings.weight.data,
                       state["embeddings.embed_positions.weight"][2:].float())


def test_a_random_init_twin_of_a_discriminator_has_its_class_and_shape_and_new_weights(electra_runs, tmp_path):
    import transformers
    from safetensors.torch import load_file

    from biofairseq.recipe.random_init import main

    assert convert("to-hf", electra_runs["tied"] / "checkpoint_last.pt", tmp_path / "hf") == 0
    assert main([str(tmp_path / "hf"), str(tmp_path / "random")]) == 0
    config = lambda folder: {k: v for k, v in transformers.AutoConfig.from_pretrained(folder).to_dict().items()
                             if k != "_name_or_path"}
    assert config(tmp_path / "random")["architectures"] == ["ElectraForPreTraining"]
    assert config(tmp_path / "random") == config(tmp_path / "hf")
    trained, random = load_file(tmp_path / "hf" / "model.safetensors"), load_file(tmp_path / "random" / "model.safetensors")
    assert trained.keys() == random.keys()
    key = "electra.encoder.layer.0.intermediate.dense.weight"
    assert not torch.equal(trained[key], random[key])


def test_electra_smalls_narrower_embeddings_convert_through_both_towers_projections(bytebpe_corpus, tmp_path):
    """electra_small: embeddings of 128 under a 256-wide discriminator and a 64-wide generator, each tower with its
    own projection (transformers' embeddings_project), 12 layers each."""
    import transformers
    from safetensors.torch import load_file

    checkpoint = electra_checkpoint(bytebpe_corpus.data_bin, tmp_path, "--arch", "electra_small")
    out = tmp_path / "hf"
    assert convert("to-hf", checkpoint, out, "--generator") == 0
    report = json.loads((out / "conversion.json").read_text())
    for parity in (report["parity"], report["generator"]["parity"]):
        assert parity["ids_identical"] and max(parity["max_abs_diff_logits"], parity["max_abs_diff_hidden"]) <= 1e-4
    state = torch.load(checkpoint)["model"]
    for folder, tower, width in ((out, "discriminator", 256), (out / "generator", "generator", 64)):
        config = transformers.AutoConfig.from_pretrained(folder)
        assert (config.embedding_size, config.hidden_size, config.num_hidden_layers) == (128, width, 12)
        written = load_file(folder / "model.safetensors")
        assert torch.equal(written["electra.embeddings_project.weight"], state[f"{tower}.embed_proj.weight"])
        assert tuple(written["electra.embeddings_project.weight"].shape) == (width, 128)
