"""Host-device synchronisations, found on CPU by biofairseq.dev.host_syncs: none in a training step's forward, loss and
backward on the fast path, one in a whole update of biofairseq-train's trainer; and the count-based loss computes
fairseq's masked_lm loss."""

import pytest
import torch
from fairseq.criterions.masked_lm import MaskedLmLoss

from biofairseq.dev.host_syncs import HostSyncs, update_syncs
from biofairseq.dev.samples import build_in_process, trainer_in_process, valid_batch
from conftest import TINY
from test_distillation import NARROW, teacher_checkpoint
from test_fast_path import ELECTRA, NO_DROPOUT


FAST = ["--attention", "sdpa", "--pack-documents"]
MLM = [*TINY[2:], "--total-num-update", "10"]


@pytest.mark.fast
def test_the_finder_sees_what_a_gpu_waits_for_and_nothing_else():
    device, host = torch.arange(6.0), torch.arange(6.0)
    with HostSyncs().watch(device) as syncs:
        y = device * 2
        y[y > 4], y.nonzero(), float(y.sum()), y.tolist(), bool(y[0])  # five
        torch.nonzero_static(y > 4, size=1), y[torch.tensor([1, 2])], y.sum() / 3  # sizes known on the host
        host[host > 4], float(host.sum()), torch.zeros(2, device=y.device).sum()  # host tensors; a device one
    assert [op for op, _ in syncs.found] == ["index", "nonzero", "_local_scalar_dense", "tolist", "_local_scalar_dense"]
    assert all("test_host_syncs.py" in where for _, where in syncs.found)


def step_syncs(model, criterion, batch):
    model.train()
    with HostSyncs().watch(model, criterion, batch) as syncs:
        loss, sample_size, _ = criterion(model, batch)
        loss.backward()
    return syncs, sample_size


@pytest.mark.fast
@pytest.mark.parametrize("flags", [MLM, ELECTRA], ids=["roberta", "electra"])
def test_an_update_of_biofairseq_train_waits_for_the_device_once(bytebpe_corpus, flags):
    """On the fast path, from the batch to the optimizer step and the meters, the one wait left is fairseq's
    finiteness test of the gradient norm, before the optimizer step. fairseq's trainer on fairseq's attention adds
    its encoder's padding tests (ELECTRA's towers too), and its reading of the meters after every update."""
    from fairseq.trainer import Trainer

    found = {}
    for name, extra, trainer in (("ours", [*FAST, "--optimizer", "fused_adamw"], None), ("fairseq's", [], Trainer)):
        trainer = trainer_in_process(bytebpe_corpus.data_bin, *flags, *extra, trainer=trainer)
        found[name] = update_syncs(trainer, valid_batch(trainer.task, size=4), valid_batch(trainer.task, 4, size=4))
    assert [(op, where.split(" <- ")[0].rsplit(":", 1)[0]) for op, where in found["ours"].found] == [
        ("_local_scalar_dense", "fairseq/trainer.py")], found["ours"].report()
    assert len(found["fairseq's"].found) >= 4, found["fairseq's"].report()


def test_distillation_on_packed_rows_computes_without_a_synchronisation(bytebpe_corpus, trained_bytebpe):
    from test_distillation import build

    task, student, criterion = build(bytebpe_corpus.data_bin, teacher_checkpoint(trained_bytebpe), *NARROW, *FAST)
    syncs, _ = step_syncs(student, criterion, valid_batch(task, size=8))
    assert not syncs.found, syncs.report()


@pytest.mark.fast
def test_the_positions_give_fairseqs_masked_lm_loss_and_gradients(bytebpe_corpus):
    task, model, criterion = build_in_process(bytebpe_corpus.data_bin, *MLM, *NO_DROPOUT)
    batch = valid_batch(task, size=8)
    assert batch["ntargets"] == int(batch["target"].ne(task.source_dictionary.pad()).sum()) > 0
    model.train()
    results = []
    for compute in (criterion, lambda m, b: MaskedLmLoss.forward(criterion, m, b)):  # ours, then fairseq's
        model.zero_grad()
        loss, sample_size, _ = compute(model, batch)
        loss.backward()
        results.append((loss.detach(), int(sample_size), [p.grad.clone() for p in model.parameters()]))
    (ours, our_size, our_grads), (theirs, their_size, their_grads) = results
    assert our_size == their_size
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)
    for a, b in zip(our_grads, their_grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
