"""Judging translations: paired significance tests and n-best rescoring."""
