"""Small checkpoints as training writes them, for the checkpoint and CLI tests."""

from pathlib import Path

import torch

from transformer_nmt.checkpoint import KIND_KEY, PERIODIC
from transformer_nmt.data.tokenizer import PAD_ID, BPETokenizer
from transformer_nmt.model import FAMILIES

SENTENCES = ["one two three", "zwei drei vier", "four five six", "fünf sechs sieben"] * 5
# Each model family's sizes in these checkpoints.
TINY = {
    "transformer": dict(N=1, d_model=16, d_ff=32, h=2),
    "rnn_attention": dict(embed_dim=16, hidden_size=16),
}


def write_checkpoint(
    path: Path,
    tokenizer: BPETokenizer,
    seed: int = 0,
    step: int = 0,
    family: str = "transformer",
    kind: str | None = PERIODIC,
    data: dict | None = None,
    **settings,
) -> Path:
    """What TranslationModule saves, minus the training state: weights, config, tokenizer.

    `kind` is the checkpoint policy's mark (only periodic ones are averaged by `--average-last`),
    None for none, as runs wrote before; `data`: the data settings Lightning records, if any;
    `settings` change the family's tiny sizes and switches, e.g. rezero=True.
    """
    torch.manual_seed(seed)
    model = FAMILIES[family].model(tokenizer.vocab_size, PAD_ID, **(TINY[family] | settings))
    torch.save(
        {
            "global_step": step,
            "state_dict": {f"model.{k}": v for k, v in model.state_dict().items()},
            "model_config": model.config.to_dict(),
            "tokenizer": tokenizer.to_str(),
            **({} if kind is None else {KIND_KEY: kind}),
            **({} if data is None else {"datamodule_hyper_parameters": data}),
        },
        path,
    )
    return path


def assert_bit_identical(reference: dict, run: dict) -> None:
    """Two checkpoints' weights and Adam state, equal bit for bit."""
    assert run["global_step"] == reference["global_step"]
    for key, weights in reference["state_dict"].items():
        torch.testing.assert_close(run["state_dict"][key], weights, rtol=0, atol=0, msg=key)
    adam = [end["optimizer_states"][0]["state"] for end in (reference, run)]
    for index, state in adam[0].items():
        for name, value in state.items():
            torch.testing.assert_close(adam[1][index][name], value, rtol=0, atol=0, msg=name)
