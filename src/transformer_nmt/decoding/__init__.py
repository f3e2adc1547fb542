"""Turning any model family's next-token distributions into translations, and scoring given ones."""

from transformer_nmt.decoding.search import Hypothesis, beam_search, greedy_search, length_penalty

__all__ = ["Hypothesis", "beam_search", "greedy_search", "length_penalty"]
