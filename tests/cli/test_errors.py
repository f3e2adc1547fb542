"""A command ends on an error raised on purpose with its message, not a traceback."""

import pytest

from transformer_nmt.cli.errors import exits_on
from transformer_nmt.cli.plot_attention import main as plot_attention_main


def test_an_unreadable_checkpoint_ends_nmt_plot_attention_with_its_message(tmp_path):
    damaged = tmp_path / "damaged.ckpt"
    damaged.write_bytes(b"\x00junk")
    with pytest.raises(SystemExit) as info:
        plot_attention_main([str(damaged), "one two", "--out", str(tmp_path / "png")])
    assert info.value.code.startswith(f"error: {damaged}: unreadable")
    assert info.value.__suppress_context__  # no traceback of the error above the message


def test_any_other_error_is_a_bug_and_keeps_its_traceback():
    @exits_on(ValueError)
    def main() -> None:
        raise KeyError("a bug")

    with pytest.raises(KeyError, match="a bug"):
        main()
