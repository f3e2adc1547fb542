"""The RNN encoder-decoder's settings: one typed record for the model, search and checkpoints."""

from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from transformer_nmt.model.config import TIE_EMBEDDINGS, DataclassConfig, choice_problems

CELLS = ("gru", "lstm")


@dataclass
class RNNConfig(DataclassConfig):
    """Sizes and switches of the RNN encoder-decoder with additive attention (Bahdanau et al.).

    Args:
        vocab_size: size of the vocabulary, shared by source and target (joint BPE).
        pad_id: padding token id; never attended to, its embedding starts at zero.
        cell: "gru" (the paper's gated unit, which the GRU is) or "lstm".
        embed_dim: word embedding size (the paper's m = 620); also the size of the maxout
            output layer, so that the output projection can be the target embeddings.
        hidden_size: recurrent state size of each encoder direction and of the decoder (the
            paper's n = 1000); annotations are twice as wide. The learning-rate schedule reads it
            as `d_model`.
        attention_dim: width of the alignment model's tanh layer (the paper's n' = 1000); None
            means hidden_size.
        num_layers: stacked recurrent layers in the encoder (each bidirectional) and in the
            decoder; the paper has 1.
        dropout: on embeddings, between stacked layers and before the output projection; the
            paper used none (it trained on 348M words).
        tie_embeddings: "all" shares one matrix between source embeddings, target embeddings and
            the output projection; "decoder" ties only the target embeddings and the projection;
            "none" ties nothing (the paper).
        max_positions: longest sequence search writes or a source is cut to; the model itself
            has no position table.
    """

    vocab_size: int
    pad_id: int
    cell: str = "gru"
    embed_dim: int = 256
    hidden_size: int = 256
    attention_dim: int | None = None
    num_layers: int = 1
    dropout: float = 0.2
    tie_embeddings: str = "all"
    max_positions: int = 1024

    family: ClassVar[str] = "rnn_attention"

    def __post_init__(self) -> None:
        problems = settings_problems(asdict(self))
        if problems:
            raise ValueError("; ".join(problems))
        self.attention_dim = self.hidden_size if self.attention_dim is None else self.attention_dim

    @property
    def d_model(self) -> int:
        return self.hidden_size


def settings_problems(settings: dict[str, Any]) -> list[str]:
    """Every inconsistent RNN setting, each named as `model.<key>` is in the configs."""
    problems = choice_problems(settings, {"cell": CELLS, "tie_embeddings": TIE_EMBEDDINGS})
    if settings.get("num_layers", 1) < 1:
        problems.append(f"model.num_layers={settings['num_layers']} must be at least 1")
    return problems
