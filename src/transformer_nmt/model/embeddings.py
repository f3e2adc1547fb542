"""Token embeddings scaled by sqrt(d_model) (section 3.4), shared by both model families."""

import math

import torch
from torch import Tensor, nn


class Embeddings(nn.Module):
    """Token embeddings multiplied by sqrt(d_model); `.weight` can be tied to other layers."""

    def __init__(self, vocab_size: int, d_model: int, pad_id: int):
        super().__init__()
        self.d_model = d_model
        self.lut = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)

    def reset_parameters(self) -> None:
        """N(0, d_model^-0.5), as fairseq and tensor2tensor, so that the scaled embeddings (and
        tied output logits) start at about unit scale; the padding row stays zero."""
        nn.init.normal_(self.weight, 0.0, self.d_model**-0.5)
        with torch.no_grad():
            self.weight[self.lut.padding_idx].zero_()

    @property
    def weight(self) -> nn.Parameter:
        return self.lut.weight

    def forward(self, tokens: Tensor) -> Tensor:
        return self.lut(tokens) * math.sqrt(self.d_model)  # (B, T) -> (B, T, d_model)
