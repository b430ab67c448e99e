"""Real fairseq-train / fairseq-validate / from_pretrained runs of document_mlm on CPU."""

import math
import re
import subprocess
import sys
from fractions import Fraction

import pytest
import torch

from biofairseq.user_dir import USER_DIR
from conftest import BIN, REPO, free_port, json_logs, run_fairseq

TINY = [
    "--user-dir", "biofairseq", "--task", "document_mlm", "--criterion", "masked_lm_accuracy",
    "--arch", "bio_roberta_tiny", "--tokens-per-sample", "128", "--batch-size", "16",
    "--optimizer", "adam", "--adam-betas", "(0.9,0.98)", "--adam-eps", "1e-6", "--weight-decay", "0.01",
    "--lr", "1e-3", "--lr-scheduler", "polynomial_decay", "--warmup-updates", "10",
    "--cpu", "--num-workers", "0", "--seed", "1", "--log-format", "json", "--log-interval", "1",
    "--no-epoch-checkpoints",
]


@pytest.fixture(scope="module")
def trained(bytebpe_corpus, tmp_path_factory):
    save_dir = tmp_path_factory.mktemp("trained")
    proc = run_fairseq(
        "fairseq-train", bytebpe_corpus.data_bin, *TINY, "--max-epoch", "3", "--total-num-update", "204",
        "--save-dir", save_dir,
    )
    return save_dir, proc.stdout + proc.stderr


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


def test_resuming_from_checkpoint_last_gives_the_same_losses(bytebpe_corpus, tmp_path):
    common = [bytebpe_corpus.data_bin, *TINY, "--total-num-update", "20", "--disable-validation"]
    whole = run_fairseq("fairseq-train", *common, "--max-update", "20", "--save-dir", tmp_path / "whole")
    run_fairseq("fairseq-train", *common, "--max-update", "10", "--save-dir", tmp_path / "halves")
    resumed = run_fairseq("fairseq-train", *common, "--max-update", "20", "--save-dir", tmp_path / "halves")
    assert "Loaded checkpoint" in resumed.stdout + resumed.stderr
    losses = lambda proc: [(r["num_updates"], r["loss"]) for r in json_logs(proc.stdout + proc.stderr, "train_inner")]
    assert len(losses(whole)) == 20
    assert losses(resumed) == losses(whole)[10:]


def test_fairseq_validate_from_any_folder(trained, bytebpe_corpus, tmp_path):
    save_dir, log = trained
    user_dir = subprocess.run(
        [sys.executable, "-m", "biofairseq.user_dir"], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert user_dir == USER_DIR
    proc = run_fairseq(
        "fairseq-validate", bytebpe_corpus.data_bin, "--user-dir", user_dir, "--task", "document_mlm",
        "--criterion", "masked_lm_accuracy", "--tokens-per-sample", "128", "--batch-size", "16", "--cpu",
        "--path", save_dir / "checkpoint_best.pt", cwd=tmp_path,
    )
    line = next(l for l in (proc.stdout + proc.stderr).splitlines() if "valid on 'valid' subset" in l)
    best = min(float(v["valid_loss"]) for v in json_logs(log, "valid"))
    assert float(re.search(r"\| loss ([\d.]+) \|", line).group(1)) == best


def test_restore_file_continues_from_the_trained_weights(trained, bytebpe_corpus, tmp_path):
    save_dir, log = trained
    proc = run_fairseq(
        "fairseq-train", bytebpe_corpus.data_bin, *TINY, "--max-update", "3", "--total-num-update", "3",
        "--disable-validation", "--save-dir", tmp_path, "--restore-file", save_dir / "checkpoint_best.pt",
        "--reset-optimizer", "--reset-dataloader", "--reset-meters", "--reset-lr-scheduler",
    )
    from_scratch = float(json_logs(log, "train_inner")[0]["loss"])
    restored = float(json_logs(proc.stdout + proc.stderr, "train_inner")[0]["loss"])
    assert restored < from_scratch - 1.0


def test_from_pretrained_fills_a_mask_in_spanish(trained, bytebpe_corpus):
    from fairseq.models.roberta import RobertaModel

    from biofairseq.corpus.vocab import fairseq_bpe_args

    save_dir, _ = trained
    data_bin = str(bytebpe_corpus.data_bin)  # the BPE comes from the data-bin's vocab_info.json
    roberta = RobertaModel.from_pretrained(
        str(save_dir), checkpoint_file="checkpoint_best.pt", data_name_or_path=data_bin,
        **fairseq_bpe_args(data_bin), user_dir=USER_DIR,
    ).eval()
    filled = roberta.fill_mask("El paciente presenta <mask> abdominal.", topk=3)
    assert len(filled) == 3
    probabilities = [p for _, p, _ in filled]
    assert probabilities == sorted(probabilities, reverse=True) and 0 < sum(probabilities) <= 1
    for sentence, _, token in filled:
        assert sentence.startswith("El paciente presenta") and sentence.endswith("abdominal.") and token.strip()


def test_two_process_gloo_training(bytebpe_corpus, tmp_path):
    port = free_port()
    ranks = [
        subprocess.Popen(
            [str(BIN / "fairseq-train"), str(bytebpe_corpus.data_bin), *TINY, "--max-update", "6",
             "--total-num-update", "6", "--disable-validation", "--no-save", "--save-dir", str(tmp_path),
             "--distributed-world-size", "2", "--distributed-rank", str(rank), "--distributed-no-spawn",
             "--distributed-init-method", f"tcp://127.0.0.1:{port}", "--distributed-backend", "gloo",
             "--ddp-backend", "legacy_ddp"],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        for rank in range(2)
    ]
    outputs = [p.communicate(timeout=300)[0] for p in ranks]
    assert [p.returncode for p in ranks] == [0, 0], outputs[0][-3000:]
    assert "training on 2 devices" in outputs[0]
    assert len(json_logs(outputs[0], "train_inner")) == 6


def test_memory_efficient_fp16_on_cpu(bytebpe_corpus, tmp_path):
    proc = run_fairseq(
        "fairseq-train", bytebpe_corpus.data_bin, *TINY, "--memory-efficient-fp16", "--max-update", "8",
        "--total-num-update", "8", "--disable-validation", "--save-dir", tmp_path,
    )
    records = json_logs(proc.stdout + proc.stderr, "train_inner")
    assert len(records) == 8 and all(math.isfinite(float(r["loss"])) for r in records)
    assert all("loss_scale" in r for r in records)  # fairseq's fp16 optimizer ran (checkpoints are saved in fp32)


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
    proc = run_fairseq(
        "fairseq-validate", bytebpe_corpus.data_bin, "--user-dir", "biofairseq", "--task", "document_mlm",
        "--cpu", "--batch-size", "16", "--path", evil, check=False,
    )
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines()[-1].endswith(message)
