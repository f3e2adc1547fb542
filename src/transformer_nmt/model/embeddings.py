"""Token embeddings scaled by sqrt(d_model) (section 3.4), shared by both model families."""

import math

from torch import Tensor, nn


class Embeddings(nn.Module):
    """Token embeddings multiplied by sqrt(d_model); `.weight` can be tied to other layers."""

    def __init__(self, vocab_size: int, d_model: int, pad_id: int):
        super().__init__()
        self.d_model = d_model
        self.lut = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)

    @property
    def weight(self) -> nn.Parameter:
        return self.lut.weight

    def forward(self, tokens: Tensor) -> Tensor:
        return self.lut(tokens) * math.sqrt(self.d_model)  # (B, T) -> (B, T, d_model)
