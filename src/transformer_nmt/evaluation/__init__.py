"""Judging translations once made: whether one system beats another, which candidate is best."""
