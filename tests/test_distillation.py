"""--criterion mlm_distillation on real text with the real fairseq: the loss's terms, a frozen teacher that stays out
of the optimizer and the checkpoints, a student of another width, two fp16 processes, and conversion. The
session's trained bio_roberta_tiny (width 128) is the teacher; the student is 64 wide. The recipe:
test_recipe_bio_lm.py. The two processes are also the suite's fairseq-train over two ranks and in
--memory-efficient-fp16 on a CPU (ELECTRA's: test_electra.py)."""

import math
import shutil

import pytest

from biofairseq.dev.samples import build_in_process, valid_batch
from conftest import TINY, json_logs, train_two_processes

NARROW = ["--encoder-embed-dim", "64", "--encoder-ffn-embed-dim", "256"]


def teacher_checkpoint(trained_bytebpe):
    return trained_bytebpe[0] / "checkpoint_last.pt"


def build(data_bin, teacher, *flags):
    """(task, student, criterion) as fairseq-train builds them, without dropout, with the valid split loaded."""
    return build_in_process(data_bin, "--task", "document_mlm", "--criterion", "mlm_distillation", "--teacher-path",
                            teacher, "--arch", "bio_roberta_tiny", "--tokens-per-sample", "128", "--dropout", "0",
                            "--attention-dropout", "0", *flags)


batch = valid_batch


@pytest.mark.parametrize("packing", [[], ["--attention", "sdpa", "--pack-documents"]], ids=["rows", "packed"])
def test_the_teacher_as_its_own_student_leaves_only_the_mlm_term(bytebpe_corpus, trained_bytebpe, packing):
    """Packed: the teacher reads each document of a row alone too."""
    teacher = teacher_checkpoint(trained_bytebpe)
    task, model, criterion = build(bytebpe_corpus.data_bin, teacher, *packing)
    model.load_state_dict(criterion.teacher.state_dict())
    model.eval()
    loss, sample_size, log = criterion(model, batch(task))
    assert criterion.projection is None  # same width: the hidden states are compared directly
    assert log["kl_loss"].abs() < 1e-3 and log["cos_loss"].abs() < 1e-4
    assert log["mlm_loss"] == pytest.approx(log["teacher_mlm_loss"].item(), rel=1e-5)
    assert loss.item() == pytest.approx(5.0 * log["mlm_loss"].item() + 2.0 * log["kl_loss"].item() + log["cos_loss"].item())


def test_a_narrower_student_trains_with_a_projection_and_the_teacher_gets_nothing(bytebpe_corpus, trained_bytebpe):
    task, model, criterion = build(bytebpe_corpus.data_bin, teacher_checkpoint(trained_bytebpe), *NARROW)
    teacher = criterion.teacher
    assert tuple(criterion.projection.weight.shape) == (128, 64)
    # fairseq optimises, casts, DDP-wraps and saves what the criterion registers: only the projection
    assert set(criterion.state_dict()) == {"projection.weight", "projection.bias"}
    assert not any(p is q for p in criterion.parameters() for q in teacher.parameters())
    model.train()
    loss, sample_size, log = criterion(model, batch(task))
    assert log["kl_loss"] > 0.1 and 0.5 < log["cos_loss"] / sample_size < 1.5  # unrelated vectors: cosine near 0
    loss.backward()
    assert not teacher.training and all(p.grad is None and not p.requires_grad for p in teacher.parameters())
    assert criterion.projection.weight.grad.abs().sum() > 0
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


def test_alpha_cos_0_turns_the_alignment_off(bytebpe_corpus, trained_bytebpe):
    task, model, criterion = build(bytebpe_corpus.data_bin, teacher_checkpoint(trained_bytebpe), *NARROW, "--alpha-cos", "0")
    loss, _, log = criterion(model, batch(task))
    assert criterion.projection is None and log["cos_loss"] == 0
    assert loss.item() == pytest.approx(5.0 * log["mlm_loss"].item() + 2.0 * log["kl_loss"].item())


def test_a_teacher_of_another_dictionary_fails_with_one_line(bytebpe_corpus, trained_bytebpe, tmp_path):
    from biofairseq.corpus.vocab import read_dict, write_dict

    symbols, counts = read_dict(bytebpe_corpus.data_bin / "dict.txt")
    symbols[7] = "changed"
    other = tmp_path / "dict.txt"
    write_dict(other, symbols, counts)
    with pytest.raises(ValueError) as error:
        build(bytebpe_corpus.data_bin, teacher_checkpoint(trained_bytebpe), "--teacher-dict", str(other))
    message = str(error.value)
    assert "\n" not in message and message.startswith(str(other))
    assert "1 entries, first at index 11: 'changed' (teacher)" in message and "--srcdict" in message


@pytest.fixture(scope="module")
def distilled(bytebpe_corpus, trained_bytebpe, tmp_path_factory):
    """Two processes (fairseq's legacy DDP over gloo: its pytorch_ddp passes GPU device ids on CPU) distil the teacher
    into a 64-wide student in fp16; the projection is DDP-wrapped apart, as fairseq wraps any criterion with weights.
    Their data-bin is a copy whose block index was built before them, as a first run or binarizing leaves it:
    (save dir, rank 0's output, the index folder, its files' mtimes before the run)."""
    from fairseq.data import Dictionary, data_utils

    from biofairseq.data import DocumentBlockDataset

    root = tmp_path_factory.mktemp("distilled")
    data_bin, save_dir = root / "data-bin", root / "save"
    shutil.copytree(bytebpe_corpus.data_bin, data_bin, ignore=shutil.ignore_patterns("*.index"))  # no index yet
    lines = data_utils.load_indexed_dataset(str(data_bin / "train"), Dictionary.load(str(data_bin / "dict.txt")))
    DocumentBlockDataset(lines, lines.sizes, 127, pad=1, eos=2, index_path=data_bin / "train")
    index, = [p for p in (data_bin / "train.index").iterdir() if p.is_dir()]
    built = {p.name: p.stat().st_mtime_ns for p in index.iterdir()}
    output = train_two_processes(
        data_bin, *TINY, *NARROW, "--criterion", "mlm_distillation",
        "--teacher-path", teacher_checkpoint(trained_bytebpe), "--memory-efficient-fp16", "--max-update", "8", "--batch-size", "8",
        "--total-num-update", "8", "--warmup-updates", "2", "--log-interval", "2", "--disable-validation", "--save-dir", save_dir,
    )
    return save_dir, output, index, built


def test_distillation_in_two_fp16_processes_lowers_the_loss(distilled):
    _, output, _, _ = distilled
    assert "training on 2 devices" in output and "minimum loss scale reached" not in output
    steps = json_logs(output, "train_inner")
    assert len(steps) == 4 and {"mlm_loss", "kl_loss", "cos_loss", "teacher_ppl", "accuracy"} <= steps[0].keys()
    assert all("loss_scale" in s for s in steps)  # fairseq's fp16 optimizer ran (checkpoints are saved in fp32)
    first, last = steps[0], steps[-1]
    assert all(math.isfinite(float(s["loss"])) for s in steps)
    assert float(last["loss"]) < float(first["loss"]) - 0.5
    assert float(last["kl_loss"]) < float(first["kl_loss"]) and float(last["cos_loss"]) < float(first["cos_loss"])


def test_both_ranks_map_the_block_index_built_before_them(distilled):
    _, output, index, built = distilled
    assert f"memory-mapped the blocks-complete_doc-127 index {index}" in output  # rank 0 (fairseq quiets rank 1's log)
    assert [p for p in index.parent.iterdir() if p.is_dir()] == [index]  # neither rank built another
    assert {p.name: p.stat().st_mtime_ns for p in index.iterdir()} == built


def test_the_checkpoint_holds_the_student_and_projection_and_nothing_of_the_teacher(
        distilled, bytebpe_corpus, trained_bytebpe):
    from biofairseq.models.safe_checkpoints import checkpoint_utils

    save_dir, *_ = distilled
    state = checkpoint_utils.load_checkpoint_to_cpu(str(save_dir / "checkpoint_last.pt"))
    _, student, criterion = build(bytebpe_corpus.data_bin, teacher_checkpoint(trained_bytebpe), *NARROW)
    assert set(state["model"]) == set(student.state_dict())
    # nothing of the teacher's width (128) or FFN (512) in the student's weights; the projection apart
    assert not [k for k, t in state["model"].items() if {128, 512} & set(t.shape)]
    assert set(state["criterion"]) == {"projection.weight", "projection.bias"}
    # Adam's state: the student's parameters and the projection's, nothing more
    moments = sum(s["exp_avg"].numel() for s in state["last_optimizer_state"]["state"].values())
    assert moments == sum(p.numel() for p in [*student.parameters(), *criterion.parameters()])


def test_the_distilled_student_converts_to_an_ordinary_model(distilled, tmp_path):
    import json

    import transformers

    from biofairseq.convert.cli import main

    save_dir, *_ = distilled
    out = tmp_path / "hf"
    assert main(["to-hf", str(save_dir / "checkpoint_last.pt"), str(out)]) == 0
    conversion = json.loads((out / "conversion.json").read_text())
    assert conversion["parity"]["ids_identical"] and conversion["transformers_class"] == "RobertaForMaskedLM"
    model = transformers.AutoModelForTokenClassification.from_pretrained(out, num_labels=3)
    assert model.config.hidden_size == 64


@pytest.mark.fast
def test_the_kl_term_is_t_squared_times_kl_of_teacher_to_student_at_temperature_t():
    """By hand: softmax(logits / 2) of 2 log p is p. Teacher (0.8, 0.1, 0.1), student (0.4, 0.4, 0.2):
    KL(teacher || student) = 0.8 ln 2 + 0.1 ln 1/4 + 0.1 ln 1/2 = 0.5 ln 2, and the other way 0.6 ln 2; times T² = 4,
    over two rows. Without the temperature, or without T², or the other way round, it is another number."""
    import torch

    from biofairseq.criterions.mlm_distillation import softened_kl

    teacher = 2 * torch.tensor([[0.8, 0.1, 0.1]] * 2).log()
    student = 2 * torch.tensor([[0.4, 0.4, 0.2]] * 2).log()
    assert softened_kl(student, teacher, 2.0).item() == pytest.approx(2 * 4 * 0.5 * math.log(2), rel=1e-6)
    assert softened_kl(teacher, student, 2.0).item() == pytest.approx(2 * 4 * 0.6 * math.log(2), rel=1e-6)
    assert softened_kl(teacher, teacher, 2.0).item() == pytest.approx(0, abs=1e-6)


def test_the_criterion_logs_the_kl_of_the_models_own_logits_computed_by_hand(bytebpe_corpus, trained_bytebpe):
    """The logged kl_loss against the same sum written out in float64 from the student's and the teacher's logits at
    the masked tokens, each model called on its own; a random 64-wide student against the trained teacher."""
    import torch

    task, model, criterion = build(bytebpe_corpus.data_bin, teacher_checkpoint(trained_bytebpe), *NARROW, "--temperature", "3")
    model.eval()
    sample = batch(task)
    _, _, log = criterion(model, sample)
    tokens, masked = sample["net_input"]["src_tokens"], sample["target"].ne(task.source_dictionary.pad())
    with torch.no_grad():
        student = model(tokens, masked_tokens=masked)[0].double() / 3
        teacher = criterion.teacher(tokens, masked_tokens=masked)[0].double() / 3
    p, q = teacher.softmax(-1), student.softmax(-1)
    by_hand = 9 * (p * (p.log() - q.log())).sum()
    assert int(masked.sum()) == student.shape[0] > 20
    assert log["kl_loss"].item() == pytest.approx(by_hand.item(), rel=1e-4)
