"""A tiny multilingual Transformer trained in seconds on the number words of three languages.

Each direction maps the words of one language to the same numbers' words in another
(`multilingual_files.WORDS`), framed with the target language's tag as training frames it, so
that its translations end with EOS, are whole words, and are written in the language asked for.
"""

import random
from pathlib import Path

import torch
import torch.nn.functional as F

from helpers.multilingual_files import WORDS
from transformer_nmt.data.framing import decoder_input, decoder_target, pad_batch, source_ids
from transformer_nmt.data.languages import LANGUAGES_KEY, Languages, tag_ids
from transformer_nmt.data.tokenizer import BOS_ID, PAD_ID, BPETokenizer
from transformer_nmt.model import Transformer

LANGUAGES = ("en", "de", "fr")


def number_lines(n: int, seed: int) -> list[list[int]]:
    """n lines of 2 to 6 numbers (0 to 9)."""
    rng = random.Random(seed)
    return [[rng.randrange(10) for _ in range(rng.randint(2, 6))] for _ in range(n)]


def words(numbers: list[int], lang: str) -> str:
    return " ".join(WORDS[lang][n] for n in numbers)


def train_multilingual(
    path: Path, tag_side: str = "target", exclude: tuple[str, ...] = ("fr-de",), steps: int = 150
) -> Path:
    """A checkpoint of a model trained on every direction of LANGUAGES but `exclude`."""
    languages = Languages.from_config(LANGUAGES, exclude=exclude, tag_side=tag_side)
    corpus = [words(line, lang) for line in number_lines(100, 0) for lang in LANGUAGES]
    tokenizer = BPETokenizer.train(corpus, 300, 1, language_tokens=languages.tags)
    tags = tag_ids(tokenizer.tokens(), languages)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: threads only add synchronisation
    torch.manual_seed(0)
    model = Transformer(
        tokenizer.vocab_size, PAD_ID, N=1, d_model=32, d_ff=64, h=2, dropout=0.0, output_bias=True
    )
    with torch.no_grad():
        # Ids training never targets get no mass, as after long training: search, which leaves
        # out PAD and its first token, then scores as forced decoding's full softmax does.
        model.generator.bias[[PAD_ID, BOS_ID, *tags.values()]] = -50.0
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(steps):
        src, tgt_in, tgt_out = [], [], []
        for i, line in enumerate(number_lines(48, step + 1)):
            a, b = languages.directions[i % len(languages.directions)]
            frame = languages.frame(b, tags, a)
            (s, t) = tokenizer.encode_batch([words(line, a), words(line, b)])
            src.append(source_ids(s, prefix=frame.source_prefix))
            tgt_in.append(decoder_input(t, frame.bos_id))
            tgt_out.append(decoder_target(t))
        tgt_out = pad_batch(tgt_out)
        real = tgt_out != PAD_ID
        logits = model(pad_batch(src), pad_batch(tgt_in))
        loss = F.cross_entropy(logits[real], tgt_out[real])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    torch.set_num_threads(threads)
    torch.save(
        {
            "global_step": steps,
            "state_dict": {f"model.{k}": v for k, v in model.state_dict().items()},
            "model_config": model.config.to_dict(),
            "tokenizer": tokenizer.to_str(),
            LANGUAGES_KEY: languages.to_dict(),
        },
        path,
    )
    return path
