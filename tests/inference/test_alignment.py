"""Alignment word numbers are those of `text.split()`, whatever runs of spaces the text holds."""

import random

import pytest

from transformer_nmt.data.tokenizer import BPETokenizer
from transformer_nmt.data.toy import ENGLISH
from transformer_nmt.inference.alignment import word_indices


@pytest.fixture(scope="module")
def tokenizer() -> BPETokenizer:
    rng = random.Random(0)
    sentences = [" ".join(rng.sample(ENGLISH, 8)) for _ in range(200)]
    return BPETokenizer.train(sentences, vocab_size=400, min_frequency=1)


@pytest.mark.parametrize(
    "text",
    ["nineteen  three nine", "one   two", "one two  ", "  one two", "one\ttwo", "one \n two"],
)
def test_subwords_fall_in_the_words_split_finds(tokenizer, text):
    (ids,) = tokenizer.encode_batch([text])
    words = word_indices(tokenizer.tokens(), ids)
    assert max(words) == len(text.split()) - 1
    assert words == sorted(words) and words[0] == 0
