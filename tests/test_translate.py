import torch

from transformer_nmt.cli.translate import translate
from transformer_nmt.data.tokenizer import PAD_ID, BPETokenizer
from transformer_nmt.model import Transformer

SENTENCES = ["one two three", "four", "", "five six seven eight nine", "two"]


def test_batches_keep_the_input_order():
    torch.manual_seed(0)
    tokenizer = BPETokenizer.train(SENTENCES, vocab_size=270, min_frequency=1)
    model = Transformer(tokenizer.vocab_size, PAD_ID, N=1, d_model=16, d_ff=32, h=2).eval()
    options = dict(beam_size=2, max_len_b=3)
    batched = list(translate(model, tokenizer, SENTENCES, batch_size=2, **options))
    alone = [next(translate(model, tokenizer, [s], batch_size=1, **options)) for s in SENTENCES]
    assert [[text for text, _ in n_best] for n_best in batched] == [
        [text for text, _ in n_best] for n_best in alone
    ]
    assert len(batched) == len(SENTENCES)
