import torch

from transformer_nmt.data.tokenizer import EOS_ID, PAD_ID, BPETokenizer
from transformer_nmt.model import Transformer
from transformer_nmt.translate import encode_sources, translate

SENTENCES = ["one two three", "four", "", "five six seven eight nine", "two"]


def test_sources_end_in_eos_and_fit_the_position_table():
    tokenizer = BPETokenizer.train(SENTENCES, vocab_size=270, min_frequency=1)
    src = encode_sources(tokenizer, ["a b c d e f", "", "a"], max_positions=4)
    assert src.shape == (3, 4)
    assert src[:, -1].tolist()[0] == EOS_ID and src[1].tolist() == [EOS_ID] + [PAD_ID] * 3


def test_batches_keep_the_input_order(device):
    torch.manual_seed(0)
    tokenizer = BPETokenizer.train(SENTENCES, vocab_size=270, min_frequency=1)
    model = Transformer(tokenizer.vocab_size, PAD_ID, N=1, d_model=16, d_ff=32, h=2).eval()
    model.to(device)  # translate() decodes where the model is
    options = dict(beam_size=2, max_len_b=3)
    batched = list(translate(model, tokenizer, SENTENCES, batch_size=2, **options))
    alone = [next(translate(model, tokenizer, [s], batch_size=1, **options)) for s in SENTENCES]
    assert [[text for text, _ in n_best] for n_best in batched] == [
        [text for text, _ in n_best] for n_best in alone
    ]
    assert len(batched) == len(SENTENCES)
