"""Small checkpoints as training writes them, for the checkpoint and CLI tests."""

from pathlib import Path

import torch

from transformer_nmt.data.tokenizer import PAD_ID, BPETokenizer
from transformer_nmt.model import Transformer

SENTENCES = ["one two three", "zwei drei vier", "four five six", "fünf sechs sieben"] * 5


def write_checkpoint(path: Path, tokenizer: BPETokenizer, seed: int = 0, step: int = 0) -> Path:
    """What TranslationModule saves, minus the training state: weights, config, tokenizer."""
    torch.manual_seed(seed)
    model = Transformer(tokenizer.vocab_size, PAD_ID, N=1, d_model=16, d_ff=32, h=2)
    torch.save(
        {
            "global_step": step,
            "state_dict": {f"model.{k}": v for k, v in model.state_dict().items()},
            "model_config": model.config.to_dict(),
            "tokenizer": tokenizer.to_str(),
        },
        path,
    )
    return path
