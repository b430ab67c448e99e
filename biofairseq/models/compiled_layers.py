"""``biofairseq-train --compile``: every encoder layer through ``torch.compile``, in place.

``nn.Module.compile`` compiles a module's call and keeps the module, so parameter names, state dicts, checkpoints,
resume and conversion are unchanged, and a checkpoint trained compiled loads and runs uncompiled. All layers of a
model run the same code, so they share their compiled graphs (dynamo treats parameters as inputs); a new graph is
made when a layer meets another combination of training or evaluation, padding mask or none, lengths (fixed at
first, then dynamic), width (ELECTRA's towers) or input layout (in an unpacked RoBERTa, the first layer gets
fairseq's transposed view of the embeddings).

The layers are what is compiled: they hold nearly all of the work, and their layer norms, GELU, dropout and residual
additions are the small kernels a compiler fuses. fairseq's activation checkpointing wraps a layer's forward in its
own autograd function; there, the forward it runs and reruns is what is compiled. Packed rows' dense document mask
is compiled with the layer; variable-length attention over their segments (``documents.VARLEN_DEVICES``, none by
default) would stay outside the graphs: its jagged tensors have other lengths in every batch.
"""

import functools
import logging
from typing import TypeVar

import torch
from fairseq.modules.transformer_layer import TransformerEncoderLayerBase

from biofairseq.models import attention

COMPILE_CHOICES = ("none", "inductor", "aot_eager")  # aot_eager: traced by torch.compile, no code generated (checks)
RECOMPILE_LIMIT = 64
logger = logging.getLogger(__name__)
ModuleT = TypeVar("ModuleT", bound=torch.nn.Module)


def compile_layers(model: ModuleT, backend: str) -> ModuleT:
    """Compiles every fairseq encoder layer of ``model`` with this torch.compile backend (none: leaves them)."""
    if backend not in COMPILE_CHOICES:
        raise ValueError(f"--compile {backend}: unknown; use one of {', '.join(COMPILE_CHOICES)}")
    if backend == "none":
        return model
    # those combinations make up to 10 graphs in a run (docs/fast-path.md): more than dynamo's default of 8 per function,
    # after which a layer would run uncompiled
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)
    # variable-length attention runs between the graphs; disabled here, not where it is defined, because
    # torch.compiler.disable imports dynamo, a second to start every process that loads the models (our own
    # function, which SdpaSelfAttention looks up when it is called)
    if not getattr(attention.over_segments, "_torchdynamo_disable", False):
        attention.over_segments = torch.compiler.disable(attention.over_segments)
    layers = [m for m in model.modules()
              if isinstance(m, TransformerEncoderLayerBase) or getattr(type(m), "compiled_layer", False)]
    for layer in layers:
        if hasattr(layer, "precheckpoint_forward"):  # fairseq's checkpoint_wrapper: forward is a partial around it
            checkpointed = layer.forward
            layer.precheckpoint_forward = torch.compile(layer.precheckpoint_forward, backend=backend)
            layer.forward = functools.partial(checkpointed.func, layer.precheckpoint_forward, *checkpointed.args[1:],
                                              **checkpointed.keywords)
        else:
            layer.compile(backend=backend)
    logger.info(f"compiling {len(layers)} encoder layers with torch.compile (backend {backend}) at their first batch")
    return model
