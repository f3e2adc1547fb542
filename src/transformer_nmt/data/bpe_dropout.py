"""BPE-dropout (Provilkov et al., 2020): the training pairs segmented afresh for every epoch.

Each merge is skipped with probability p while a word is encoded, so a word reaches the model
in many segmentations, its usual one most often: a regularizer for small corpora. Not in the
paper, which always uses the one segmentation; off (p = 0) by default.
"""

import logging
import time

from transformer_nmt.data.dataset import ENCODE_CHUNK, SIDES, TokenSequences, TranslationDataset
from transformer_nmt.data.tokenizer import BPETokenizer

log = logging.getLogger(__name__)


class BPEDropout:
    """Draws new segmentations of a training split's pairs, one whole split per call.

    The split comes from the token store in its usual segmentation, which byte-level BPE decodes
    back to the exact text; that text, decoded once, is encoded again with dropout on each call.
    A sampled side longer than `max_len` tokens keeps its usual segmentation, as `data.max_len`
    bounds every sequence the model sees.

    Not reproducible bit for bit: `tokenizers` draws the dropped merges from its own generator,
    which no seed reaches.
    """

    def __init__(
        self, dataset: TranslationDataset, tokenizer: BPETokenizer, p: float, max_len: int
    ):
        """Args:
        dataset: the split in its usual segmentation.
        tokenizer: the run's tokenizer; a copy of it encodes with dropout.
        p: probability of skipping each merge, in [0, 1).
        max_len: most tokens a sampled side may have.
        """
        self.dataset = dataset
        self.tokenizer = tokenizer.with_dropout(p)
        self.max_len = max_len
        self.texts = {side: self._decode(getattr(dataset, side)) for side in SIDES}

    def sample(self) -> TranslationDataset:
        """The split's pairs, in the same order, each side segmented anew."""
        start = time.perf_counter()
        sampled = TranslationDataset(*(self._encode(side) for side in SIDES))
        log.info(
            "BPE-dropout: a new segmentation in %.1f s, %+.1f%% tokens over the usual one",
            time.perf_counter() - start,
            100 * (_tokens(sampled) / _tokens(self.dataset) - 1),
        )
        return sampled

    def _decode(self, sequences: TokenSequences) -> list[str]:
        texts = []
        for start in range(0, len(sequences), ENCODE_CHUNK):
            chunk = range(start, min(start + ENCODE_CHUNK, len(sequences)))
            texts += self.tokenizer.decode_batch([sequences[i].tolist() for i in chunk])
        return texts

    def _encode(self, side: str) -> TokenSequences:
        usual, texts = getattr(self.dataset, side), self.texts[side]
        chunks = []
        for start in range(0, len(texts), ENCODE_CHUNK):
            sampled = self.tokenizer.encode_batch(texts[start : start + ENCODE_CHUNK])
            chunks.append(
                TokenSequences.from_lists(
                    [
                        ids if len(ids) <= self.max_len else usual[start + i].tolist()
                        for i, ids in enumerate(sampled)
                    ]
                )
            )
        return TokenSequences.concat(chunks)


def _tokens(dataset: TranslationDataset) -> int:
    return sum(int(getattr(dataset, side).lengths().sum()) for side in SIDES)
