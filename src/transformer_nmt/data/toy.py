"""A generated task learnable in a minute on CPU: English number words to reversed German."""

import random
from collections.abc import Iterator

from transformer_nmt.data.corpus import DataError

ENGLISH = (
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty"
).split()
GERMAN = (
    "eins zwei drei vier fünf sechs sieben acht neun zehn elf zwölf dreizehn vierzehn fünfzehn "
    "sechzehn siebzehn achtzehn neunzehn zwanzig"
).split()


class ToyCorpus:
    """English: a random sequence of number words; German: the same numbers in reverse order.

    "three one twenty" <-> "zwanzig eins drei". Reversal makes the model use positions rather
    than copy word by word. Splits are disjoint; test is drawn first, then val, then train, so
    val and test stay the same when `num_train` changes.
    """

    def __init__(
        self,
        num_train: int = 2000,
        num_val: int = 100,
        num_test: int = 100,
        min_len: int = 3,
        max_len: int = 10,
        seed: int = 0,
    ):
        self.sizes = {"test": num_test, "val": num_val, "train": num_train}
        self.min_len = min_len
        self.max_len = max_len
        self.seed = seed
        capacity = sum(len(ENGLISH) ** n for n in range(min_len, max_len + 1))
        if sum(self.sizes.values()) > capacity:
            raise ValueError(
                f"only {capacity} distinct sequences of {min_len}..{max_len} words exist, "
                f"fewer than the {sum(self.sizes.values())} requested"
            )

    def stream(self, split: str, src_lang: str, tgt_lang: str) -> Iterator[tuple[str, str]]:
        """Yield the (source, target) pairs of `split` (drawn all at once: the task is small)."""
        return iter(self.read(split, src_lang, tgt_lang))

    def read(self, split: str, src_lang: str, tgt_lang: str) -> list[tuple[str, str]]:
        """Return the (source, target) pairs of `split`; ("de", "en") swaps the sides."""
        if {src_lang, tgt_lang} != {"en", "de"}:
            raise DataError(f"the toy corpus is en<->de only, not {src_lang}-{tgt_lang}")
        if split not in self.sizes:
            raise DataError(f"unknown split {split!r}: the toy corpus has {sorted(self.sizes)}")
        pairs = [
            (" ".join(ENGLISH[i] for i in seq), " ".join(GERMAN[i] for i in reversed(seq)))
            for seq in self._draw()[split]
        ]
        return pairs if src_lang == "en" else [(de, en) for en, de in pairs]

    def fingerprint(self, split: str, src_lang: str, tgt_lang: str) -> str:
        """Identify the task by every setting that shapes it."""
        settings = f"{self.sizes}, {self.min_len}, {self.max_len}, {self.seed}"
        return f"ToyCorpus({settings}) {split} {src_lang}-{tgt_lang}"

    def _draw(self) -> dict[str, list[tuple[int, ...]]]:
        """Draw distinct word-index sequences for all splits from one seeded stream."""
        rng = random.Random(self.seed)
        seen: set[tuple[int, ...]] = set()
        drawn: dict[str, list[tuple[int, ...]]] = {}
        for split, size in self.sizes.items():
            drawn[split] = []
            while len(drawn[split]) < size:
                length = rng.randint(self.min_len, self.max_len)
                seq = tuple(rng.randrange(len(ENGLISH)) for _ in range(length))
                if seq not in seen:
                    seen.add(seq)
                    drawn[split].append(seq)
        return drawn
