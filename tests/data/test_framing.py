"""Framing: the one definition of what the encoder reads and the decoder reads and predicts."""

from pathlib import Path

from transformer_nmt.data.batching import collate
from transformer_nmt.data.dataset import TokenSequences, TranslationDataset
from transformer_nmt.data.framing import (
    cut_at_eos,
    decoder_input,
    decoder_target,
    pad_batch,
    source_batch,
    source_ids,
)
from transformer_nmt.data.tokenizer import BOS_ID, EOS_ID, PAD_ID

SRC = Path(__file__).resolve().parents[2] / "src" / "transformer_nmt"


def test_sources_end_in_eos_and_fit_the_position_table():
    src = source_batch([[5, 6, 7, 8, 9, 10], [], [5]], max_positions=4)
    assert src.tolist() == [[5, 6, 7, EOS_ID], [EOS_ID, PAD_ID, PAD_ID, PAD_ID], [5, EOS_ID, 0, 0]]


def test_decoder_reads_one_position_behind_what_it_predicts():
    tokens = [7, 8, 9]
    assert decoder_input(tokens)[1:] == decoder_target(tokens)[:-1]
    assert decoder_input(tokens)[0] == BOS_ID and decoder_target(tokens)[-1] == EOS_ID
    assert cut_at_eos(decoder_target(tokens) + [PAD_ID, PAD_ID]) == tokens
    assert cut_at_eos(tokens) == tokens  # cut at the maximum length: no EOS


def test_dataset_and_collate_frame_as_framing_does():
    seqs = TokenSequences.from_lists
    dataset = TranslationDataset(seqs([[5, 6], [7]]), seqs([[8], [9, 10, 11]]))
    assert dataset[0]["src"] == source_ids([5, 6])
    assert dataset.src_lengths.tolist() == [len(source_ids([5, 6])), len(source_ids([7]))]
    assert dataset.tgt_lengths.tolist() == [
        len(decoder_input([8])),
        len(decoder_input([9, 10, 11])),
    ]
    batch = collate([dataset[0], dataset[1]], PAD_ID)
    assert (
        batch["tgt_in"].tolist()
        == pad_batch([decoder_input([8]), decoder_input([9, 10, 11])]).tolist()
    )
    assert (
        batch["tgt_out"].tolist()
        == pad_batch([decoder_target([8]), decoder_target([9, 10, 11])]).tolist()
    )


def test_special_ids_are_framed_in_one_module_only():
    """BOS and EOS appear in framing (and where the tokenizer defines them), nowhere else."""
    users = sorted(
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        if "BOS_ID" in path.read_text() or "EOS_ID" in path.read_text()
    )
    assert users == ["data/framing.py", "data/tokenizer.py"]
