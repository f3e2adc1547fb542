"""Our Transformer and its peers behind one interface, at the model presets' sizes.

A peer has a `model` (an nn.Module), `loss(batch)` (the label-smoothed training loss per target
token on a collate batch) and, unless `training_only`, `greedy(src, max_len_b)` and
`beam(src, max_len_b)`, which decode a (B, S) batch and return the output tokens (EOS included,
BOS and padding not). Every peer's EOS logit is held at zero (`never_eos`), so every output runs
to its cap and each peer decodes the same number of tokens.

MarianMT needs `pip install transformers`, x-transformers `pip install x-transformers`: for the
benchmarks only, neither is a dependency of the project (`missing` says which is absent).
"""

import importlib
import importlib.util
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from experiments.common.batches import DATA
from experiments.common.torch_reference import (
    ALPHA,
    TorchTransformer,
    uncached_beam,
    uncached_greedy,
)
from transformer_nmt.cli.compose import compose_group
from transformer_nmt.data.tokenizer import BOS_ID, EOS_ID, PAD_ID
from transformer_nmt.decoding import beam_search, greedy_search
from transformer_nmt.model import Transformer
from transformer_nmt.training.step.loss import label_smoothed_nll
from transformer_nmt.training.step.module import real_target_logits

EPSILON = 0.1  # label smoothing (paper, section 5.4)
BEAM = 4


@dataclass(frozen=True)
class Size:
    N: int
    d_model: int
    d_ff: int
    h: int
    vocab: int


def model_size(name: str, vocab: int) -> Size:
    """The `model=<name>` preset as training composes it (conf/model/), with `vocab` tokens."""
    model = compose_group("model", name)
    own = [key for key in ("N_enc", "N_dec", "d_ff_dec") if model.get(key) is not None]
    if own:  # every peer here is built with one depth and one width for both stacks
        raise ValueError(f"model={name} sets {', '.join(own)}: the peers take symmetric presets")
    return Size(N=model.N, d_model=model.d_model, d_ff=model.d_ff, h=model.h, vocab=vocab)


# small with Multi30k's BPE; base (Table 3, first row) with the paper's 32k en-fr vocabulary.
SIZES = {"small": model_size("small", DATA.vocab_size), "base": model_size("base", 32000)}


def never_eos(projection: Tensor) -> None:
    """Zero EOS's row of an output projection, so its logit, 0, stays far below the best.

    A random model emits EOS at arbitrary steps (ours at the first, Marian's hardly ever), which
    would give each peer different work; without EOS every output runs to its cap.
    """
    with torch.no_grad():
        projection[EOS_ID] = 0.0


def smoothed_cross_entropy(logits: Tensor, batch: dict) -> Tensor:
    """(B, T, V) logits -> the label-smoothed loss per real target token, in fp32."""
    return F.cross_entropy(
        logits.float().flatten(0, 1),
        batch["tgt_out"].flatten(),
        ignore_index=PAD_ID,
        label_smoothing=EPSILON,
    )


class Ours:
    name = "ours"
    training_only = False

    def __init__(self, size: Size):
        self.model = Transformer(
            size.vocab, PAD_ID, N=size.N, d_model=size.d_model, d_ff=size.d_ff, h=size.h
        )
        never_eos(self.model.generator.weight)

    def loss(self, batch: dict) -> Tensor:
        """As TranslationModule computes it: only the real target positions reach the output
        projection, in bf16 rounded up as training rounds them."""
        half = torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled("cuda")
        precision = "bf16-mixed" if half else "32-true"
        logits, target = real_target_logits(self.model, batch, precision)
        loss, _ = label_smoothed_nll(logits, target, EPSILON)
        return loss / target.numel()

    def greedy(self, src: Tensor, max_len_b: int) -> int:
        out = greedy_search(self.model, src, BOS_ID, EOS_ID, max_len_b=max_len_b)
        return int((out != PAD_ID).sum())

    def beam(self, src: Tensor, max_len_b: int) -> int:
        found = beam_search(self.model, src, BOS_ID, EOS_ID, BEAM, ALPHA, max_len_b=max_len_b)
        return sum(len(hypotheses[0].tokens) for hypotheses in found)


class OursCompiled(Ours):
    """Ours under `torch.compile` with dynamic shapes, as `module.compile=true` trains it.

    Only the forward is compiled, so its decoding would be ours again: it trains only. Its
    warm-up steps hold the compilation.
    """

    name = "ours-compiled"
    training_only = True

    def __init__(self, size: Size):
        super().__init__(size)
        self.model.compile(dynamic=True)


class Torch:
    name = "torch"
    training_only = False

    def __init__(self, size: Size):
        self.model = TorchTransformer(size.vocab, size.N, size.d_model, size.d_ff, size.h)
        never_eos(self.model.out.weight)

    def loss(self, batch: dict) -> Tensor:
        return smoothed_cross_entropy(self.model(batch["src"], batch["tgt_in"]), batch)

    def greedy(self, src: Tensor, max_len_b: int) -> int:
        return int((uncached_greedy(self.model, src, max_len_b) != PAD_ID).sum())

    def beam(self, src: Tensor, max_len_b: int) -> int:
        return int((uncached_beam(self.model, src, max_len_b, BEAM) != PAD_ID).sum())


class Marian:
    """Hugging Face's MarianMT at the paper's settings: post-norm, ReLU, dropout 0.1."""

    name = "marian"
    training_only = False

    def __init__(self, size: Size):
        transformers = importlib.import_module("transformers")
        transformers.logging.set_verbosity_error()
        config = transformers.MarianConfig(
            vocab_size=size.vocab,
            decoder_vocab_size=size.vocab,
            d_model=size.d_model,
            encoder_layers=size.N,
            decoder_layers=size.N,
            encoder_attention_heads=size.h,
            decoder_attention_heads=size.h,
            encoder_ffn_dim=size.d_ff,
            decoder_ffn_dim=size.d_ff,
            activation_function="relu",  # the paper's; Marian's default is swish
            dropout=0.1,
            attention_dropout=0.0,
            activation_dropout=0.0,
            scale_embedding=True,
            max_position_embeddings=1024,
            pad_token_id=PAD_ID,
            bos_token_id=BOS_ID,
            eos_token_id=EOS_ID,
            decoder_start_token_id=BOS_ID,
            forced_eos_token_id=None,
        )
        self.model = transformers.MarianMTModel(config)
        never_eos(self.model.get_output_embeddings().weight)

    def loss(self, batch: dict) -> Tensor:
        src = batch["src"]
        logits = self.model(
            input_ids=src, attention_mask=src != PAD_ID, decoder_input_ids=batch["tgt_in"]
        ).logits
        return smoothed_cross_entropy(logits, batch)

    def generate(self, src: Tensor, max_len_b: int, num_beams: int) -> int:
        """One cap per batch (generate has no per-row one): its longest source + max_len_b."""
        mask = src != PAD_ID
        out = self.model.generate(
            input_ids=src,
            attention_mask=mask,
            num_beams=num_beams,
            do_sample=False,
            max_new_tokens=int(mask.sum(1).max()) + max_len_b,
            length_penalty=ALPHA,
            early_stopping=True,
            use_cache=True,
        )
        return int((out[:, 1:] != PAD_ID).sum())  # out starts with decoder_start_token_id

    def greedy(self, src: Tensor, max_len_b: int) -> int:
        return self.generate(src, max_len_b, num_beams=1)

    def beam(self, src: Tensor, max_len_b: int) -> int:
        return self.generate(src, max_len_b, num_beams=BEAM)


class XTransformers:
    """lucidrains' x-transformers, set to the paper: post-norm, ReLU, residual dropout 0.1.

    Its attention is its own (einsum and softmax; its `flash` switch, SDPA, is off by default).
    Positions are learned (its default), the one difference in work from the paper: a lookup.
    Trains only: its decoding has no beam search.
    """

    name = "x-transformers"
    training_only = True

    def __init__(self, size: Size):
        x_transformers = importlib.import_module("x_transformers")
        layers = dict(
            dim=size.d_model, depth=size.N, heads=size.h, pre_norm=False,
            ff_mult=size.d_ff // size.d_model, ff_custom_activation=nn.ReLU(),
            ff_sublayer_dropout=0.1, attn_sublayer_dropout=0.1,
        )  # fmt: skip
        wrapper = dict(num_tokens=size.vocab, max_seq_len=1024, emb_dropout=0.1)
        self.encoder = x_transformers.TransformerWrapper(
            **wrapper, return_only_embed=True, attn_layers=x_transformers.Encoder(**layers)
        )
        self.decoder = x_transformers.TransformerWrapper(
            **wrapper, tie_embedding=True,
            attn_layers=x_transformers.Decoder(**layers, cross_attend=True),
        )  # fmt: skip
        self.decoder.token_emb = self.encoder.token_emb  # one embedding for source, target, output
        self.model = nn.ModuleList([self.encoder, self.decoder])

    def loss(self, batch: dict) -> Tensor:
        src = batch["src"]
        mask = src != PAD_ID
        memory = self.encoder(src, mask=mask, return_embeddings=True)
        logits = self.decoder(batch["tgt_in"], context=memory, context_mask=mask)
        return smoothed_cross_entropy(logits, batch)


PEERS = {
    "ours": Ours, "ours-compiled": OursCompiled, "torch": Torch, "marian": Marian,
    "x-transformers": XTransformers,
}  # fmt: skip
PACKAGES = {"marian": "transformers", "x-transformers": "x-transformers"}  # not dependencies


def missing(name: str) -> str | None:
    """The package (as pip names it) that peer `name` needs and is not installed here, or None."""
    package = PACKAGES.get(name)
    if package and importlib.util.find_spec(package.replace("-", "_")) is None:
        return package
    return None


def build(name: str, size: Size):
    """Peer `name` at `size`, its weights drawn from seed 0 as every peer's are."""
    torch.manual_seed(0)
    return PEERS[name](size)
