"""ELECTRA on real text with the real fairseq and transformers: the objective, the towers' gradients, training
(fp32, fp16, two processes, resume) and conversion of both towers for every embedding sharing."""

import json
import math
import subprocess

import pytest
import torch

from biofairseq.user_dir import USER_DIR
from conftest import BIN, REPO, free_port, json_logs, run_fairseq

ELECTRA = [
    "--user-dir", "biofairseq", "--task", "electra", "--criterion", "electra", "--arch", "electra_tiny",
    "--tokens-per-sample", "128", "--batch-size", "16", "--optimizer", "adam", "--adam-betas", "(0.9,0.999)",
    "--adam-eps", "1e-6", "--weight-decay", "0.01", "--clip-norm", "1.0", "--lr", "1e-3",
    "--lr-scheduler", "polynomial_decay", "--warmup-updates", "10", "--cpu", "--num-workers", "0", "--seed", "1",
    "--log-format", "json", "--log-interval", "1", "--no-epoch-checkpoints",
]
SHARING = ("tied", "gdes", "none")


def build(data_bin, *flags):
    """(task, model, criterion) as fairseq-train builds them, with the valid split loaded."""
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(data_bin), "--user-dir", USER_DIR, "--task", "electra", "--criterion", "electra", "--arch", "electra_tiny",
        "--tokens-per-sample", "128", "--dropout", "0", "--attention-dropout", "0", *flags])
    cfg = convert_namespace_to_omegaconf(args)
    task = tasks.setup_task(cfg.task)
    torch.manual_seed(0)
    model = task.build_model(cfg.model)
    task.load_dataset("valid")
    return task, model, task.build_criterion(cfg.criterion)


def batch(task, start=0, size=8):
    dataset = task.dataset("valid")
    return dataset.collater([dataset[i] for i in range(start, start + size)])


def originals(sample, pad):
    target = sample["target"]
    return torch.where(target.ne(pad), target, sample["net_input"]["src_tokens"])


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
    else:
        assert disc_tokens.data_ptr() != shared.data_ptr() and not nonzero("embeddings.embed_tokens.weight")
    # the generator's loss trains the shared table in every mode
    target = sample["target"]
    g = grads(model, torch.nn.functional.cross_entropy(out["generator_logits"], target[target.ne(task.source_dictionary.pad())]))
    assert nonzero("embeddings.embed_tokens.weight") and nonzero("generator.layers.0.fc1.weight")


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


@pytest.fixture(scope="module")
def electra_runs(bytebpe_corpus, tmp_path_factory):
    """sharing -> save dir of a short ELECTRA run (the tied one validated), shared by the tests below."""
    from conftest import bpe_flags

    out = {}
    for sharing in SHARING:
        save_dir = tmp_path_factory.mktemp(f"electra_{sharing}")
        steps = ["--max-update", "40", "--total-num-update", "40", "--validate-interval-updates", "20"] \
            if sharing == "tied" else ["--max-update", "3", "--total-num-update", "3", "--disable-validation"]
        proc = run_fairseq("fairseq-train", bytebpe_corpus.data_bin, *ELECTRA, *steps, "--embedding-sharing", sharing,
                           "--save-dir", save_dir, *bpe_flags(bytebpe_corpus.data_bin))
        out[sharing] = (save_dir, proc.stdout + proc.stderr)
    return out


def test_training_logs_both_towers_and_the_generator_learns(electra_runs):
    _, log = electra_runs["tied"]
    steps = json_logs(log, "train_inner")
    assert len(steps) == 40
    wanted = {"gen_loss", "gen_ppl", "gen_acc", "disc_loss", "disc_trivial", "disc_acc_replaced", "disc_acc_original",
              "replace_rate", "disc_auc", "disc_cosine"}
    assert wanted <= steps[-1].keys()
    mean = lambda key, rows: sum(float(r[key]) for r in rows) / len(rows)
    assert mean("gen_loss", steps[-5:]) < mean("gen_loss", steps[:5]) - 1.0
    assert mean("gen_acc", steps[-5:]) > mean("gen_acc", steps[:5])
    # the discriminator leaves its random start for (at least) the base rate of replacements
    assert mean("disc_loss", steps[-5:]) < mean("disc_loss", steps[:5])
    assert mean("disc_loss", steps[-5:]) < 1.1 * mean("disc_trivial", steps[-5:])
    valid = json_logs(log, "valid")
    assert len(valid) == 2 and all(0 < float(v["valid_replace_rate"]) <= 15.5 for v in valid)


def test_the_discriminator_finds_easy_replacements_well_above_the_replace_rate(bytebpe_corpus, tmp_path):
    """With the generator left untrained (--generator-weight 0) its samples are near-uniform random tokens: the
    discriminator must find them. The real objective at this scale stays near the trivial solution (README)."""
    proc = run_fairseq("fairseq-train", bytebpe_corpus.data_bin, *ELECTRA, "--generator-weight", "0", "--lr", "5e-4",
                       "--max-update", "150", "--total-num-update", "150", "--disable-validation", "--no-save",
                       "--log-interval", "25", "--save-dir", tmp_path)
    first, *_, last = json_logs(proc.stdout + proc.stderr, "train_inner")
    # a random flagger's precision is the replace rate; the trained one's is several times that
    assert float(last["disc_precision"]) > 2.5 * float(last["replace_rate"])
    assert float(last["disc_auc"]) > 0.8 > float(first["disc_auc"])


def test_resuming_gives_identical_losses(bytebpe_corpus, tmp_path):
    common = [bytebpe_corpus.data_bin, *ELECTRA, "--total-num-update", "12", "--disable-validation"]
    whole = run_fairseq("fairseq-train", *common, "--max-update", "12", "--save-dir", tmp_path / "whole")
    run_fairseq("fairseq-train", *common, "--max-update", "6", "--save-dir", tmp_path / "halves")
    resumed = run_fairseq("fairseq-train", *common, "--max-update", "12", "--save-dir", tmp_path / "halves")
    losses = lambda proc: [(r["num_updates"], r["loss"], r["disc_acc_replaced"])
                           for r in json_logs(proc.stdout + proc.stderr, "train_inner")]
    assert len(losses(whole)) == 12 and losses(resumed) == losses(whole)[6:]


def test_memory_efficient_fp16_and_two_processes(bytebpe_corpus, tmp_path):
    steps = ["--max-update", "5", "--total-num-update", "5", "--disable-validation", "--no-save"]
    fp16 = run_fairseq("fairseq-train", bytebpe_corpus.data_bin, *ELECTRA, *steps, "--memory-efficient-fp16",
                       "--save-dir", tmp_path)
    records = json_logs(fp16.stdout + fp16.stderr, "train_inner")
    assert len(records) == 5 and all(math.isfinite(float(r["loss"])) and "loss_scale" in r for r in records)
    assert "minimum loss scale reached" not in fp16.stdout + fp16.stderr
    port = free_port()
    ranks = [
        subprocess.Popen(
            [str(BIN / "fairseq-train"), str(bytebpe_corpus.data_bin), *ELECTRA, *steps, "--save-dir", str(tmp_path),
             "--distributed-world-size", "2", "--distributed-rank", str(rank), "--distributed-no-spawn",
             "--distributed-init-method", f"tcp://127.0.0.1:{port}", "--distributed-backend", "gloo",
             "--ddp-backend", "legacy_ddp"],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        for rank in range(2)
    ]
    outputs = [p.communicate(timeout=300)[0] for p in ranks]
    assert [p.returncode for p in ranks] == [0, 0], outputs[0][-3000:]
    assert "training on 2 devices" in outputs[0] and len(json_logs(outputs[0], "train_inner")) == 5


def test_task_refuses_random_replacement_in_one_line(bytebpe_corpus, tmp_path):
    proc = run_fairseq("fairseq-train", bytebpe_corpus.data_bin, *ELECTRA, "--random-token-prob", "0.1",
                       "--max-update", "1", "--total-num-update", "1", "--save-dir", tmp_path, check=False)
    assert proc.returncode != 0
    assert "--random-token-prob" in proc.stderr.strip().splitlines()[-1]


# ---- conversion


def convert(*args):
    from biofairseq.convert.cli import main

    return main([str(a) for a in args])


@pytest.mark.parametrize("sharing", SHARING)
def test_both_towers_convert_with_parity_for_every_sharing(sharing, electra_runs, tmp_path):
    import transformers
    from safetensors.torch import load_file

    save_dir, _ = electra_runs[sharing]
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
    if sharing == "gdes":  # the discriminator's table is materialised: the generator's plus the trained delta
        delta = state["discriminator_embeddings.token_delta"]
        assert delta.abs().sum() > 0
        assert torch.equal(written, state["embeddings.embed_tokens.weight"] + delta)
    elif sharing == "tied":
        assert torch.equal(written, state["embeddings.embed_tokens.weight"])
    else:
        assert torch.equal(written, state["discriminator_embeddings.embed_tokens.weight"])
    # positions from 0 in transformers: fairseq's padding_idx + 1 leading rows are gone
    assert torch.equal(generator.electra.embeddings.position_embeddings.weight.data,
                       state["embeddings.embed_positions.weight"][2:].float())


def test_generator_flag_on_a_roberta_checkpoint_fails_in_one_line(trained_bytebpe, tmp_path, capsys):
    save_dir, _ = trained_bytebpe
    assert convert("to-hf", save_dir / "checkpoint_best.pt", tmp_path / "out", "--generator") == 1
    message = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--generator" in message and "ELECTRA" in message and not (tmp_path / "out").exists()
