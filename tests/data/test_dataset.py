import numpy as np
import pytest

from transformer_nmt.data.dataset import TokenSequences, TranslationDataset, encode_pairs
from transformer_nmt.data.tokenizer import EOS_ID, BPETokenizer


def test_token_sequences_pack_and_concat():
    a = TokenSequences.from_lists([[4, 5], [], [6]])
    b = TokenSequences.from_lists([[7, 8, 9]])
    joined = TokenSequences.concat([a, b])
    assert [joined[i].tolist() for i in range(len(joined))] == [[4, 5], [], [6], [7, 8, 9]]
    assert joined.lengths().tolist() == [2, 0, 1, 3]
    assert joined.values.dtype == np.int32
    assert len(TokenSequences.concat([])) == 0


def test_examples_carry_eos_on_the_source_and_text_when_kept():
    src = TokenSequences.from_lists([[4, 5], [6]])
    tgt = TokenSequences.from_lists([[7], [8, 9, 10]])
    dataset = TranslationDataset(src, tgt, ["a b", "c"], ["d", "e f g"])
    assert dataset[1] == {
        "src": [6, EOS_ID],
        "tgt": [8, 9, 10],
        "src_text": "c",
        "tgt_text": "e f g",
    }
    assert dataset.src_lengths.tolist() == [3, 2]
    assert dataset.tgt_lengths.tolist() == [2, 4]
    assert set(TranslationDataset(src, tgt)[0]) == {"src", "tgt"}


@pytest.mark.parametrize("chunk", [2, 50_000])
def test_encode_pairs_drops_long_pairs_and_keeps_order(monkeypatch, chunk):
    monkeypatch.setattr("transformer_nmt.data.dataset.ENCODE_CHUNK", chunk)
    # Every pair occurs once, below min_frequency: one token per character.
    tok = BPETokenizer.train(["a b c d e f"], vocab_size=300, min_frequency=2)
    pairs = [("a", "bb"), ("aaaa", "b"), ("ccc", "d"), ("e", "ffff"), ("f", "f")]
    dataset, dropped = encode_pairs(pairs, tok, max_len=3, keep_text=True)
    assert dropped == 2
    assert list(zip(dataset.src_text, dataset.tgt_text, strict=True)) == [
        ("a", "bb"),
        ("ccc", "d"),
        ("f", "f"),
    ]
    for i, (src, tgt) in enumerate(zip(dataset.src_text, dataset.tgt_text, strict=True)):
        assert tok.decode_batch([dataset[i]["src"], dataset[i]["tgt"]]) == [src, tgt]
    without_text, _ = encode_pairs(pairs, tok, max_len=3, keep_text=False)
    assert without_text.src_text is None and "tgt_text" not in without_text[0]
