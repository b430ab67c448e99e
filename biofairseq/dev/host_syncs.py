"""Finds where code makes the host wait for the GPU (a host-device synchronisation), on a CPU-only machine too.

Each one stalls the host until every queued kernel has run, and then the GPU idles while the host queues more.
On CUDA, ``torch.cuda.set_sync_debug_mode`` reports them; on a CPU nothing waits, so ``HostSyncs`` finds them by
provenance: "device" tensors are those on a GPU, those given to ``watch`` (parameters, buffers, a batch, optimizer state), every
tensor computed from one, and any made with an explicit ``device=``. It records, with the code that asked, each
read of a device tensor's value on the host (``item``, ``bool``, ``float``, ``tolist``, ``numpy``, ``cpu``; not
``.to("cpu")``, which on a CPU machine may stand for "to the device") and each op whose output size depends on the values (``nonzero``, a boolean index,
``masked_select``, ``unique``...).
"""

from __future__ import annotations

import traceback
from typing import TYPE_CHECKING, Any, Self

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

if TYPE_CHECKING:
    from fairseq.trainer import Trainer

_TAG = "_biofairseq_on_device"
_aten = torch.ops.aten
_SIZED_BY_VALUES = {
    _aten._local_scalar_dense.default, _aten.nonzero.default, _aten.masked_select.default, _aten.equal.default,
    _aten._unique2.default, _aten.unique_dim.default, _aten.unique_consecutive.default,
}
_COPIES_TO_HOST = {"tolist", "numpy", "cpu"}  # not .to(): "to the CPU" on a CPU machine is "to the device" on a GPU


def _on_device(tensor: object) -> bool:
    return isinstance(tensor, torch.Tensor) and (tensor.device.type != "cpu" or getattr(tensor, _TAG, False))


def _caller() -> str:
    """Where the synchronising call was written: the innermost frames outside torch and this module."""
    frames = [f for f in traceback.extract_stack() if "/torch/" not in f.filename and f.filename != __file__]
    return " <- ".join(f"{f.filename.rsplit('site-packages/', 1)[-1]}:{f.lineno}" for f in frames[-3:][::-1])


class _Recording:
    """A torch mode that appends what it finds to a shared list."""

    def __init__(self, syncs) -> None:
        super().__init__()
        self.syncs = syncs


class _Reads(_Recording, TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in _COPIES_TO_HOST and args and _on_device(args[0]):
            self.syncs.append((name, _caller()))
        return func(*args, **kwargs)


class _Ops(_Recording, TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        device = kwargs.get("device") is not None or any(_on_device(t) for t in tree_flatten((args, kwargs))[0])
        if device and self._synchronises(func, args, kwargs):
            self.syncs.append((str(func.overloadpacket.__name__), _caller()))
        out = func(*args, **kwargs)
        if device:
            for tensor in tree_flatten(out)[0]:
                if isinstance(tensor, torch.Tensor):
                    setattr(tensor, _TAG, True)
        return out

    @staticmethod
    def _synchronises(func, args, kwargs):
        if func in _SIZED_BY_VALUES:
            return True
        if func.overloadpacket in (_aten.index, _aten.index_put, _aten.index_put_):  # a boolean index: its nonzero
            return any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in args[1] if i is not None)
        if func is _aten.repeat_interleave.Tensor:
            return kwargs.get("output_size") is None
        return False


class HostSyncs:
    """``with HostSyncs() as syncs: ...``; ``syncs.watch(model, batch)`` first. ``syncs.found``: (op, where) pairs."""

    def __init__(self) -> None:
        self.found = []
        self._modes = (_Reads(self.found), _Ops(self.found))

    def watch(self, *objects: object) -> Self:
        """Marks as device tensors those of modules (parameters, buffers), optimizers (their state) and nested
        dicts, lists and tuples (a batch)."""
        for obj in objects:
            if isinstance(obj, torch.nn.Module):
                tensors = [*obj.parameters(), *obj.buffers()]
            elif isinstance(obj, torch.optim.Optimizer):
                tensors = tree_flatten(list(obj.state.values()))[0]
            else:
                tensors = tree_flatten(obj)[0]
            for tensor in tensors:
                if isinstance(tensor, torch.Tensor):
                    setattr(tensor, _TAG, True)
        return self

    def __enter__(self) -> Self:
        for mode in self._modes:
            mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        for mode in reversed(self._modes):
            mode.__exit__(*exc)

    def report(self) -> str:
        return "\n".join(f"{op} at {where}" for op, where in self.found) or "none"


def update_syncs(trainer: Trainer, first: dict[str, Any], second: dict[str, Any]) -> HostSyncs:
    """Where one update of a fairseq Trainer makes the host wait, batch to optimizer step to meters: the update on
    ``second``, after one on ``first`` (which builds the optimizer's state)."""
    trainer.train_step([first])
    with HostSyncs().watch(trainer.model, trainer.criterion, second, trainer.optimizer.optimizer) as syncs:
        trainer.train_step([second])
    return syncs
