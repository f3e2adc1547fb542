"""The speed record's `generate` batches are the ones `Translator` decodes."""

import torch

from experiments.decoding_research.speed import length_sorted_batches
from helpers.checkpoint_files import TINY
from transformer_nmt.data.tokenizer import PAD_ID, BPETokenizer
from transformer_nmt.decoding import Hypothesis
from transformer_nmt.inference.translator import Translator
from transformer_nmt.model import Transformer

SENTENCES = ["one two three four", "five", "six seven", "eight nine ten", "two", "three one"] * 3


class Recorder:
    """An engine that decodes nothing and keeps the batches of source texts it was given."""

    def __init__(self, tokenizer: BPETokenizer, max_positions: int):
        self.tokenizer, self.max_positions, self.batches = tokenizer, max_positions, []

    def __call__(self, batches, **options):
        for ids in batches:
            self.batches.append(self.tokenizer.decode_batch(ids))
            yield [[Hypothesis([], 0.0, 0.0)] for _ in ids]


def test_batches_are_the_translators():
    tokenizer = BPETokenizer.train(SENTENCES, vocab_size=270, min_frequency=1)
    torch.manual_seed(0)
    model = Transformer(tokenizer.vocab_size, PAD_ID, **TINY["transformer"])
    translator = Translator(model, tokenizer, device="cpu")
    translator.search = Recorder(tokenizer, model.config.max_positions)
    translator.translate(SENTENCES, batch_size=4)
    assert length_sorted_batches(SENTENCES, tokenizer, 4) == translator.search.batches
    assert len(translator.search.batches) == 5
