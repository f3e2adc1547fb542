"""What training, search and the attention plots need from a translation model.

A model family (the Transformer, the RNN encoder-decoder with attention) plugs in by providing
these methods, without an `if` in the code that uses them; `families` maps each family's name
to its config and model classes.
"""

from typing import Any, ClassVar, Protocol, runtime_checkable

from torch import Tensor

# A model's incremental decoding state: opaque to callers, who only create and reorder it.
Cache = Any


class ModelConfig(Protocol):
    """The settings every model family has; each family's config adds its own sizes."""

    family: ClassVar[str]  # the name `families.FAMILIES` knows it by, stored in checkpoints
    vocab_size: int
    pad_id: int
    max_positions: int  # longest sequence the model reads or writes
    d_model: int  # the width the learning-rate schedule scales by, d_model^-0.5

    def to_dict(self) -> dict[str, Any]:
        """Plain values and the family, as checkpoints store them."""
        ...


class EncoderDecoder(Protocol):
    """A sequence-to-sequence model, batch-first, over one shared vocabulary."""

    config: ModelConfig

    def forward(self, src: Tensor, tgt_in: Tensor, index: Tensor | None = None) -> Tensor:
        """Teacher-forced logits: (B, T, V), or (N, V) at the flat target positions `index`."""
        ...

    def encode(self, src: Tensor, need_weights: bool = False) -> Tensor | tuple[Tensor, Any]:
        """(B, S) source ids -> memory (B, S, d), with per-layer self-attention weights if asked.

        The weights are a list over layers of (B, h, S, S); a family without encoder
        self-attention (the RNN) returns an empty list.
        """
        ...

    def decode(
        self,
        tgt_in: Tensor,
        memory: Tensor,
        src_mask: Tensor,
        cache: Cache | None = None,
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, Any, Any]:
        """Logits (B, T, V) for target ids; with a cache, only the new ids, and the cache grows.

        memory and src_mask may hold a row per G rows of tgt_in (B / G rows): rows g * G ..
        g * G + G - 1 read source g, as a sentence's beams or samples do, without G copies.

        With need_weights also per-layer lists of decoder self-attention weights (B, h, T, T) and
        encoder-decoder attention weights (B, h, T, S). A family without self-attention returns
        an empty list for it; the RNN's alignment alpha_ij is one layer with one head.
        """
        ...

    def new_cache(self) -> Cache:
        """Empty incremental decoding state for `decode`."""
        ...

    def reorder_cache(self, cache: Cache, order: Tensor, sources: Tensor | None = None) -> Cache:
        """The cache whose batch row i is row order[i]: beam search's one reordering hook.

        sources: the memory rows the next `decode` reads, `memory[sources]`, as when sentences
        leave a batch. None is the caller's promise that the memory is unchanged and row i reads
        the source row order[i] read, as when beam search moves rows among one sentence's beams:
        state computed from the source alone (encoder-decoder keys and values) may then be kept
        as it is, uncopied.
        """
        ...


@runtime_checkable
class SettableDropout(Protocol):
    """A model whose dropout rate may change during training (`callbacks=late_dropout`).

    A capability, not part of `EncoderDecoder`: a family offers it by having the attribute.
    """

    dropout_rate: float  # every dropout of the model; set, it applies from the next forward
