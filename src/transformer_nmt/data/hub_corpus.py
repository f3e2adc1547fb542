"""Parallel text from a HuggingFace Hub dataset (or a local folder of the same shape)."""

from collections.abc import Iterator, Mapping

import datasets

from transformer_nmt.data.corpus import (
    DataFormatError,
    DataNotFoundError,
    clean_pairs,
    source_split,
)

DEFAULT_SPLITS = {"train": "train", "val": "validation", "test": "test"}
# Rows converted to Python strings at a time.
READ_BATCH = 10_000


class HubCorpus:
    """A dataset read with `datasets.load_dataset`, in either shape translation data takes.

    `wmt/wmt14` style: one `translation` column holding `{lang: text}`.
    `bentrevett/multi30k` style: one top-level column per language.
    """

    def __init__(
        self,
        name: str,
        config: str | None = None,
        splits: Mapping[str, str] = DEFAULT_SPLITS,
        cache_dir: str | None = None,
    ):
        self.name = name
        self.config = config
        self.splits = dict(splits)
        self.cache_dir = cache_dir

    def stream(self, split: str, src_lang: str, tgt_lang: str) -> Iterator[tuple[str, str]]:
        """Yield the cleaned (source, target) pairs of `split`, a record batch at a time."""
        hub_split = source_split(self.splits, split)
        try:
            table = datasets.load_dataset(
                self.name, self.config, split=hub_split, cache_dir=self.cache_dir
            )
        except ConnectionError as e:
            raise DataNotFoundError(
                f"{e}. Without network, point data.corpus.name at a local copy of the dataset "
                "or use local text files (data=multi30k data.corpus.path=...)"
            ) from e
        except ValueError as e:
            if "Unknown split" not in str(e):
                raise
            raise DataNotFoundError(
                f"{self._where(hub_split)}: {e} Map the {split!r} split to one of them with "
                f"data.corpus.splits={{{split}:<name>}}"
            ) from e
        # Flattening turns `translation` into `translation.de`, `translation.en`, ...:
        # then one lookup fits both shapes.
        table = table.flatten()
        columns = [
            _column(table.column_names, lang, self._where(hub_split))
            for lang in (src_lang, tgt_lang)
        ]
        # Record batches of the memory-mapped Arrow table: no Python list of a whole column.
        table = table.select_columns(columns).with_format("arrow")
        return clean_pairs(_rows(table, columns), self._where(hub_split), total=len(table))

    def read(self, split: str, src_lang: str, tgt_lang: str) -> list[tuple[str, str]]:
        """Return the cleaned (source, target) pairs of `split`."""
        return list(self.stream(split, src_lang, tgt_lang))

    def fingerprint(self, split: str, src_lang: str, tgt_lang: str) -> str:
        """Identify the dataset by name, config and split."""
        return f"HubCorpus({self._where(source_split(self.splits, split))} {src_lang}-{tgt_lang})"

    def _where(self, hub_split: str) -> str:
        """Name the dataset split for messages."""
        return f"{self.name}[{self.config or 'default'}]/{hub_split}"


def _rows(table: datasets.Dataset, columns: list[str]) -> Iterator[tuple[str | None, ...]]:
    """The values of `columns`, row by row, converted to Python a record batch at a time."""
    for batch in table.iter(batch_size=READ_BATCH):
        yield from zip(*(batch[column].to_pylist() for column in columns), strict=True)


def _column(columns: list[str], lang: str, where: str) -> str:
    """Return the column holding `lang` text, flat or inside `translation`."""
    for candidate in (lang, f"translation.{lang}"):
        if candidate in columns:
            return candidate
    raise DataFormatError(
        f"{where} has no text for language {lang!r}: columns found are {columns} "
        f"(expected {lang!r} or 'translation' holding {lang!r}); set data.src_lang and "
        "data.tgt_lang to languages it holds, or pick another data.corpus.config"
    )
