"""The fast path: self-attention through torch's SDPA (--attention sdpa), torch's fused AdamW
(--optimizer fused_adamw) and bf16 autocast (--amp-bf16), against fairseq's own on real batches. Resuming with all
three, and compiled layers (biofairseq-train --compile): test_training.py."""

import copy
import re

import pytest
import torch
from fairseq.modules.multihead_attention import MultiheadAttention

from biofairseq.models.attention import SdpaSelfAttention
from biofairseq.dev.samples import build_in_process, fairseq_train_config, valid_batch
from conftest import TINY

pytestmark = pytest.mark.fast  # make test-fast

ELECTRA = ["--task", "electra", "--criterion", "electra", "--arch", "electra_tiny", "--tokens-per-sample", "128",
           "--optimizer", "adam", "--lr", "1e-3", "--cpu", "--seed", "1"]
NO_DROPOUT = ["--dropout", "0", "--attention-dropout", "0"]


def mlm(arch):
    return [*(f if f != "bio_roberta_tiny" else arch for f in TINY[2:]), "--total-num-update", "10"]  # and --user-dir


def self_attentions(model):
    return [m for m in model.modules() if isinstance(m, MultiheadAttention) and m.self_attention]


def with_sdpa(data_bin, flags, stock):
    """The same model built with --attention sdpa, holding ``stock``'s weights."""
    fast = build_in_process(data_bin, *flags, "--attention", "sdpa")[1]
    fast.load_state_dict(stock.state_dict())
    return fast.train(stock.training)


def features(model, tokens):
    """The final hidden states (ELECTRA: of both towers), the tensors fine-tuning starts from."""
    if hasattr(model, "discriminator_features"):
        return torch.cat([model.generator_features(tokens), model.discriminator_features(tokens)], dim=-1)
    return model(tokens, features_only=True)[0]


@pytest.mark.parametrize("flags", [mlm("bio_roberta_tiny"), mlm("bio_megatron_tiny"), ELECTRA],
                         ids=["post-LN", "pre-LN", "electra"])
def test_sdpa_equals_fairseqs_attention_on_a_padded_batch(bytebpe_corpus, flags):
    task, stock, _ = build_in_process(bytebpe_corpus.data_bin, *flags, *NO_DROPOUT, "--attention", "fairseq")
    fast = with_sdpa(bytebpe_corpus.data_bin, [*flags, *NO_DROPOUT], stock)
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
    for flags in (mlm("bio_roberta_tiny"), ELECTRA):
        _, model, _ = build_in_process(bytebpe_corpus.data_bin, *flags, "--attention", "sdpa")
        assert all(type(m) is SdpaSelfAttention for m in self_attentions(model))

    cfg = fairseq_train_config(bytebpe_corpus.data_bin, *mlm("bio_roberta_tiny"), "--optimizer", "fused_adamw",
                               "--adam-betas", "(0.9,0.98)", "--adam-eps", "1e-6", "--weight-decay", "0.01")
    optimizer = optim.build_optimizer(cfg.optimizer, list(default.parameters()))
    torch_adamw = optimizer.optimizer
    assert type(torch_adamw) is torch.optim.AdamW and torch_adamw.defaults["fused"] is True
    assert (torch_adamw.defaults["betas"], torch_adamw.defaults["eps"], torch_adamw.defaults["weight_decay"]) == ((0.9, 0.98), 1e-6, 0.01)
    assert optimizer.supports_flat_params  # or --fp16 (fairseq's flat fp32 master copy) refuses it


@pytest.mark.parametrize("clip", [0.0, 0.5], ids=["norm", "clipped"])
def test_the_multi_tensor_gradient_norm_is_fairseqs_in_a_few_calls(bytebpe_corpus, clip):
    """biofairseq-train's gradient norm and clipping (biofairseq.optim.grad_norm) against fairseq's clip_grad_norm_,
    on the gradients of a real ELECTRA batch (both towers: 79 tensors); the operators each dispatches counted (on a GPU
    each is a kernel launch, a multi-tensor one for the _foreach_ operators)."""
    from fairseq import utils
    from torch.utils._python_dispatch import TorchDispatchMode

    from biofairseq.optim.grad_norm import clip_grad_norm_

    class Calls(TorchDispatchMode):
        count = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Calls.count += func is not torch.ops.aten.detach.default  # a view: no kernel
            return func(*args, **(kwargs or {}))

    task, model, criterion = build_in_process(bytebpe_corpus.data_bin, *ELECTRA)
    loss, _, _ = criterion(model, valid_batch(task))
    loss.backward()
    params = [p for p in model.parameters() if p.grad is not None]
    grads = [p.grad.clone() for p in params]
    found = {}
    for name, clip_norm in (("fairseq", utils.clip_grad_norm_), ("ours", clip_grad_norm_)):
        for p, g in zip(params, grads):
            p.grad = g.clone()
        Calls.count = 0
        with Calls():
            total = clip_norm(params, clip)
        found[name] = total, [p.grad.clone() for p in params], Calls.count
    (theirs, their_grads, their_calls), (ours, our_grads, our_calls) = found["fairseq"], found["ours"]
    assert ours.dtype == torch.float32 and len(params) > 60
    torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=0)
    for a, b in zip(our_grads, their_grads):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-9)
    assert ours > clip and our_calls <= 12 < len(params) < their_calls, (our_calls, their_calls)


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


def test_amp_bf16_samples_from_fp32_generator_logits(bytebpe_corpus):
    """ELECTRA's generator under --amp-bf16: the layers compute in bf16, the vocabulary projection whose logits are
    sampled (and scored) in fp32, from the bf16 layers' output."""
    from biofairseq.data.host_counts import at_positions, flat_positions

    task, model, _ = build_in_process(bytebpe_corpus.data_bin, *ELECTRA, *NO_DROPOUT, "--amp-bf16")
    batch = valid_batch(task, 0, 8)
    tokens, targets = batch["net_input"]["src_tokens"], batch["target"]
    logits = model(tokens, targets)["generator_logits"]
    assert logits.dtype == torch.float32
    head = model.generator_head
    with model.autocast():  # the tower and the head's dense layer in bf16, as the model runs them
        features = model.generator_features(tokens)
        selected = at_positions(features, flat_positions(targets.ne(task.source_dictionary.pad())))
        hidden = head.layer_norm(head.activation_fn(head.dense(selected)))
    assert features.dtype == torch.bfloat16
    expected = hidden.float() @ head.weight.t() + head.bias  # outside autocast: fp32
    torch.testing.assert_close(logits, expected, rtol=1e-5, atol=1e-5)  # bf16 rounding would be ~1e-3 off


@pytest.mark.parametrize("flags", [mlm("bio_roberta_tiny"), ELECTRA], ids=["roberta", "electra"])
@pytest.mark.parametrize("other", ["--amp", "--fp16", "--memory-efficient-fp16"])
def test_amp_bf16_refuses_fairseqs_own_mixed_precision_in_one_line(bytebpe_corpus, flags, other):
    with pytest.raises(ValueError) as error:
        build_in_process(bytebpe_corpus.data_bin, *flags, "--amp-bf16", other)
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"--amp-bf16 with {other}: ") and "drop one" in message


def test_sdpa_refuses_fairseqs_fallback_for_rows_of_several_documents(bytebpe_corpus):
    """What only fairseq's attention computes (attention weights, an extra mask) knows nothing of the documents of a
    packed row: refused, rather than attending across them."""
    task, model, _ = build_in_process(bytebpe_corpus.data_bin, *mlm("bio_roberta_tiny"), "--attention", "sdpa",
                                      "--pack-documents", *NO_DROPOUT)
    attention = self_attentions(model)[0]
    x = torch.randn(6, 1, attention.embed_dim)
    assert attention(x, x, x, need_weights=False)[0].shape == x.shape  # SDPA's own path, no documents
    where = torch.ones(1, 1, 6, 6, dtype=torch.bool)  # a packed row's documents, as the encoder hands them down
    with pytest.raises(ValueError, match=r"^need_weights=True: .*rows of several documents"):
        attention(x, x, x, need_weights=True, documents=where)


def test_host_counts_that_disagree_with_the_batch_are_refused():
    """torch.nonzero_static pads or cuts to the size it is given: a wrong host count would give wrong positions."""
    from biofairseq.data.host_counts import flat_positions

    mask = torch.tensor([[True, False, True], [False, True, False]])
    assert flat_positions(mask, 3).tolist() == [0, 2, 4] == flat_positions(mask).tolist()
    for wrong in (2, 4):
        with pytest.raises(RuntimeError, match=f"^the batch counts {wrong} tokens on the host and another number in its mask"):
            flat_positions(mask, wrong)


def built_optimizer(data_bin, model, *flags):
    """The optimizer fairseq-train builds from these flags for this model's parameters (fp32, unflattened)."""
    from fairseq import optim

    cfg = fairseq_train_config(data_bin, *mlm("bio_roberta_tiny"), "--adam-betas", "(0.9,0.98)", *flags)
    return optim.build_optimizer(cfg.optimizer, list(model.parameters()))


@pytest.mark.parametrize("optimizer", ["adamw", "fused_adamw"])
@pytest.mark.parametrize("flags", [mlm("bio_roberta_tiny"), ELECTRA], ids=["roberta", "electra"])
def test_weight_decay_exclude_spares_exactly_the_layer_norms_and_biases(bytebpe_corpus, flags, optimizer):
    """ELECTRA's and BERT's rule, by name (google-research/electra: LayerNorm, layer_norm, bias; fairseq also names
    them layernorm_embedding), on every parameter of RoBERTa and of both ELECTRA towers; then one step on zero
    gradients, in which weight decay alone moves the decayed weights and nothing else."""
    _, model, _ = build_in_process(bytebpe_corpus.data_bin, *flags)
    built = built_optimizer(bytebpe_corpus.data_bin, model, "--optimizer", optimizer, "--weight-decay", "0.01",
                            "--weight-decay-exclude", "norm_and_bias", "--lr", "0.1")
    decay_of = {id(p): g["weight_decay"] for g in built.optimizer.param_groups for p in g["params"]}
    named = dict(model.named_parameters())
    excluded = {name for name in named if re.search(r"(?i)layer_?norm|bias", name)}
    assert excluded and len(excluded) < len(named) and len(decay_of) == len(named)
    assert {name: decay_of[id(p)] for name, p in named.items()} == {name: 0.0 if name in excluded else 0.01 for name in named}
    before = {name: p.detach().clone() for name, p in named.items()}
    for p in named.values():
        p.grad = torch.zeros_like(p)
    built.step()
    for name, p in named.items():
        if name in excluded:
            assert torch.equal(p, before[name]), name
        else:  # decoupled decay: w <- w - lr x wd x w
            torch.testing.assert_close(p, before[name] * (1 - 0.1 * 0.01), msg=lambda m: f"{name}: {m}")


def test_adamw_without_exclusion_is_fairseqs_adam_and_a_flat_copy_is_refused(bytebpe_corpus):
    from biofairseq.optim.weight_decay import decay_groups

    task, model, criterion = build_in_process(bytebpe_corpus.data_bin, *mlm("bio_roberta_tiny"), *NO_DROPOUT)
    twin = copy.deepcopy(model)
    ours = built_optimizer(bytebpe_corpus.data_bin, model, "--optimizer", "adamw", "--weight-decay", "0.01")
    theirs = built_optimizer(bytebpe_corpus.data_bin, twin, "--optimizer", "adam", "--weight-decay", "0.01")
    assert ours.supports_flat_params and len(ours.optimizer.param_groups) == 1
    for trained, optimizer in ((model, ours), (twin, theirs)):
        for step in range(2):
            criterion(trained, valid_batch(task, 8 * step, 8))[0].backward()
            optimizer.step()
            optimizer.zero_grad()
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), twin.parameters()))
    # fairseq's --fp16 hands over one flat fp32 copy of every parameter: no LayerNorm to find in it
    with pytest.raises(ValueError, match="^--weight-decay-exclude norm_and_bias: .* add --fp16-no-flatten-grads$"):
        decay_groups([torch.nn.Parameter(torch.zeros(1000))], "norm_and_bias")


def dropout_statistics(attention, x, real, passes=50, **kwargs):
    """(mean variance of the outputs over ``passes`` training-mode calls, squared bias of their mean against the
    eval-mode output in units of the variance of a mean of ``passes``), over the real query positions (T x B mask).
    Unbiased dropout gives a bias near 1; dropping nothing, a variance of 0. 50 passes settle both (on a CPU: the
    variances of two paths within 0.1% of each other, the bias within 0.03 of 1; the tests allow 5-10% and 0.5-2)."""
    attention.eval()
    with torch.no_grad():
        expected = attention(x, x, x, need_weights=False, **kwargs)[0][real]
        attention.train()
        torch.manual_seed(0)
        outputs = torch.stack([attention(x, x, x, need_weights=False, **kwargs)[0][real] for _ in range(passes)]).double()
    variance = outputs.var(0).mean()
    return variance.item(), (((outputs.mean(0) - expected) ** 2).mean() / (variance / passes)).item()


def test_sdpa_drops_attention_as_fairseq_does(bytebpe_corpus):
    """Attention dropout 0.3 on a padded batch: fairseq's attention and SDPA, each unbiased, spread alike (a wrong
    rate, 1 - p for p, or no rescaling would show). Statistics, not outputs: on a CPU both reach torch's SDPA math
    kernel and draw alike, but on a GPU their kernels draw differently."""
    task, stock, _ = build_in_process(bytebpe_corpus.data_bin, *mlm("bio_roberta_tiny"), "--dropout", "0",
                                      "--attention-dropout", "0.3")
    tokens = valid_batch(task, 0, 4)["net_input"]["src_tokens"]
    padding = tokens.eq(task.source_dictionary.pad())
    assert padding.any()
    torch.manual_seed(1)
    x = torch.randn(tokens.shape[1], tokens.shape[0], 128)
    theirs = self_attentions(stock)[0]
    ours = self_attentions(with_sdpa(bytebpe_corpus.data_bin, [*mlm("bio_roberta_tiny"), "--dropout", "0",
                                                               "--attention-dropout", "0.3"], stock))[0]
    (their_variance, their_bias), (our_variance, our_bias) = (
        dropout_statistics(attention, x, ~padding.t(), key_padding_mask=padding) for attention in (theirs, ours))
    assert their_variance > 0 and our_variance == pytest.approx(their_variance, rel=0.05)
    assert 0.5 < their_bias < 2 and 0.5 < our_bias < 2
