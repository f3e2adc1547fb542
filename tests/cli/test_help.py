"""--help of the decoding commands: every numeric option states its range and its default."""

import argparse

import pytest

from transformer_nmt.cli.evaluate import main as evaluate_main
from transformer_nmt.cli.rescore import main as rescore_main
from transformer_nmt.cli.score import main as score_main
from transformer_nmt.cli.search_args import (
    finite_float,
    non_negative_int,
    positive_float,
    positive_int,
    probability,
)
from transformer_nmt.cli.translate import main as translate_main

# How a help text may state the range each argparse type enforces.
RANGES = {
    positive_int: (">= 1", "1 to"),
    non_negative_int: (">= 0",),
    positive_float: ("> 0",),
    probability: ("(0, 1]",),
    finite_float: ("finite number",),
}


class Built(Exception):
    """Raised with the parser a command built, when it starts parsing."""


def parsers(main, monkeypatch) -> list[argparse.ArgumentParser]:
    """The command's parser and its subcommands' parsers."""

    def capture(self, *args, **kwargs):
        raise Built(self)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", capture)
    with pytest.raises(Built) as built:
        main([])
    parser = built.value.args[0]
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found += action.choices.values()
    return found


@pytest.mark.parametrize("main", [translate_main, score_main, evaluate_main, rescore_main])
def test_every_numeric_option_states_its_range_and_default(main, monkeypatch):
    numeric = [
        action
        for parser in parsers(main, monkeypatch)
        for action in parser._actions
        if action.option_strings and action.type in RANGES
    ]
    assert numeric  # each command has some
    missing = [
        action.option_strings[0]
        for action in numeric
        if "default" not in (action.help or "")
        or not any(text in action.help for text in RANGES[action.type])
    ]
    assert missing == []
