"""Dynamic int8 quantization of a model's linear layers, for decoding on a CPU."""

import warnings

import torch
from torch import nn


def quantize_int8(model: nn.Module) -> nn.Module:
    """A copy of a float32 model on the CPU, in eval mode, whose `nn.Linear` layers run in int8.

    Dynamic quantization: weights are stored as int8 with one scale per output row, and each
    call quantizes its input on the fly; everything else stays float32. `model` is left as is.

    Every `nn.Linear` is quantized, the output projection included: it is the largest matmul of
    a decoder step (d_model x vocab_size). Where it is tied to the target embedding, it gets an
    int8 copy of the shared matrix while the embedding lookup keeps reading the float32 original
    (`nn.Embedding` is not quantized), so inputs lose nothing; per-row scales fit each token's
    own norm, which per-tensor scales would give to the largest row.
    """
    # torch.ao.quantization is deprecated in favour of torchao, yet works as ever and runs on
    # fbgemm's int8 kernels; torchao's int8 configs (weight-only, dynamic activation) leave their
    # CPU matmuls for torch.compile to fuse and run slower than float32 without it
    # (experiments/frontier/README.md), so they are not used here. The deprecation warnings would
    # greet every user of `--quantization int8` and say nothing they can act on, so they are
    # silenced here, and only here, by their text.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.ao.quantization is deprecated")
        warnings.filterwarnings("ignore", message="torch.quantize_per_tensor, torch.quantize_per")
        from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

        quantized = quantize_dynamic(
            model, {nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8
        )
    return quantized.eval()
