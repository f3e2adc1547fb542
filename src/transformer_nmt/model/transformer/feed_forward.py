"""Position-wise feed-forward network (section 3.3)."""

from torch import Tensor, nn

from transformer_nmt.model.transformer.dropout import dropout

ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "swish": nn.SiLU}


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = max(0, x W1 + b1) W2 + b2, applied to each position separately.

    Args:
        d_model: input and output size.
        d_ff: inner size (2048 in the base model).
        activation: "relu" (the paper), "gelu" (BERT, GPT) or "swish" (x * sigmoid(x), Marian).
        dropout: share of the inner activations dropped in training. Not the paper;
            tensor2tensor's relu_dropout, fairseq's --activation-dropout.
    """

    def __init__(self, d_model: int, d_ff: int, activation: str = "relu", dropout: float = 0.0):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {list(ACTIVATIONS)}, got {activation!r}")
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.activation = ACTIVATIONS[activation]()
        self.dropout_p = dropout

    def forward(self, x: Tensor) -> Tensor:
        inner = dropout(self.activation(self.w_1(x)), self.dropout_p, self.training)
        return self.w_2(inner)  # (B, T, d_model)
