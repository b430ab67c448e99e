"""The fast path of issue 17: self-attention through torch's SDPA (--attention sdpa), torch's fused AdamW
(--optimizer fused_adamw) and bf16 autocast (--amp-bf16), against fairseq's own on real batches. Resuming with all
three, and compiled layers (biofairseq-train --compile): test_training.py."""

import copy

import pytest
import torch
from fairseq.modules.multihead_attention import MultiheadAttention
from fairseq.modules.transformer_layer import TransformerEncoderLayerBase

from biofairseq.models.attention import SdpaSelfAttention, use_attention
from biofairseq.models.compiled_layers import compile_layers
from conftest import TINY, build_in_process, valid_batch

ELECTRA = ["--task", "electra", "--criterion", "electra", "--arch", "electra_tiny", "--tokens-per-sample", "128",
           "--optimizer", "adam", "--lr", "1e-3", "--cpu", "--seed", "1"]
NO_DROPOUT = ["--dropout", "0", "--attention-dropout", "0"]


def mlm(arch):
    return [*(f if f != "bio_roberta_tiny" else arch for f in TINY[2:]), "--total-num-update", "10"]  # and --user-dir


def self_attentions(model):
    return [m for m in model.modules() if isinstance(m, MultiheadAttention) and m.self_attention]


def features(model, tokens):
    """The final hidden states (ELECTRA: of both towers), the tensors fine-tuning starts from."""
    if hasattr(model, "discriminator_features"):
        return torch.cat([model.generator_features(tokens), model.discriminator_features(tokens)], dim=-1)
    return model(tokens, features_only=True)[0]


@pytest.mark.parametrize("flags", [mlm("bio_roberta_tiny"), mlm("bio_megatron_tiny"), ELECTRA],
                         ids=["post-LN", "pre-LN", "electra"])
def test_sdpa_equals_fairseqs_attention_on_a_padded_batch(bytebpe_corpus, flags):
    task, stock, _ = build_in_process(bytebpe_corpus.data_bin, *flags, *NO_DROPOUT, "--attention", "fairseq")
    fast = use_attention(copy.deepcopy(stock), "sdpa")
    assert self_attentions(stock) and all(type(m) is MultiheadAttention for m in self_attentions(stock))
    assert all(type(m) is SdpaSelfAttention for m in self_attentions(fast))
    assert fast.state_dict().keys() == stock.state_dict().keys()  # same parameters, same checkpoints
    tokens = valid_batch(task, 0, 8)["net_input"]["src_tokens"]
    assert tokens.eq(task.source_dictionary.pad()).any(dim=1).sum() >= 4  # most rows padded
    for mode in ("eval", "train"):  # train: fairseq's training branches, without dropout so that they compare
        outputs = []
        for model in (stock, fast):
            getattr(model, mode)()
            model.zero_grad()
            outputs.append(features(model, tokens))
            outputs[-1].pow(2).mean().backward()
        torch.testing.assert_close(outputs[1], outputs[0], rtol=1e-5, atol=1e-5)
        for (name, p), q in zip(stock.named_parameters(), fast.parameters()):
            if p.grad is not None:
                torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-7, msg=lambda m: f"{name}: {m}")


def test_flags_select_the_fast_path_and_the_default_is_fairseqs(bytebpe_corpus):
    from fairseq import optim

    _, default, _ = build_in_process(bytebpe_corpus.data_bin, *mlm("bio_roberta_tiny"))
    assert all(type(m) is MultiheadAttention for m in self_attentions(default))
    for flags, layers in ((mlm("bio_roberta_tiny"), 2), (ELECTRA, 4)):
        _, model, _ = build_in_process(bytebpe_corpus.data_bin, *flags, "--attention", "sdpa")
        assert all(type(m) is SdpaSelfAttention for m in self_attentions(model))
        # biofairseq-train --compile (a compiled run: test_training.py): every layer, both towers', parameter names kept
        names = list(model.state_dict())
        compiled = [m for m in compile_layers(model, "aot_eager").modules() if getattr(m, "_compiled_call_impl", None)]
        assert len(compiled) == layers and all(isinstance(m, TransformerEncoderLayerBase) for m in compiled)
        assert list(model.state_dict()) == names

    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    from biofairseq.user_dir import USER_DIR

    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(bytebpe_corpus.data_bin), "--user-dir", USER_DIR, *mlm("bio_roberta_tiny"),
        "--optimizer", "fused_adamw", "--adam-betas", "(0.9,0.98)", "--adam-eps", "1e-6", "--weight-decay", "0.01"])
    cfg = convert_namespace_to_omegaconf(args)
    optimizer = optim.build_optimizer(cfg.optimizer, list(default.parameters()))
    torch_adamw = optimizer.optimizer
    assert type(torch_adamw) is torch.optim.AdamW and torch_adamw.defaults["fused"] is True
    assert (torch_adamw.defaults["betas"], torch_adamw.defaults["eps"], torch_adamw.defaults["weight_decay"]) == ((0.9, 0.98), 1e-6, 0.01)
    assert optimizer.supports_flat_params  # or --fp16 (fairseq's flat fp32 master copy) refuses it


def test_fused_adamw_takes_the_steps_of_fairseqs_adam(bytebpe_corpus):
    """Five steps on real gradients, weight decay on. eps is tiny here: fairseq's adam adds it before the bias
    correction and torch's after, the one place where the two differ."""
    from fairseq.optim.adam import Adam

    task, model, criterion = build_in_process(bytebpe_corpus.data_bin, *mlm("bio_roberta_tiny"), *NO_DROPOUT)
    twin, start = copy.deepcopy(model), copy.deepcopy(model)
    settings = dict(lr=1e-3, betas=(0.9, 0.98), eps=1e-12, weight_decay=0.01)
    theirs, ours = Adam(model.parameters(), **settings), torch.optim.AdamW(twin.parameters(), fused=True, **settings)
    for step in range(5):
        batch = valid_batch(task, 8 * step, 8)
        loss, _, _ = criterion(model, batch)
        loss.backward()
        for p, q in zip(model.parameters(), twin.parameters()):
            q.grad = None if p.grad is None else p.grad.clone()
        theirs.step(), ours.step()
        theirs.zero_grad(), ours.zero_grad()
    # Within 1% of one step's size (lr): the kernels sum in other orders, and m / sqrt(v) of a near-zero gradient
    # magnifies that. A wrong bias correction or an L2 (not decoupled) weight decay would be off by a good part of lr.
    for (name, p), q, p0 in zip(model.named_parameters(), twin.parameters(), start.parameters()):
        if name.endswith("k_proj.bias"):  # its gradient is 0 up to rounding (a key bias shifts every score of a query
            continue                      # alike), so m / sqrt(v) is rounding noise over rounding noise
        assert not torch.equal(p, p0), name  # every parameter moved (weight decay moves even the unused ones)
        torch.testing.assert_close(q, p, rtol=0, atol=0.01 * settings["lr"], msg=lambda m: f"{name}: {m}")
    assert max((p - p0).abs().max() for p, p0 in zip(model.parameters(), start.parameters())) > 4 * settings["lr"]


@pytest.mark.parametrize("flags", [mlm("bio_roberta_tiny"), ELECTRA], ids=["roberta", "electra"])
def test_amp_bf16_computes_in_bf16_with_fp32_weights_and_gradients(bytebpe_corpus, flags):
    task, model, criterion = build_in_process(bytebpe_corpus.data_bin, *flags, *NO_DROPOUT, "--amp-bf16")
    _, fp32, _ = build_in_process(bytebpe_corpus.data_bin, *flags, *NO_DROPOUT)
    assert model.amp_bf16 and not fp32.amp_bf16
    batch = valid_batch(task, 0, 8)
    tokens = batch["net_input"]["src_tokens"]
    dtypes = []  # of what every feed-forward layer computes
    for module in model.modules():
        if isinstance(module, torch.nn.Linear) and module.out_features > module.in_features:
            module.register_forward_hook(lambda module, args, output: dtypes.append(output.dtype))
    if hasattr(model, "discriminator_features"):
        # the generator's (the discriminator reads the generator's random samples)
        logits = model(tokens, batch["target"])["generator_logits"]
        reference = fp32(tokens, batch["target"])["generator_logits"]
    else:
        logits, reference = model(tokens)[0], fp32(tokens)[0]
    assert dtypes and set(dtypes) == {torch.bfloat16}
    # bf16 keeps 8 bits of mantissa: the same function, to about 1%
    assert (logits.float() - reference).abs().mean() < 0.02 * reference.abs().mean()
    loss, _, _ = criterion(model, batch)
    loss.backward()
    assert loss.dtype == torch.float32
    assert all(p.dtype == torch.float32 and (p.grad is None or p.grad.dtype == torch.float32) for p in model.parameters())
