"""Fine-tuning's vocabulary: the parent's, kept as it is or extended, never silently replaced.

A data config names the BPE it trains by its settings and its training text
(`tokenizer.cache_path`). Fine-tuning changes the text (a new domain, with the parent's
vocabulary); the settings change only to ask for another vocabulary, so a `data.vocab_size` or
`data.min_frequency` other than the parent's is refused, unless `init.extend_vocab` asks for the
data config's BPE, trained on the new corpus, to add the tokens the parent lacks.
"""

import logging
from typing import Any

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig

from transformer_nmt.data.tokenizer import BPETokenizer, SubwordTokenizer
from transformer_nmt.model import EncoderDecoder
from transformer_nmt.model.vocab_growth import PER_TOKEN, with_vocab_size
from transformer_nmt.training.plan.config_checks import ConfigError

log = logging.getLogger(__name__)

# The data settings that name a tokenizer besides its training text.
TOKENIZER_SETTINGS = ("vocab_size", "min_frequency")


def vocab_problem(
    data: DictConfig, recorded: dict[str, Any], tokenizer: SubwordTokenizer
) -> str | None:
    """A data config asking for another tokenizer than the parent's, both named, with the fix.

    Compared with the settings the parent recorded; where it recorded none, a BPE of
    `data.vocab_size` smaller than the parent's vocabulary cannot be it. No data setting
    describes a MarianMT parent's SentencePiece vocabulary: nothing to compare.
    """
    if not isinstance(tokenizer, BPETokenizer):
        return None
    extend = "or init.extend_vocab=true to add the new corpus's tokens to the parent's vocabulary"
    if not recorded:
        if data.vocab_size >= tokenizer.vocab_size:
            return None
        return (
            f"data.vocab_size={data.vocab_size} would train another tokenizer than the parent's, "
            f"whose vocabulary holds {tokenizer.vocab_size} tokens: fine-tuning keeps the "
            f"parent's, so set data.vocab_size >= {tokenizer.vocab_size}, {extend}"
        )
    differ = [
        name for name in TOKENIZER_SETTINGS if name in recorded and data[name] != recorded[name]
    ]
    if not differ:
        return None
    asked = ", ".join(f"data.{name}={data[name]}" for name in differ)
    parents = ", ".join(f"data.{name}={recorded[name]}" for name in differ)
    return (
        f"{asked} would train another tokenizer than the parent's ({parents}, "
        f"{tokenizer.vocab_size} tokens): fine-tuning keeps the parent's vocabulary, so set "
        f"{parents}, {extend}"
    )


def extend_vocab(
    cfg: DictConfig, model: EncoderDecoder, tokenizer: SubwordTokenizer
) -> tuple[EncoderDecoder, BPETokenizer]:
    """The parent with the tokens of the data config's BPE (trained on the new corpus, or read
    from its cache) that it lacks added at the end (`BPETokenizer.extended`), and a row each
    in its embeddings and output layer, drawn as a new model draws them from `cfg.seed`."""
    if not isinstance(tokenizer, BPETokenizer):
        raise ConfigError(
            f"init.extend_vocab extends a byte-level BPE vocabulary, and the parent's is "
            f"{type(tokenizer).__name__}'s: set init.extend_vocab=false"
        )
    new = instantiate(cfg.data, max_tokens="auto").load_tokenizer()
    extended = tokenizer.extended(new)
    log.info(
        "init.extend_vocab: %d tokens of the new corpus's BPE added to the parent's %d",
        extended.vocab_size - tokenizer.vocab_size,
        tokenizer.vocab_size,
    )
    with torch.random.fork_rng(devices=[]):  # the run's own RNG stream stays untouched
        torch.manual_seed(cfg.seed)
        return with_vocab_size(model, extended.vocab_size), extended


def frozen_rows_problem(model: EncoderDecoder) -> str | None:
    """Frozen weights that hold new tokens' rows, which would keep their random start."""
    frozen = [
        name
        for name, p in model.named_parameters(remove_duplicate=False)
        if name.startswith(PER_TOKEN) and not p.requires_grad
    ]
    if not frozen:
        return None
    return (
        f"init.extend_vocab adds tokens whose rows in {', '.join(frozen)} init.freeze would leave "
        "at their random start: leave the embeddings and generator out of init.freeze"
    )
