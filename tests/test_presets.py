"""The papers' encoder shapes: parameter counts computed here from the shape alone, against the models fairseq
builds from the presets (built with fake tensors: shapes without memory, so that 1.2B parameters cost nothing)."""

import pytest
import torch

from biofairseq.dev.samples import expected_parameters


PRESETS = {  # name: (layers, width, FFN, heads, pre-LN)
    "bio_megatron_345m": (24, 1024, 4096, 16, True),
    "bio_megatron_800m": (36, 1280, 5120, 20, True),
    "bio_megatron_1_2b": (24, 2048, 8192, 32, True),
    "beto_base": (12, 768, 3072, 12, False),
    "bio_roberta_base": (12, 768, 3072, 12, False),
    "bio_roberta_l6_h512": (6, 512, 2048, 8, False),
}
VOCABULARY = {"bio_megatron_345m": 30000, "bio_megatron_800m": 50000, "bio_megatron_1_2b": 30000, "beto_base": 32000,
              "bio_roberta_base": 50262, "bio_roberta_l6_h512": 8000}


def build(arch, vocabulary, tmp_path, *flags):
    from fairseq.data import Dictionary
    from torch._subclasses.fake_tensor import FakeTensorMode

    from biofairseq.checkpoints import DictionaryTask, training_config

    dictionary = Dictionary()  # 4 specials, then the vocabulary's other entries, <mask> last
    for i in range(vocabulary - 5):
        dictionary.add_symbol(f"w{i}")
    dictionary.add_symbol("<mask>")
    cfg = training_config(["--arch", arch, *flags], tmp_path)
    with FakeTensorMode():
        model = DictionaryTask(dictionary).build_model(cfg.model)
    return model, cfg


LARGE = ("bio_megatron_345m", "bio_megatron_800m", "bio_megatron_1_2b")  # 1-2 s each: make test only


@pytest.mark.parametrize("arch", [pytest.param(a, marks=[] if a in LARGE else [pytest.mark.fast]) for a in PRESETS])
def test_presets_have_the_papers_shapes_and_parameter_counts(arch, tmp_path):
    layers, width, ffn, heads, pre_ln = PRESETS[arch]
    vocabulary = VOCABULARY[arch]
    model, cfg = build(arch, vocabulary, tmp_path)
    m = cfg.model
    assert (m.encoder_layers, m.encoder_embed_dim, m.encoder_ffn_embed_dim, m.encoder_attention_heads) == (layers, width, ffn, heads)
    assert (m.encoder_normalize_before, m.layernorm_embedding) == (pre_ln, not pre_ln)
    count = sum(p.numel() for p in model.parameters())
    assert count == expected_parameters(vocabulary, layers, width, ffn, pre_ln)
    # the names: BioMegatron's 345m/800m/1.2b counts and BERT-base's 110M, within 10% (the vocabulary decides the rest)
    nominal = {"bio_megatron_345m": 345e6, "bio_megatron_800m": 800e6, "bio_megatron_1_2b": 1.2e9, "beto_base": 110e6,
               "bio_roberta_base": 125e6}.get(arch)
    assert nominal is None or abs(count - nominal) / nominal < 0.1, f"{count:,}"


@pytest.mark.fast
def test_activation_checkpointing_recomputes_the_same_gradients(tmp_path):
    """--checkpoint-activations (BioMegatron's large shapes) changes memory, not the numbers."""
    from fairseq.data import Dictionary

    from biofairseq.checkpoints import new_model

    dictionary = Dictionary()
    for i in range(200):
        dictionary.add_symbol(f"w{i}")
    dictionary.add_symbol("<mask>")
    tokens = torch.randint(4, 204, (3, 40), generator=torch.Generator().manual_seed(0))
    gradients = []
    for flags in ([], ["--checkpoint-activations"]):
        torch.manual_seed(0)
        model, cfg = new_model(["--arch", "bio_megatron_tiny", "--dropout", "0", "--attention-dropout", "0", *flags],
                               tmp_path, dictionary)
        assert cfg.model.checkpoint_activations == bool(flags)
        assert all(hasattr(layer, "precheckpoint_forward") == bool(flags) for layer in model.encoder.sentence_encoder.layers)
        model.train()
        model(tokens)[0].float().logsumexp(-1).mean().backward()
        gradients.append({n: p.grad for n, p in model.named_parameters()})
    assert gradients[0].keys() == gradients[1].keys()
    for name in gradients[0]:
        torch.testing.assert_close(gradients[0][name], gradients[1][name], rtol=1e-5, atol=1e-6, msg=name)
