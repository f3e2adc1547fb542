"""The Transformer's settings: one typed record for the model, search, checkpoints and export."""

from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from transformer_nmt.model.config import TIE_EMBEDDINGS, DataclassConfig, choice_problems

# fairseq: fairseq's sinusoids, as M2M-100 and NLLB were trained with (`positions.py`).
POSITIONS = ("sinusoidal", "learned", "fairseq")
# swish (SiLU, x * sigmoid(x)) is what Marian trains OPUS-MT models with.
ACTIVATIONS = ("relu", "gelu", "swish")
# auto: per device, dtype and direction (attention.py's attention_kernel); the others force
# one kernel everywhere: SDPA's own choice, SDPA's math backend, or the softmax written out.
ATTENTION_KERNELS = ("auto", "fused", "math", "explicit")
# Depths and widths, each at least 1; a None among them is derived from another on construction.
SIZES = ("N", "N_enc", "N_dec", "d_model", "d_ff", "d_ff_dec", "h", "d_k", "d_v")


@dataclass
class TransformerConfig(DataclassConfig):
    """Sizes and switches of a Transformer; defaults are the paper's base model (Table 3).

    Args:
        vocab_size: size of the vocabulary, shared by source and target (joint BPE, section 5.1).
        pad_id: padding token id; never attended to, its embedding starts at zero.
        N, d_model, d_ff, h: sizes as in Table 3; N layers in each stack, d_ff wide.
        N_enc, N_dec: not the paper: each stack's own depth, None meaning N. A deep encoder
            and a shallow decoder (e.g. 6 and 1) decode several times faster at close to the
            symmetric model's quality (Kasai et al., 2021), the shape of distilled students.
        d_ff_dec: not the paper: the decoder's feed-forward width, None meaning d_ff (which
            then sizes the encoder's alone), for students whose decoder is narrower still.
        d_k, d_v: per-head query/key and value sizes; None means d_model // h (the paper's
            choice, which Table 3 rows (A) and (B) vary). Resolved to numbers on construction.
        dropout: P_drop on sublayer outputs and on embedding + position sums.
        attention_dropout: dropout on the attention weights; activation_dropout: on the
            feed-forward network's inner activations (tensor2tensor's attention_dropout and
            relu_dropout, fairseq's --attention-dropout and --activation-dropout). Not the
            paper, whose 0 turns them off. `callbacks=late_dropout` raises `dropout` only.
        norm_first: pre-norm layers and a final LayerNorm per stack; the paper is post-norm.
        positions: "sinusoidal" (the paper), "learned" (Table 3 row E), or "fairseq": not the
            paper, fairseq's sinusoids (M2M-100's, NLLB's; `FairseqSinusoidalPositions`).
        max_positions: longest sequence the position table covers.
        tie_embeddings: "all" shares one matrix between source embeddings, target embeddings and
            the pre-softmax projection (the paper, section 3.4); "decoder" ties only the target
            embeddings and the projection; "none" ties nothing.
        activation: "relu" (the paper), "gelu" or "swish" in the feed-forward networks.
        output_bias: not the paper: a bias on the pre-softmax projection (Marian's
            final_logits_bias, which OPUS-MT models carry); the paper's projection has none.
        decoder_start: not the paper: a token id the decoder reads before its input, so that a
            target's first token (BOS, or a language tag in its place) is its second. M2M-100
            and NLLB start decoding with `</s>` and then the language tag (their
            decoder_start_token_id and forced_bos_token_id); None reads none, as the paper.
        rezero: not the paper: every residual connection is x + alpha * Dropout(Sublayer(x))
            with a trainable scalar alpha initialised to 0 and no LayerNorm (ReZero, Bachlechner
            et al., 2020), so every layer starts as the identity. Excludes norm_first.
        attention_kernel: how attention is computed where its weights are not asked for; a
            speed setting only, every kernel computes the same function. "auto" picks the kernel
            measured fastest for the device, dtype and direction (training, inference, or a
            decoding step's encoder-decoder attention over its cached keys);
            "fused", "math" or "explicit" force one (see `attention.scaled_dot_product`).
    """

    vocab_size: int
    pad_id: int
    N: int = 6
    N_enc: int | None = None
    N_dec: int | None = None
    d_model: int = 512
    d_ff: int = 2048
    d_ff_dec: int | None = None
    h: int = 8
    d_k: int | None = None
    d_v: int | None = None
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation_dropout: float = 0.0
    norm_first: bool = False
    positions: str = "sinusoidal"
    max_positions: int = 1024
    tie_embeddings: str = "all"
    activation: str = "relu"
    output_bias: bool = False
    decoder_start: int | None = None
    rezero: bool = False
    attention_kernel: str = "auto"

    family: ClassVar[str] = "transformer"

    def __post_init__(self) -> None:
        problems = settings_problems(asdict(self))
        if problems:
            raise ValueError("; ".join(problems))
        self.d_k = self.d_model // self.h if self.d_k is None else self.d_k
        self.d_v = self.d_model // self.h if self.d_v is None else self.d_v
        self.N_enc = self.N if self.N_enc is None else self.N_enc
        self.N_dec = self.N if self.N_dec is None else self.N_dec
        self.d_ff_dec = self.d_ff if self.d_ff_dec is None else self.d_ff_dec

    def sizes(self) -> str:
        """N, d_model, d_ff and h as the configs name them; each stack's where the two differ."""
        depth = (
            f"N={self.N_enc}"
            if self.N_enc == self.N_dec
            else f"N_enc={self.N_enc}, N_dec={self.N_dec}"
        )
        width = f"d_ff={self.d_ff}" + (
            f", d_ff_dec={self.d_ff_dec}" if self.d_ff_dec != self.d_ff else ""
        )
        return f"{depth}, d_model={self.d_model}, {width}, h={self.h}"


def _counts(size: Any) -> bool:
    """A size or a depth: a whole number of at least 1 (bool is an int to Python, not here)."""
    return isinstance(size, int) and not isinstance(size, bool) and size >= 1


def settings_problems(settings: dict[str, Any]) -> list[str]:
    """Every inconsistent Transformer setting, each named as `model.<key>` is in the configs.

    Takes a plain dict so that a training config can be checked before its vocabulary exists.
    """
    problems = [
        f"model.{key}={settings[key]!r} must be a whole number of at least 1"
        for key in SIZES
        if settings.get(key) is not None and not _counts(settings[key])
    ]
    unset = [key for key in ("d_k", "d_v") if settings.get(key) is None]
    d_model, h = settings.get("d_model", 512), settings.get("h", 8)
    if unset and _counts(d_model) and _counts(h) and d_model % h:
        problems.append(
            f"model.d_model={d_model} is not divisible by model.h={h}, so "
            f"{' and '.join(f'model.{k}' for k in unset)} (d_model / h by default) cannot be "
            "derived: change one of them or set model.d_k and model.d_v"
        )
    for key in ("dropout", "attention_dropout", "activation_dropout"):
        rate = settings.get(key, 0.0)
        if not 0 <= rate < 1:
            problems.append(f"model.{key}={rate} must lie in [0, 1)")
    problems += choice_problems(
        settings,
        {
            "positions": POSITIONS,
            "tie_embeddings": TIE_EMBEDDINGS,
            "activation": ACTIVATIONS,
            "attention_kernel": ATTENTION_KERNELS,
        },
    )
    start, vocab_size = settings.get("decoder_start"), settings.get("vocab_size")
    if start is not None and not (
        isinstance(start, int)
        and not isinstance(start, bool)
        and 0 <= start
        and (vocab_size is None or start < vocab_size)
    ):
        problems.append(f"model.decoder_start={start!r} must be a token id or null")
    if settings.get("rezero") and settings.get("norm_first"):
        problems.append(
            "model.rezero=true and model.norm_first=true exclude each other: ReZero layers have "
            "no LayerNorm to put first; set one of them to false"
        )
    return problems
