"""The bidirectional encoder: annotations h_j = [->h_j; <-h_j] (Bahdanau et al., section 3.2)."""

import torch
from torch import Tensor, nn

RNNS = {"gru": nn.GRU, "lstm": nn.LSTM}


def reversal_index(src_mask: Tensor) -> Tensor:
    """(B, S) gather index reversing each row's real positions in place; padding stays put.

    Its own inverse. A backward RNN reading the reversed rows meets padding only after every real
    token, so its states at real positions do not depend on how much padding follows.
    """
    lengths = src_mask.sum(dim=1, keepdim=True)  # (B, 1)
    positions = torch.arange(src_mask.size(1), device=src_mask.device)  # (S,)
    return torch.where(positions < lengths, lengths - 1 - positions, positions)


class BidirectionalEncoder(nn.Module):
    """Layers of a forward and a backward RNN; each layer reads the one below's annotations."""

    def __init__(
        self, cell: str, input_size: int, hidden_size: int, num_layers: int, dropout: float
    ):
        super().__init__()
        sizes = [input_size] + [2 * hidden_size] * (num_layers - 1)
        self.forward_rnns = nn.ModuleList(
            RNNS[cell](n, hidden_size, batch_first=True) for n in sizes
        )
        self.backward_rnns = nn.ModuleList(
            RNNS[cell](n, hidden_size, batch_first=True) for n in sizes
        )
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, src_mask: Tensor) -> Tensor:
        """x (B, S, input_size), src_mask (B, S) -> annotations (B, S, 2 * hidden_size)."""
        reverse = reversal_index(src_mask)[:, :, None]  # (B, S, 1)
        for layer, (forward_rnn, backward_rnn) in enumerate(
            zip(self.forward_rnns, self.backward_rnns, strict=True)
        ):
            if layer:
                x = self.dropout(x)
            forwards, _ = forward_rnn(x)  # (B, S, H)
            backwards, _ = backward_rnn(x.gather(1, reverse.expand_as(x)))
            backwards = backwards.gather(1, reverse.expand_as(backwards))  # back in source order
            x = torch.cat([forwards, backwards], dim=-1)
        return x
