"""Real fairseq-train / fairseq-validate / from_pretrained runs of document_mlm on CPU, in this process except where
the process itself is checked (a console script's start-up, a fresh interpreter's import order). Two ranks:
test_distillation.py; --memory-efficient-fp16 on a CPU: test_distillation.py and test_electra.py."""

import json
import math
import os
import re
import shutil
import subprocess
import sys
from fractions import Fraction

import pytest
import torch

import inprocess
from biofairseq.dev.samples import REPO, build_in_process
from biofairseq.user_dir import USER_DIR
from conftest import TINY, json_logs, run_fairseq


@pytest.fixture(scope="module")
def trained(trained_bytebpe):
    return trained_bytebpe


def test_training_lowers_validation_loss_and_logs_ppl_and_accuracy(trained):
    _, log = trained
    valid = json_logs(log, "valid")
    assert len(valid) == 3
    losses = [float(v["valid_loss"]) for v in valid]
    assert losses[-1] < losses[0] - 0.05, losses
    assert all(float(v["valid_ppl"]) == pytest.approx(2 ** float(v["valid_loss"]), rel=0.01) for v in valid)
    assert all(0 <= float(v["valid_accuracy"]) <= 100 for v in valid)
    steps = json_logs(log, "train_inner")
    assert {"loss", "ppl", "accuracy"} <= steps[0].keys()
    assert float(steps[-1]["accuracy"]) > float(steps[0]["accuracy"])


def test_resuming_from_checkpoint_last_compiled_or_not_gives_the_same_losses(bytebpe_corpus, tmp_path):
    """On the fast path (SDPA attention, torch's fused AdamW, bf16 autocast) and biofairseq-train, whose state must
    resume as fairseq's does; the checkpoints keep fp32 weights. The second half runs its layers through
    torch.compile (aot_eager: traced as for inductor, without generating code), dropout included: a compiled layer
    computes what the uncompiled one does, and a checkpoint does not care which wrote it. The whole run saves at
    update 3 as well; that checkpoint, as checkpoint_last.pt of a new folder, is where the second half starts (past
    the warmup: the learning rate decays). bf16 on a CPU is slow: 4 rows of 64 tokens an update."""
    common = [bytebpe_corpus.data_bin, *TINY, "--attention", "sdpa", "--pack-documents", "--optimizer", "fused_adamw", "--amp-bf16",
              "--batch-size", "4", "--tokens-per-sample", "64", "--warmup-updates", "2", "--total-num-update", "6",
              "--max-update", "6", "--disable-validation"]
    whole = inprocess.run("biofairseq-train", *common, "--save-interval-updates", "3", "--save-dir", tmp_path / "whole", cwd=REPO)
    (tmp_path / "halves").mkdir()
    shutil.copy(tmp_path / "whole" / "checkpoint_1_3.pt", tmp_path / "halves" / "checkpoint_last.pt")
    resumed = inprocess.run("biofairseq-train", *common, "--save-dir", tmp_path / "halves", "--compile", "aot_eager", cwd=REPO)
    assert "Loaded checkpoint" in resumed.stderr
    assert "compiling 2 encoder layers with torch.compile (backend aot_eager)" in resumed.stderr
    losses = lambda ran: [(int(r["num_updates"]), float(r["loss"]), float(r["accuracy"])) for r in json_logs(ran.stderr, "train_inner")]
    assert len(losses(whole)) == 6
    # bf16 autocast: a traced layer may round differently in the last place (seen: 10.818 against 10.819 at update 5);
    # a resume on the wrong batches or from a reset optimizer moves it by a tenth or more. One masked token of the
    # about 38 an update is 2.6 points of accuracy.
    assert [u for u, _, _ in losses(resumed)] == [4, 5, 6]
    for (_, loss, accuracy), (_, loss_whole, accuracy_whole) in zip(losses(resumed), losses(whole)[3:]):
        assert loss == pytest.approx(loss_whole, abs=0.005) and accuracy == pytest.approx(accuracy_whole, abs=3)
    state = torch.load(tmp_path / "halves" / "checkpoint_last.pt", weights_only=False)
    assert state["cfg"]["model"].attention == "sdpa" and state["last_optimizer_state"]["param_groups"][0]["fused"]
    assert state["cfg"]["model"].amp_bf16 and {w.dtype for w in state["model"].values()} == {torch.float32}


def test_fairseq_validate_from_any_folder(trained, bytebpe_corpus, tmp_path):
    """fairseq-validate's own start-up from another folder: test_checkpoint_with_unsafe_objects_fails_in_one_line."""
    save_dir, log = trained
    user_dir = inprocess.run("python", "-m", "biofairseq.user_dir", cwd=tmp_path).stdout.strip()
    assert user_dir == USER_DIR
    ran = inprocess.run(
        "fairseq-validate", bytebpe_corpus.data_bin, "--user-dir", user_dir, "--task", "document_mlm",
        "--criterion", "masked_lm_accuracy", "--tokens-per-sample", "128", "--batch-size", "16", "--cpu",
        "--num-workers", "0",  # fairseq's default forks a loader process from this one, which a later test waits for
        "--path", save_dir / "checkpoint_best.pt", cwd=tmp_path,
    )
    line = next(l for l in (ran.stdout + ran.stderr).splitlines() if "valid on 'valid' subset" in l)
    best = min(float(v["valid_loss"]) for v in json_logs(log, "valid"))
    assert float(re.search(r"\| loss ([\d.]+) \|", line).group(1)) == best


FILL_MASK = """
import json, sys
import biofairseq  # before fairseq, as a Python user writes it
from fairseq.models.roberta import RobertaModel
roberta = RobertaModel.from_pretrained(sys.argv[1], checkpoint_file="checkpoint_best.pt", data_name_or_path=sys.argv[2],
                                       user_dir=sys.argv[3]).eval()
print(json.dumps(roberta.fill_mask("El paciente presenta <mask> abdominal.", topk=3)))
"""


def test_from_pretrained_fills_a_mask_in_spanish_offline_whatever_the_import_order(trained, bytebpe_corpus, tmp_path):
    save_dir, _ = trained
    proc = subprocess.run([sys.executable, "-c", FILL_MASK, str(save_dir), str(bytebpe_corpus.data_bin), USER_DIR],
                          cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    filled = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(filled) == 3
    probabilities = [p for _, p, _ in filled]
    assert probabilities == sorted(probabilities, reverse=True) and 0 < sum(probabilities) <= 1
    for sentence, _, token in filled:
        assert sentence.startswith("El paciente presenta") and sentence.endswith("abdominal.") and token.strip()


def test_masked_token_accuracy_counts_real_tokens_of_a_hand_built_batch(trained, bytebpe_corpus):
    from fairseq import checkpoint_utils
    from fairseq.criterions.masked_lm import MaskedLmConfig

    from biofairseq.criterions.masked_lm_accuracy import MaskedLmAccuracy

    save_dir, _ = trained
    models, _, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(save_dir / "checkpoint_best.pt")], arg_overrides={"data": str(bytebpe_corpus.data_bin)})
    model, d = models[0].eval(), task.source_dictionary
    lines = [d.encode_line(" ".join(line.symbols), add_if_not_exist=False) for doc in bytebpe_corpus.documents["valid"][:2] for line in doc][:6]
    lines = [torch.cat([torch.tensor([d.bos()]), line[:60]]) for line in lines]
    tokens = torch.full((len(lines), max(map(len, lines))), d.pad())
    for i, line in enumerate(lines):
        tokens[i, : len(line)] = line
    generator = torch.Generator().manual_seed(0)
    chosen = (torch.rand(tokens.shape, generator=generator) < 0.3) & tokens.ne(d.pad())
    chosen[:, 0] = True  # <s>, as stock fairseq may choose it
    chosen |= tokens.eq(d.eos())  # and every </s>
    target = torch.where(chosen, tokens, torch.full_like(tokens, d.pad()))
    source = torch.where(chosen, torch.full_like(tokens, task.mask_idx), tokens)
    sample = {"net_input": {"src_tokens": source, "src_lengths": tokens.ne(d.pad()).sum(1)}, "target": target,
              "ntokens": int(tokens.ne(d.pad()).sum()), "nsentences": len(lines)}
    with torch.no_grad():
        _, _, logged = MaskedLmAccuracy(MaskedLmConfig(tpu=False), task)(model, sample)
        predicted = model(source)[0].argmax(-1)  # every position, computed apart from the criterion
    real = chosen & (tokens > d.eos()) & tokens.ne(task.mask_idx)
    assert int(logged["n_real"]) == int(real.sum()) < int(chosen.sum())
    assert int(logged["n_correct"]) == int((predicted.eq(tokens) & real).sum())


def test_compile_wraps_every_layer_of_both_towers_and_keeps_the_parameter_names(bytebpe_corpus):
    """What biofairseq-train --compile compiles (the compiled run is the resume test above). Not in make test-fast:
    importing torch's compiler takes seconds."""
    from fairseq.modules.transformer_layer import TransformerEncoderLayerBase

    from biofairseq.models.compiled_layers import compile_layers
    from biofairseq.dev.samples import build_in_process
    from test_fast_path import ELECTRA, mlm

    for flags, layers in ((mlm("bio_roberta_tiny"), 2), (ELECTRA, 4)):
        _, model, _ = build_in_process(bytebpe_corpus.data_bin, *flags, "--attention", "sdpa")
        names = list(model.state_dict())
        compiled = [m for m in compile_layers(model, "aot_eager").modules() if getattr(m, "_compiled_call_impl", None)]
        assert len(compiled) == layers and all(isinstance(m, TransformerEncoderLayerBase) for m in compiled)
        assert list(model.state_dict()) == names


def test_checkpoint_with_unsafe_objects_fails_in_one_line(trained, bytebpe_corpus, tmp_path):
    from fairseq import checkpoint_utils

    from biofairseq.models.safe_checkpoints import UnsafeCheckpointError

    save_dir, _ = trained
    state = torch.load(save_dir / "checkpoint_best.pt")  # weights_only: fairseq's own types are allowed
    state["extra_state"]["surprise"] = Fraction(1, 3)
    evil = tmp_path / "evil.pt"
    torch.save(state, evil)
    with pytest.raises(UnsafeCheckpointError) as error:
        checkpoint_utils.load_checkpoint_to_cpu(str(evil))
    message = str(error.value)
    assert "\n" not in message and str(evil) in message and "fractions.Fraction" in message
    # the console script, started in another folder: --user-dir puts the safe loading in its own process
    proc = run_fairseq(
        "fairseq-validate", bytebpe_corpus.data_bin, "--user-dir", USER_DIR, "--task", "document_mlm",
        "--cpu", "--batch-size", "16", "--path", evil, cwd=tmp_path, check=False,
    )
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines()[-1].endswith(message)


def frequency_baselines_by_hand(corpus):
    """Unigram perplexity (add-one over the real entries) and most-frequent-token accuracy, from the text itself."""
    from collections import Counter

    from fairseq.data import Dictionary

    d = Dictionary.load(str(corpus.data_bin / "dict.txt"))
    real = [i for i in range(len(d)) if i >= d.nspecial and d[i] != "<mask>"]
    ids = lambda split: [d.index(s) for doc in corpus.documents[split] for line in doc for s in line.symbols]
    counts = Counter(ids("train"))
    total = sum(counts.values()) + len(real)
    valid = ids("valid")
    bits = -sum(math.log2((counts[i] + 1) / total) for i in valid) / len(valid)
    top = counts.most_common(1)[0][0]
    return 2 ** bits, 100 * sum(i == top for i in valid) / len(valid)


def pretraining_check(capsys, best, data_bin, out, *flags):
    """python -m biofairseq.recipe.pretraining_check, in this process (fairseq is loaded already): (exit status, stderr)."""
    from biofairseq.recipe.pretraining_check import main

    capsys.readouterr()
    status = main([str(best), str(data_bin), "--output", str(out), *flags])
    return status, capsys.readouterr().err


def test_pretraining_check_compares_with_word_frequencies_and_finds_a_collapsed_layer(trained, bytebpe_corpus, tmp_path, capsys):
    from biofairseq.recipe.best_checkpoint import pick

    save_dir, log = trained
    (tmp_path / "train.log").write_text(log)
    best = pick(save_dir, tmp_path / "train.log")
    unigram_ppl, frequent_acc = frequency_baselines_by_hand(bytebpe_corpus)
    # as bad as word frequencies: stopped, in one line, unless told to go on
    weak = tmp_path / "weak.json"
    weak.write_text(json.dumps({**best, "ppl": unigram_ppl, "accuracy": frequent_acc}))
    status, stderr = pretraining_check(capsys, weak, bytebpe_corpus.data_bin, tmp_path / "weak_check.json")
    result = json.loads((tmp_path / "weak_check.json").read_text())
    assert result["unigram_ppl"] == pytest.approx(unigram_ppl, rel=1e-9)
    assert result["most_frequent_token_accuracy"] == pytest.approx(frequent_acc, rel=1e-9)
    assert status == 3 and not result["clearly_better"] and len(result["problems"]) == 2
    assert "NOT clearly better" in stderr and "--go-on" in stderr.strip().splitlines()[-1]
    assert pretraining_check(capsys, weak, bytebpe_corpus.data_bin, tmp_path / "again.json", "--go-on")[0] == 0
    # a last layer that maps every token to the same vector is found whatever the perplexity says
    state = torch.load(save_dir / "checkpoint_best.pt")
    norm = next(k for k in state["model"] if k.endswith("layers.1.final_layer_norm.weight"))
    state["model"][norm].zero_()
    torch.save(state, tmp_path / "collapsed.pt")
    collapsed = tmp_path / "collapsed.json"
    collapsed.write_text(json.dumps({**best, "checkpoint": str(tmp_path / "collapsed.pt"), "ppl": 1.0, "accuracy": 100.0}))
    status, _ = pretraining_check(capsys, collapsed, bytebpe_corpus.data_bin, tmp_path / "collapsed_check.json")
    result = json.loads((tmp_path / "collapsed_check.json").read_text())
    assert status == 3 and result["mean_token_cosine"] > 0.99 and "collapsed" in result["problems"][0]
    # the trained model itself, picked and checked in one process as the recipes do: its cosine is far from collapsed
    from biofairseq.recipe.best_checkpoint import main as pick_main

    pick_args = [str(save_dir), str(tmp_path / "train.log"), "--output", str(tmp_path / "best.json")]
    with pytest.raises(SystemExit):  # the check's flags go together
        pick_main([*pick_args, "--check", str(bytebpe_corpus.data_bin)])
    assert pick_main([*pick_args, "--check", str(bytebpe_corpus.data_bin), "--check-output", str(tmp_path / "check.json"), "--go-on"]) == 0
    assert json.loads((tmp_path / "best.json").read_text())["checkpoint"] == best["checkpoint"]
    assert json.loads((tmp_path / "check.json").read_text())["mean_token_cosine"] < 0.9


def test_a_run_of_fairseqs_own_masked_lm_criterion_is_picked_and_checked(trained, bytebpe_corpus, tmp_path, capsys):
    """--criterion masked_lm, which fairseq's RoBERTa instructions use, logs loss and perplexity but no accuracy: its
    log is the trained run's without the accuracy. The check then compares what there is and says what is missing."""
    from biofairseq.recipe.best_checkpoint import main as pick_main

    save_dir, log = trained
    stock = re.sub(r', "(valid_)?accuracy": "[^"]*"', "", log)
    assert '"valid_ppl"' in stock and '"valid_accuracy"' not in stock and '"accuracy"' not in stock
    (tmp_path / "train.log").write_text(stock)
    capsys.readouterr()
    status = pick_main([str(save_dir), str(tmp_path / "train.log"), "--output", str(tmp_path / "best.json"),
                        "--check", str(bytebpe_corpus.data_bin), "--check-output", str(tmp_path / "check.json"), "--go-on"])
    out, err = capsys.readouterr()
    assert status == 0 and "masked acc. %" in out
    result = json.loads((tmp_path / "check.json").read_text())
    assert result["valid_accuracy"] is None and result["valid_ppl"] > 1
    verdict = next(line for line in err.splitlines() if line.startswith("pretraining_check: "))
    assert "masked-token accuracy not logged" in verdict and "--criterion masked_lm_accuracy" in verdict


@pytest.mark.fast
@pytest.mark.parametrize("criterion", [["--criterion", "cross_entropy"], []], ids=["cross_entropy", "left-out"])
def test_document_mlm_refuses_a_criterion_that_would_log_wrong_numbers(bytebpe_corpus, criterion):
    """fairseq's cross_entropy (its default when --criterion is left out) divides the masked tokens' loss by every
    token: an untrained model would show a validation perplexity near 3."""
    with pytest.raises(ValueError) as error:
        build_in_process(bytebpe_corpus.data_bin, "--task", "document_mlm", *criterion, "--arch", "bio_roberta_tiny",
                         "--tokens-per-sample", "128")
    message = str(error.value)
    assert "\n" not in message and message.startswith("--criterion cross_entropy (fairseq-train's default): ")
    assert "--criterion masked_lm_accuracy" in message


def test_biofairseq_train_logs_what_fairseq_train_logs_on_the_same_seed(bytebpe_corpus, tmp_path):
    """Every logged training and validation figure, its meters read when printed (pooled over 2 updates per line)
    against fairseq's trainer reading them after each update: equal, to the printed digit. Only the clocks differ."""
    # fairseq-train in this process is fairseq's own trainer again (tests/inprocess.py undoes biofairseq-train's)
    common = [bytebpe_corpus.data_bin, *TINY, "--max-update", "6", "--total-num-update", "6", "--log-interval", "2",
              "--clip-norm", "0.5", "--validate-interval-updates", "6", "--no-save"]
    logs = [inprocess.run(command, *common, "--save-dir", tmp_path / command, cwd=REPO).stderr
            for command in ("fairseq-train", "biofairseq-train")]
    clocks = {"wps", "ups", "wall", "train_wall", "gb_free"}
    for tag, count in (("train_inner", 3), ("valid", 1), ("train", 1)):
        figures = lambda record: {k: v for k, v in record.items() if k.removeprefix(f"{tag}_") not in clocks}
        theirs, ours = ([figures(r) for r in json_logs(log, tag)] for log in logs)
        assert len(theirs) == len(ours) == count, tag
        assert ours == theirs, tag
    steps = json_logs(logs[1], "train_inner")
    assert {"loss", "ppl", "accuracy", "gnorm", "clip", "lr"} <= steps[0].keys() and 0 < float(steps[0]["clip"]) <= 100


def test_each_run_in_this_process_writes_its_tensorboard_events_into_its_own_folder(bytebpe_corpus, tmp_path):
    """fairseq keeps its tensorboard writers in a global by key ("train_inner") and closes them at exit: run in one
    process (tests/inprocess.py), a second run wrote into the first run's folder, a relative one resolved from the
    second's, and failed there. Each run in this process closes its writers as its process would."""
    flags = [USER_DIR if flag == "biofairseq" else flag for flag in TINY]
    for run in ("first", "second"):
        (tmp_path / run).mkdir()
        inprocess.run("biofairseq-train", bytebpe_corpus.data_bin, *flags, "--max-update", "2", "--total-num-update", "2",
                      "--no-save", "--tensorboard-logdir", "tensorboard", cwd=tmp_path / run)
    for run in ("first", "second"):
        assert len(list((tmp_path / run / "tensorboard" / "train_inner").glob("events.out.tfevents.*"))) == 1, run


def test_an_interrupted_biofairseq_train_ends_in_one_line_without_the_noise_of_its_start(bytebpe_corpus, tmp_path):
    """Ctrl-C (SIGINT) mid-training, the console script as a user starts it: exit status 130 and one line saying the
    checkpoints are kept and the same command resumes, no traceback; and none of the warnings fairseq, hydra and torch
    print at every start (tensorboardX, hydra's deprecations, torch.cuda.amp, pin_memory on a CPU)."""
    import signal
    import threading
    import time

    from biofairseq.dev.samples import BIN

    proc = subprocess.Popen(
        [str(BIN / "biofairseq-train"), str(bytebpe_corpus.data_bin), *TINY[2:], "--max-update", "100000",
         "--total-num-update", "100000", "--save-dir", str(tmp_path / "checkpoints"), "--disable-validation"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"}, start_new_session=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    deadline = time.monotonic() + 120
    while not any("train_inner" in line for line in lines):
        assert proc.poll() is None and time.monotonic() < deadline, "".join(lines)[-3000:]
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(60) == 130, "".join(lines)[-3000:]
    reader.join(10)
    assert lines[-1].strip() == ("biofairseq-train: interrupted; the checkpoints saved so far are kept "
                                 "(checkpoint_last.pt is the latest); the same command resumes from it")
    noise = [line for line in lines if re.search(r"Traceback|Warning|tensorboardX", line)]
    assert noise == []
