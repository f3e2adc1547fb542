"""A toy model trained for a few seconds, so that its translations end (with EOS) and score."""

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from transformer_nmt.data.framing import decoder_input, decoder_target, pad_batch, source_batch
from transformer_nmt.data.tokenizer import PAD_ID, BPETokenizer
from transformer_nmt.data.toy import ToyCorpus
from transformer_nmt.model import Transformer

STEPS, BATCH = 300, 32


def train_toy(steps: int = STEPS) -> tuple[Transformer, BPETokenizer, list[tuple[str, str]]]:
    """A tiny model trained on the toy task (en -> reversed de) by a plain loop; the test pairs."""
    corpus = ToyCorpus(num_train=2000, num_val=0, num_test=40, max_len=6)
    train, test = corpus.read("train", "en", "de"), corpus.read("test", "en", "de")
    tokenizer = BPETokenizer.train([s for pair in train for s in pair], 300, min_frequency=1)
    torch.manual_seed(0)
    model = Transformer(
        tokenizer.vocab_size, PAD_ID, N=1, d_model=64, d_ff=128, h=4, dropout=0.0, max_positions=64
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    generator = torch.Generator().manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: threads only add synchronisation
    sources = tokenizer.encode_batch([src for src, _ in train])
    targets = tokenizer.encode_batch([tgt for _, tgt in train])
    for _ in range(steps):
        rows = torch.randint(len(train), (BATCH,), generator=generator).tolist()
        tgt_ids = [targets[i] for i in rows]
        src = source_batch([sources[i] for i in rows], model.config.max_positions)
        logits = model(src, pad_batch([decoder_input(t) for t in tgt_ids]))
        target = pad_batch([decoder_target(t) for t in tgt_ids])
        loss = F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=PAD_ID)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    torch.set_num_threads(threads)
    return model.eval(), tokenizer, test


def save(model: Transformer, tokenizer: BPETokenizer, path: Path) -> Path:
    """A checkpoint as training writes it, minus the training state."""
    torch.save(
        {
            "global_step": STEPS,
            "state_dict": {f"model.{k}": v for k, v in model.state_dict().items()},
            "model_config": model.config.to_dict(),
            "tokenizer": tokenizer.to_str(),
            "datamodule_hyper_parameters": {"src_lang": "en", "tgt_lang": "de"},
        },
        path,
    )
    return path


@pytest.fixture(scope="session")
def toy(tmp_path_factory) -> tuple[Transformer, BPETokenizer, list[tuple[str, str]], Path]:
    """The trained toy model, its tokenizer, its test pairs and its checkpoint file."""
    model, tokenizer, test = train_toy()
    folder = tmp_path_factory.mktemp("toy") / "checkpoints"
    folder.mkdir()
    return model, tokenizer, test, save(model, tokenizer, folder / "last.ckpt")
