"""ELECTRA on real text with the real fairseq: the objective, the towers' gradients, the loss, and training (fp32,
fp16 with two processes, resume). Conversion: test_electra_convert.py; the recipe: test_recipe_bioelectra.py."""

import math
import re
import shutil

import pytest
import torch

import inprocess
from biofairseq.dev.samples import REPO, build_in_process, valid_batch
from conftest import json_logs, train_two_processes

ELECTRA = [
    "--user-dir", "biofairseq", "--task", "electra", "--criterion", "electra", "--arch", "electra_tiny",
    "--tokens-per-sample", "128", "--batch-size", "16", "--optimizer", "adam", "--adam-betas", "(0.9,0.999)",
    "--adam-eps", "1e-6", "--weight-decay", "0.01", "--clip-norm", "1.0", "--lr", "1e-3",
    "--lr-scheduler", "polynomial_decay", "--warmup-updates", "10", "--cpu", "--num-workers", "0", "--seed", "1",
    "--log-format", "json", "--log-interval", "1", "--no-epoch-checkpoints",
]
SHARING = ("tied", "gdes", "detached", "none")


def build(data_bin, *flags):
    """(task, model, criterion) as fairseq-train builds them, without dropout, with the valid split loaded."""
    return build_in_process(data_bin, "--task", "electra", "--criterion", "electra", "--arch", "electra_tiny",
                            "--tokens-per-sample", "128", "--dropout", "0", "--attention-dropout", "0", *flags)


batch = valid_batch


def originals(sample, pad):
    target = sample["target"]
    return torch.where(target.ne(pad), target, sample["net_input"]["src_tokens"])


@pytest.mark.fast
def test_selection_is_15_percent_of_real_tokens_85_masked_15_kept_none_random(bytebpe_corpus):
    from biofairseq.data import special_symbols

    task, _, _ = build(bytebpe_corpus.data_bin)
    d = task.source_dictionary
    special = torch.from_numpy(special_symbols(d))
    sample = batch(task, 0, len(task.dataset("valid")))
    source, target = sample["net_input"]["src_tokens"], sample["target"]
    tokens = originals(sample, d.pad())
    real, selected = ~special[tokens], target.ne(d.pad())
    assert not (selected & ~real).any()  # never <s>, </s>, padding
    assert (selected.sum(1) >= 1).all()  # at least one per block
    assert selected.sum() / real.sum() == pytest.approx(0.15, abs=0.01)
    masked = source.eq(task.mask_idx)
    assert not (masked & ~selected).any()
    assert masked[selected].float().mean() == pytest.approx(0.85, abs=0.03)
    assert source[selected & ~masked].equal(tokens[selected & ~masked])  # the other 15% stay as they are
    assert source[~selected].equal(tokens[~selected])  # nothing replaced at random


@pytest.mark.fast
def test_one_forward_samples_at_the_selected_positions_and_labels_only_real_changes(bytebpe_corpus):
    from biofairseq.data import special_symbols

    task, model, _ = build(bytebpe_corpus.data_bin)
    d = task.source_dictionary
    sample = batch(task)
    selected = sample["target"].ne(d.pad())
    out = model(**sample["net_input"], targets=sample["target"])
    assert out["generator_logits"].shape == (int(selected.sum()), len(d))  # logits at the selected positions only
    assert not torch.from_numpy(special_symbols(d))[out["samples"]].any()
    tokens = originals(sample, d.pad())
    corrupted = tokens.clone()
    corrupted[selected] = out["samples"]
    assert out["replaced"].equal(corrupted.ne(tokens))
    assert not out["replaced"][~selected].any()
    # fresh Gumbel noise each step: the same logits give other samples
    again = model(**sample["net_input"], targets=sample["target"])
    assert not again["samples"].equal(out["samples"])


def grads(model, loss):
    model.zero_grad()
    loss.backward(retain_graph=True)
    return {name: p.grad for name, p in model.named_parameters()}


@pytest.mark.fast
@pytest.mark.parametrize("sharing", SHARING)
def test_towers_share_embeddings_as_told_and_the_discriminator_loss_never_reaches_the_generator(sharing, bytebpe_corpus):
    task, model, criterion = build(bytebpe_corpus.data_bin, "--embedding-sharing", sharing)
    sample = batch(task)
    out = model(**sample["net_input"], targets=sample["target"])
    real = sample["net_input"]["src_tokens"].ne(task.source_dictionary.pad())
    discriminator_loss = torch.nn.functional.binary_cross_entropy_with_logits(
        out["discriminator_logits"][real], out["replaced"][real].float())
    g = grads(model, discriminator_loss)
    nonzero = lambda name: g[name] is not None and g[name].abs().sum() > 0
    generator_own = [n for n in g if n.startswith("generator.") or n.startswith("generator_head.dense")
                     or n.startswith("generator_head.layer_norm") or n == "generator_head.bias"]
    assert generator_own and not any(nonzero(n) for n in generator_own)
    assert nonzero("discriminator.layers.0.fc1.weight")
    shared, _ = model.embeddings.weights()
    disc_tokens, _ = model.discriminator_embedding_weights()
    if sharing == "tied":
        assert disc_tokens is shared and model.generator_head.weight is shared
        assert nonzero("embeddings.embed_tokens.weight")  # one tensor, trained by both losses
    elif sharing == "gdes":
        assert not nonzero("embeddings.embed_tokens.weight")  # stop-gradient: the generator's table is its own
        assert not nonzero("embeddings.embed_positions.weight")
        assert nonzero("discriminator_embeddings.token_delta")
    elif sharing == "detached":  # the generator's tables as they are, untouched by the discriminator's loss
        assert not nonzero("embeddings.embed_tokens.weight") and not nonzero("embeddings.embed_positions.weight")
        assert torch.equal(disc_tokens, shared) and not any("delta" in n for n in g)
        assert nonzero("discriminator_embeddings.layernorm_embedding.weight")
    else:
        assert disc_tokens.data_ptr() != shared.data_ptr() and not nonzero("embeddings.embed_tokens.weight")
    # the generator's loss trains the shared table in every mode
    target = sample["target"]
    g = grads(model, torch.nn.functional.cross_entropy(out["generator_logits"], target[target.ne(task.source_dictionary.pad())]))
    assert nonzero("embeddings.embed_tokens.weight") and nonzero("generator.layers.0.fc1.weight")


@pytest.mark.fast
def test_criterion_loss_is_the_generator_mean_plus_50_times_the_discriminator_mean(bytebpe_corpus):
    task, model, criterion = build(bytebpe_corpus.data_bin)
    sample = batch(task)
    torch.manual_seed(3)
    loss, sample_size, log = criterion(model, sample)
    assert sample_size == 1
    loss = loss.detach()
    assert float(loss) == pytest.approx(float(log["gen_loss"]) + 50 * float(log["disc_loss"]), rel=1e-5)
    real = sample["net_input"]["src_tokens"].ne(task.source_dictionary.pad())
    assert int(log["n_real"]) == int(real.sum()) and int(log["n_selected"]) == int(sample["target"].ne(1).sum())
    assert 0 <= float(log["auc"]) <= 1 and -1 <= float(log["cosine"]) <= 1


@pytest.mark.fast
def test_the_losses_are_means_over_every_non_pad_token_and_every_selected_token_counted_by_hand(bytebpe_corpus):
    """On a padded batch: the discriminator's BCE summed over each real token (<s> and </s> included, padding not) and
    divided by their count, the generator's cross-entropy over the selected tokens and their count, all written out
    in float64 from the model's own outputs (the same Gumbel draws: the same seed, and no dropout)."""
    task, model, criterion = build(bytebpe_corpus.data_bin)
    sample = batch(task)
    pad, bos, eos = task.source_dictionary.pad(), task.source_dictionary.bos(), task.source_dictionary.eos()
    tokens, target = sample["net_input"]["src_tokens"], sample["target"]
    torch.manual_seed(5)
    _, _, log = criterion(model, sample)
    torch.manual_seed(5)
    with torch.no_grad():
        out = model(**sample["net_input"], targets=target)
    logits, replaced = out["discriminator_logits"].double().tolist(), out["replaced"].tolist()
    bce, counted = 0.0, 0
    for i, row in enumerate(tokens.tolist()):
        for j, token in enumerate(row):
            if token != pad:
                x, y = logits[i][j], float(replaced[i][j])
                bce -= y * math.log(1 / (1 + math.exp(-x))) + (1 - y) * math.log(1 / (1 + math.exp(x)))
                counted += 1
    assert counted == int(tokens.ne(pad).sum()) < tokens.numel()  # padded
    assert counted - int(tokens.eq(bos).sum()) - int(tokens.eq(eos).sum()) < counted  # <s> and </s> counted
    assert int(log["n_replaced"]) == sum(map(sum, replaced)) > 0  # the criterion drew the same samples
    assert float(log["disc_loss"]) == pytest.approx(bce / counted, rel=1e-5)
    gold = target[target.ne(pad)]
    log_probs = out["generator_logits"].double().log_softmax(-1)
    ce = -sum(log_probs[k, g].item() for k, g in enumerate(gold.tolist()))
    assert float(log["gen_loss"]) == pytest.approx(ce / len(gold), rel=1e-5)


def test_the_discriminator_finds_easy_replacements_well_above_the_replace_rate(bytebpe_corpus, tmp_path):
    """With the generator left untrained (--generator-weight 0) its samples are near-uniform random tokens: the
    discriminator must find them. The real objective at this scale, sampled at temperature 1, stays near the trivial
    solution (the reference's ELECTRA classes do the same: benchmarks/results/pilot_bioelectra.md)."""
    ran = inprocess.run("biofairseq-train", bytebpe_corpus.data_bin, *ELECTRA, "--generator-weight", "0", "--lr", "5e-4",
                        "--batch-size", "8", "--tokens-per-sample", "64", "--max-update", "150", "--total-num-update", "150",
                        "--disable-validation", "--no-save", "--log-interval", "25", "--save-dir", tmp_path, cwd=REPO)
    first, *_, last = json_logs(ran.stderr, "train_inner")
    # a random flagger's precision is the replace rate; the trained one's is several times that
    assert float(last["disc_precision"]) > 2.5 * float(last["replace_rate"])
    assert float(last["disc_auc"]) > 0.8 > float(first["disc_auc"])


def test_resuming_gives_identical_losses_and_annealed_temperatures(bytebpe_corpus, tmp_path):
    """From the whole run's checkpoint at update 3, as checkpoint_last.pt of a new folder; the sampling temperature
    annealed from 3 to 1 over the 6 updates goes on from where it was."""
    common = [bytebpe_corpus.data_bin, *ELECTRA, "--total-num-update", "6", "--disable-validation",
              "--sampling-temperature", "3", "--sampling-temperature-final", "1", "--sampling-temperature-updates", "6"]
    whole = inprocess.run("biofairseq-train", *common, "--max-update", "6", "--save-interval-updates", "3",
                          "--save-dir", tmp_path / "whole", cwd=REPO)
    (tmp_path / "halves").mkdir()
    shutil.copy(tmp_path / "whole" / "checkpoint_1_3.pt", tmp_path / "halves" / "checkpoint_last.pt")
    resumed = inprocess.run("biofairseq-train", *common, "--max-update", "6", "--save-dir", tmp_path / "halves", cwd=REPO)
    assert "Loaded checkpoint" in resumed.stderr
    losses = lambda ran: [(r["num_updates"], r["loss"], r["disc_acc_replaced"], r["gen_temperature"])
                          for r in json_logs(ran.stderr, "train_inner")]
    assert len(losses(whole)) == 6 and losses(resumed) == losses(whole)[3:]
    # update k samples at the temperature of the k - 1 updates before it
    assert [float(r[3]) for r in losses(whole)] == pytest.approx([3 - 2 * k / 6 for k in range(6)], abs=1e-3)


def test_two_processes_in_memory_efficient_fp16_on_packed_rows(bytebpe_corpus, tmp_path):
    """fairseq's legacy DDP over gloo, two processes, with its fp16 optimizer (a loss scale, λ = 50 inside), on
    packed rows (a CPU attends through the dense document mask; the segments path: tests/test_packing.py)."""
    output = train_two_processes(bytebpe_corpus.data_bin, *ELECTRA, "--max-update", "3", "--total-num-update", "3",
                                 "--disable-validation", "--no-save", "--memory-efficient-fp16", "--batch-size", "4",
                                 "--attention", "sdpa", "--pack-documents", "--tokens-per-sample", "64",
                                 "--save-dir", tmp_path, command="biofairseq-train")  # fp16 on a CPU is slow: 4 rows of 64 an update
    assert "training on 2 devices" in output and "minimum loss scale reached" not in output
    assert re.search(r"packed \d+ blocks into \d+ rows", output)
    records = json_logs(output, "train_inner")
    assert len(records) == 3 and all(math.isfinite(float(r["loss"])) and "loss_scale" in r for r in records)


@pytest.mark.fast
def test_task_refuses_random_replacement_in_one_line(bytebpe_corpus):
    """Where fairseq-train sets the task up; its last line of output is this message."""
    with pytest.raises(ValueError) as error:
        build(bytebpe_corpus.data_bin, "--random-token-prob", "0.1")
    assert str(error.value).startswith("--random-token-prob: ") and "\n" not in str(error.value)


@pytest.mark.fast
def test_task_refuses_a_criterion_other_than_electras_in_one_line(bytebpe_corpus):
    with pytest.raises(ValueError) as error:
        build_in_process(bytebpe_corpus.data_bin, "--task", "electra", "--criterion", "masked_lm_accuracy",
                         "--arch", "electra_tiny", "--tokens-per-sample", "128")
    message = str(error.value)
    assert "\n" not in message and message.startswith("--criterion masked_lm_accuracy: ") and "--criterion electra" in message


@pytest.mark.fast
def test_samples_follow_the_softmax_of_the_logits_over_the_temperature():
    """Gumbel-max draws token i with probability softmax(logits / T)_i, never a disallowed one."""
    from biofairseq.models.electra import gumbel_max

    torch.manual_seed(0)
    probabilities = torch.tensor([0.6, 0.3, 0.1, 0.0])
    logits = probabilities.clamp_min(1e-9).log().repeat(40000, 1)
    disallowed = torch.tensor([False, False, False, True])
    for temperature in (1.0, 2.0):
        counts = torch.bincount(gumbel_max(logits, disallowed, temperature), minlength=4).float()
        expected = probabilities ** (1 / temperature)
        torch.testing.assert_close(counts / counts.sum(), expected / expected.sum(), atol=0.01, rtol=0)


@pytest.mark.fast
def test_a_temperature_that_is_not_positive_is_refused_in_one_line(bytebpe_corpus):
    with pytest.raises(ValueError) as error:
        build(bytebpe_corpus.data_bin, "--sampling-temperature", "0")
    assert str(error.value).startswith("--sampling-temperature 0.0: must be above 0") and "\n" not in str(error.value)


@pytest.mark.fast
def test_the_temperature_anneals_linearly_to_its_final_value_then_holds(bytebpe_corpus):
    _, model, _ = build(bytebpe_corpus.data_bin, "--sampling-temperature", "2", "--sampling-temperature-final", "1",
                        "--sampling-temperature-updates", "100")
    temperatures = []
    for update in (0, 50, 100, 300):
        model.set_num_updates(update)
        temperatures.append(model.temperature)
    assert temperatures == pytest.approx([2.0, 1.5, 1.0, 1.0])
    _, constant, _ = build(bytebpe_corpus.data_bin, "--sampling-temperature", "2")
    constant.set_num_updates(300)
    assert constant.temperature == 2.0


@pytest.mark.fast
@pytest.mark.parametrize("flags, start", [
    (("--sampling-temperature-final", "0", "--sampling-temperature-updates", "10"), "--sampling-temperature-final 0.0: must be above 0"),
    (("--sampling-temperature-final", "1"), "--sampling-temperature-final 1.0 needs --sampling-temperature-updates"),
])
def test_an_annealing_without_a_positive_end_or_a_length_is_refused_in_one_line(bytebpe_corpus, flags, start):
    with pytest.raises(ValueError) as error:
        build(bytebpe_corpus.data_bin, *flags)
    assert str(error.value).startswith(start) and "\n" not in str(error.value)


def test_the_one_gpu_preset_trains_the_masked_lm_one_gpu_shape_as_its_discriminator(bytebpe_corpus):
    """bioelectra.sh's PRESET=one_gpu (its recipe.env: tests/data/recipe_env/bioelectra.one_gpu.env) against
    bsc_bio_es.sh's: the discriminator's layers are the masked LM's, parameter for parameter, so one random-init twin
    serves both; the generator at 1/4 is 128 wide; an update of that shape trains on the CPU with clipping."""
    from biofairseq.dev.samples import trainer_in_process

    env = dict(line.split("=", 1) for line in (REPO / "tests" / "data" / "recipe_env" / "bioelectra.one_gpu.env").read_text().splitlines())
    mlm = dict(line.split("=", 1) for line in (REPO / "tests" / "data" / "recipe_env" / "bsc_bio_es.one_gpu.env").read_text().splitlines())
    shape = ["--tokens-per-sample", "64", "--batch-size", "2", "--cpu", "--seed", "1", "--optimizer", "adam", "--lr", "1e-4",
             "--lr-scheduler", "polynomial_decay", "--total-num-update", "10", "--clip-norm", "1.0"]
    _, roberta, _ = build_in_process(bytebpe_corpus.data_bin, "--task", "document_mlm", "--criterion", "masked_lm_accuracy",
                                     "--arch", mlm["ARCH"], *shape)
    trainer = trainer_in_process(bytebpe_corpus.data_bin, "--task", "electra", "--criterion", "electra", "--arch", env["ARCH"],
                                 "--generator-width-fraction", env["GENERATOR_FRACTION"],
                                 "--sampling-temperature", env["SAMPLING_TEMPERATURE"], *shape)
    electra = trainer.model
    layers = lambda encoder: [(n.split(".", 1)[1], p.shape) for n, p in encoder.named_parameters() if n.startswith("layers.")]
    assert layers(electra.discriminator) == layers(roberta.encoder.sentence_encoder)
    assert electra.generator.layers[0].embed_dim == 128
    before = [p.detach().clone() for p in electra.parameters()]
    log = trainer.train_step([valid_batch(trainer.task, size=2)])
    assert log is not None and math.isfinite(float(trainer.get_meter("gnorm").avg))
    assert all(not torch.equal(a, b) for a, b in zip(before, electra.parameters()) if b.requires_grad)
