"""Search over any model family: greedy, beam, sampling, constraints, ensembles, forced decoding."""

from transformer_nmt.decoding.search import Hypothesis, beam_search, greedy_search, length_penalty

__all__ = ["Hypothesis", "beam_search", "greedy_search", "length_penalty"]
