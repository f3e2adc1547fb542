"""Small line-parallel files in three languages, as Multi30k's are in four, for the tests."""

import random
from pathlib import Path

WORDS = {
    "en": "one two three four five six seven eight nine ten".split(),
    "de": "eins zwei drei vier fünf sechs sieben acht neun zehn".split(),
    "fr": "un deux trois quatre cinq six sept huit neuf dix".split(),
}


def write_parallel(
    folder: Path,
    sizes: dict[str, int] | None = None,
    languages=("en", "de", "fr"),
    seed: int = 0,
    blank: dict[str, int] | None = None,
) -> Path:
    """{split}.{lang} files in `folder`, line N of each the same numbers in its language.

    Args:
        sizes: lines per split; default 240 train and 30 val.
        blank: language -> how many of its first train lines are empty, which leaves its
            directions that many pairs fewer (reading drops a pair with an empty side).
    """
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    for split, count in (sizes or {"train": 240, "val": 30}).items():
        lines = [[rng.randrange(10) for _ in range(rng.randint(2, 7))] for _ in range(count)]
        for lang in languages:
            empty = (blank or {}).get(lang, 0) if split == "train" else 0
            text = "\n" * empty
            text += "".join(" ".join(WORDS[lang][n] for n in line) + "\n" for line in lines[empty:])
            (folder / f"{split}.{lang}").write_text(text, encoding="utf-8")
    return folder
