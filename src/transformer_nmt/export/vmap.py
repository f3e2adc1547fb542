"""CTranslate2's vocabulary map (vmap.txt): decoding scores only the target language's tokens.

A joint BPE learns one vocabulary from both languages, so part of it is never written in the
target language (Multi30k de-en: 3,858 of 8,000 tokens never occur in train.en), yet every
decoding step projects onto it and normalizes over it. With a vocabulary map and `use_vmap`,
CTranslate2 scores only the map's candidates. Ours has one rule, CTranslate2's "always" rule (an
empty source n-gram), listing every token of the target side of the training data; CTranslate2
adds UNK, BOS and EOS itself. The model learned never to write the other tokens, but the
softmax now runs over the candidates alone, so scores rise a little and some beams rank
differently (experiments/export/README.md measures the BLEU).
"""

import itertools
import os
from pathlib import Path

from transformer_nmt.data.bitext import iter_lines
from transformer_nmt.data.corpus import DataFormatError
from transformer_nmt.data.tokenizer import SubwordTokenizer
from transformer_nmt.export.ct2 import vocabulary

CHUNK = 10_000  # lines tokenized at once: memory stays flat on a WMT-sized file


def target_vocabulary_map(tokenizer: SubwordTokenizer, target_text: str | os.PathLike) -> str:
    """The vmap.txt text whose candidates are the tokens of `target_text` (.gz allowed).

    Raises:
        DataFormatError: a file without a single token, or not UTF-8 text.
    """
    target_text = Path(target_text)
    seen: set[int] = set()
    lines = iter_lines(target_text)
    while chunk := [line.strip() for line in itertools.islice(lines, CHUNK)]:
        for ids in tokenizer.encode_batch(chunk, side="target"):
            seen.update(ids)
    if not seen:
        raise DataFormatError(
            f"{target_text}: no tokens to build a vocabulary map from; give the target side "
            "of the training data"
        )
    tokens = vocabulary(tokenizer)
    return "\t" + " ".join(tokens[i] for i in sorted(seen)) + "\n"
