"""The quality record's measures: the constraint drawn from a reference, n-best lists, self-BLEU."""

import pytest

from experiments.decoding_research.quality import (
    constraint,
    contains,
    distinct,
    n_best_lists,
    self_bleu,
)


def test_the_constraint_is_the_references_first_longest_word():
    assert constraint("A man in a blue shirt, skateboarding.") == "skateboarding"
    assert constraint("Two dogs play in snow") == "dogs"  # the first of the longest
    assert constraint("42 !") == ""


def test_a_constraint_is_met_by_whole_words_only():
    assert contains("A dog runs.", "dog")
    assert not contains("Two dogs run.", "dog")


def test_n_best_lines_become_one_list_a_rank_and_a_missing_entry_is_refused(tmp_path):
    path = tmp_path / "nbest"
    path.write_text("0\t-1.0\ta b\n0\t-2.0\ta c\n1\t-0.5\td\n1\t-0.9\te\n")
    assert n_best_lists(path, 2, 2) == [["a b", "d"], ["a c", "e"]]
    with pytest.raises(ValueError, match="not 3 outputs"):
        n_best_lists(path, 2, 3)


def test_identical_lists_have_self_bleu_100_and_one_distinct_output():
    lists = [["a man rides a red bike down the hill"]] * 3
    assert self_bleu(lists) == pytest.approx(100)
    assert distinct(lists) == 1
    varied = [["a man rides a red bike"], ["two dogs play in snow"], ["the child eats ice cream"]]
    assert self_bleu(varied) < 10 and distinct(varied) == 3
