"""A tiny OPUS-MT-shaped MarianMT folder (experiments/research_workflows/opus_shaped.py): random
weights, SentencePiece models trained on a few lines. Needs transformers and sentencepiece."""

from pathlib import Path

import torch
import transformers

from experiments.research_workflows.opus_shaped import write_opus_folder as write_folder

GERMAN = ["ein hund rennt über die wiese", "zwei kinder spielen im park", "eine frau liest"] * 4
ENGLISH = ["a dog runs across the grass", "two children play in the park", "a woman reads"] * 4


def perturb(marian: transformers.MarianMTModel) -> None:
    """Every weight random, LayerNorms and the logits bias included: no part left at its init."""
    with torch.no_grad():
        for name, p in marian.named_parameters():
            p.normal_(1.0 if name.endswith("layer_norm.weight") else 0.0, 0.3)
        marian.final_logits_bias.normal_(0, 0.1)


def write_opus_folder(folder: Path, **decoder: int) -> None:
    """`decoder`: the decoder's own decoder_layers and decoder_ffn_dim, if any."""
    sizes = dict(d_model=16, layers=2, heads=2, ffn_dim=32, max_positions=64) | decoder
    write_folder(folder, GERMAN, ENGLISH, 30, sizes, init=perturb)
