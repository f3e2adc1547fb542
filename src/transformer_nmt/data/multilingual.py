"""Many directions, one model: their pairs tagged, mixed in length buckets, drawn by temperature.

Every direction of a line-parallel corpus (`data.languages`: one file a language and split) is
its own token store, encoded once as any one-direction split is; a split's dataset joins them,
each pair framed with its target language's tag (`languages.Languages`). Batches are the same
length buckets as ever, over the joined pairs, so a batch mixes directions.

Training draws directions with temperature T over their sizes, as fairseq's and NLLB's trainers
do: direction i of n_i pairs gets the share p_i = n_i^(1/T) / sum_j n_j^(1/T) of an epoch of
sum_j n_j pairs. T=1 is every pair once (proportional); a larger T is flatter, upsampling the
small directions and downsampling the large. Each epoch draws its pairs anew from (seed, epoch),
so a resumed run draws the same ones.
"""

import itertools
import logging
from collections.abc import Iterator, Mapping, Sequence

import numpy as np
from torch.utils.data import DataLoader, Dataset

from transformer_nmt.data.corpus import Corpus, DataFormatError
from transformer_nmt.data.datamodule import TranslationDataModule
from transformer_nmt.data.dataset import TranslationDataset
from transformer_nmt.data.framing import Frame, source_ids
from transformer_nmt.data.languages import Direction, Languages, direction_name, tag_ids
from transformer_nmt.data.store import open_or_build, store_path
from transformer_nmt.data.tokenizer import SubwordTokenizer, load_or_train

log = logging.getLogger(__name__)

SAMPLING_KEY = "direction_sampling"  # in the loggers' hyperparameters and the checkpoint


class MultilingualDataset(Dataset):
    """The pairs of several directions end to end, each framed by its direction's `Frame`."""

    def __init__(self, parts: Sequence[TranslationDataset], frames: Sequence[Frame]):
        self.parts, self.frames = list(parts), list(frames)
        self.sizes = np.array([len(part) for part in parts], dtype=np.int64)
        self.starts = np.concatenate([[0], np.cumsum(self.sizes)])
        self.src_lengths = np.concatenate(
            [p.src_lengths + len(f.source_prefix) for p, f in zip(parts, frames, strict=True)]
        )
        self.tgt_lengths = np.concatenate([p.tgt_lengths for p in parts])

    def directions(self) -> np.ndarray:
        """The direction index of every pair."""
        return np.repeat(np.arange(len(self.parts)), self.sizes)

    def __len__(self) -> int:
        return int(self.starts[-1])

    def __getitem__(self, index: int) -> dict:
        direction = int(np.searchsorted(self.starts, index, side="right")) - 1
        part, frame = self.parts[direction], self.frames[direction]
        local = index - int(self.starts[direction])
        example = part[local]
        example["src"] = source_ids(part.src[local].tolist(), prefix=frame.source_prefix)
        example.update(bos_id=frame.bos_id, direction=direction)
        return example


class EpochSample(Dataset):
    """The pairs one epoch draws from a `MultilingualDataset`, by index (repeats allowed)."""

    def __init__(self, dataset: MultilingualDataset, indices: np.ndarray):
        self.dataset, self.indices = dataset, indices
        self.src_lengths = dataset.src_lengths[indices]
        self.tgt_lengths = dataset.tgt_lengths[indices]

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, index: int) -> dict:
        return self.dataset[int(self.indices[index])]


def sampling_probabilities(sizes: Sequence[int], temperature: float) -> np.ndarray:
    """p_i proportional to n_i^(1/T): each direction's share of an epoch."""
    weights = np.asarray(sizes, dtype=np.float64) ** (1.0 / temperature)
    return weights / weights.sum()


def epoch_counts(sizes: Sequence[int], temperature: float) -> np.ndarray:
    """Pairs each direction gives an epoch of sum(sizes) pairs: p_i of it, rounded so that the
    counts add up (largest remainders first)."""
    total = int(np.sum(sizes))
    exact = sampling_probabilities(sizes, temperature) * total
    counts = np.floor(exact).astype(np.int64)
    short = total - int(counts.sum())
    counts[np.argsort(counts - exact, kind="stable")[:short]] += 1
    return counts


def epoch_indices(sizes: Sequence[int], temperature: float, seed: int, epoch: int) -> np.ndarray:
    """One epoch's draw over directions laid end to end: each direction's pairs as often as
    its count holds whole, the remainder a draw without repeats, from (seed, epoch)."""
    rng = np.random.default_rng([seed, epoch])
    starts = np.concatenate([[0], np.cumsum(sizes)])
    drawn = [np.zeros(0, np.int64)]
    for start, size, count in zip(starts, sizes, epoch_counts(sizes, temperature), strict=False):
        whole, rest = divmod(int(count), int(size))
        drawn += [start + np.tile(np.arange(size), whole), start + rng.choice(size, rest, False)]
    return np.concatenate(drawn).astype(np.int64)


def pairs_kept(caps: Mapping[str, int], split: str, direction: Direction) -> int | None:
    """How many of a direction's first pairs `split` reads (`data.max_train_pairs` cuts the train
    split only); None: all."""
    return caps.get(direction_name(direction)) if split == "train" else None


def direction_fingerprint(
    corpus: Corpus, split: str, direction: Direction, caps: Mapping[str, int]
) -> str:
    """A direction's pairs of `split` as read: cut to its first N where `pairs_kept` says."""
    fingerprint = corpus.fingerprint(split, *direction)
    if cap := pairs_kept(caps, split, direction):
        return f"{fingerprint}, first {cap} pairs"
    return fingerprint


def train_fingerprint(
    corpus: Corpus, directions: Sequence[Direction], caps: Mapping[str, int] | None = None
) -> str:
    """The train split of these directions, identified: what a checkpoint records of it."""
    parts = [direction_fingerprint(corpus, "train", d, caps or {}) for d in directions]
    return f"Multilingual({'; '.join(parts)})"


class MultilingualDataModule(TranslationDataModule):
    """Serves every direction of a line-parallel corpus, tagged, as one stream of batches.

    Args:
        corpus: the parallel text; `stream(split, a, b)` must give line-aligned pairs for any
            two of `languages` (e.g. a TextCorpus of {split}.{lang} files).
        languages: the languages, e.g. [de, en, fr, cs]; each gets a tag token in the BPE.
        directions: "src-tgt" names to train; None: every ordered pair of `languages`.
        exclude: directions left out (zero-shot), e.g. [fr-cs, cs-fr].
        tag_side: "target" (the decoder starts with the tag), "source" (the source does) or
            "both" (the source starts with its own language's tag as well, as M2M-100).
        temperature: T of the directions' sampling; 1: every pair once an epoch.
        max_train_pairs: direction -> N: train on its first N pairs only (a low-resource
            direction made from a large one, e.g. {cs-en: 3000, en-cs: 3000}).
        src_lang, tgt_lang: one direction's settings: null here, `directions` names them.
        **settings: as `TranslationDataModule` (vocab_size, max_tokens, max_len, seed, ...).
    """

    def __init__(
        self,
        corpus: Corpus,
        languages: Sequence[str],
        directions: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
        tag_side: str = "target",
        temperature: float = 1.0,
        max_train_pairs: Mapping[str, int] | None = None,
        src_lang: str | None = None,
        tgt_lang: str | None = None,
        **settings,
    ):
        if src_lang is not None or tgt_lang is not None:
            raise ValueError(
                "data.src_lang and data.tgt_lang name one direction; a multilingual config "
                "names data.languages and data.directions: set them to null"
            )
        if not temperature > 0:
            raise ValueError(f"data.temperature={temperature} must be > 0 (1: proportional)")
        if settings.get("bpe_dropout"):
            raise ValueError("data.bpe_dropout is for one direction: set it to 0")
        self.languages = Languages.from_config(languages, directions, exclude, tag_side)
        # Plain lists, not Hydra's ListConfig: hyperparameters go into weights_only checkpoints.
        languages, exclude = list(self.languages.languages), [str(d) for d in exclude]
        directions = None if directions is None else [str(d) for d in directions]
        max_train_pairs = self._checked_caps(max_train_pairs or {})
        super().__init__(corpus, src_lang, tgt_lang, **settings)
        self.temperature = temperature
        self.max_train_pairs = max_train_pairs
        self.probabilities: dict[str, float] = {}

    def load_tokenizer(self) -> SubwordTokenizer:
        """One joint BPE over every language's train text, each read once, with a tag a language."""
        if self.tokenizer is None:
            hp = self.hparams
            read = [direction for direction, _ in self._language_sides().values()]
            self.tokenizer = load_or_train(
                hp.cache_dir,
                self._train_sentences,
                vocab_size=hp.vocab_size,
                min_frequency=hp.min_frequency,
                fingerprint=self._fingerprint(read),
                language_tokens=self.languages.tags,
            )
        return self.tokenizer

    def _checked_caps(self, caps: Mapping[str, int]) -> dict[str, int]:
        names = self.languages.names
        if unknown := [name for name in caps if name not in names]:
            raise ValueError(
                f"data.max_train_pairs names {unknown}, which are not trained; the directions "
                f"are {names}"
            )
        if bad := {name: n for name, n in caps.items() if not (isinstance(n, int) and n > 0)}:
            raise ValueError(f"data.max_train_pairs={bad}: each must be a positive whole number")
        return {str(name): int(n) for name, n in caps.items()}

    def _language_sides(self) -> dict[str, tuple[Direction, int]]:
        """Per language, a direction holding it and its side there: where its text is read."""
        sides = {}
        # A capped direction holds fewer of a language's lines: read it from an uncapped one.
        capped = self.max_train_pairs
        for direction in sorted(
            self.languages.directions, key=lambda d: direction_name(d) in capped
        ):
            for side, lang in enumerate(direction):
                sides.setdefault(lang, (direction, side))
        if unused := [lang for lang in self.languages.languages if lang not in sides]:
            raise ValueError(
                f"data.languages lists {unused}, which no direction of data.directions holds"
            )
        return sides

    def _train_sentences(self) -> Iterator[str]:
        for direction, side in self._language_sides().values():
            yield from (pair[side] for pair in self._pairs("train", direction))

    def _pairs(self, split: str, direction: Direction) -> Iterator[tuple[str, str]]:
        """A direction's pairs, refusing text that holds a language tag."""
        tags, pairs = self.languages.tags, self.corpus.stream(split, *direction)
        if cap := pairs_kept(self.max_train_pairs, split, direction):
            pairs = itertools.islice(pairs, cap)
        for number, pair in enumerate(pairs, start=1):
            for lang, text in zip(direction, pair, strict=True):
                if "<2" in text and (found := [tag for tag in tags if tag in text]):
                    raise DataFormatError(
                        f"{self._where(split, lang)}, pair {number}: the text holds the language "
                        f"tag {found[0]}, which would name a language; remove it from the text"
                    )
            yield pair

    def _where(self, split: str, lang: str) -> str:
        """The file holding `lang`'s `split` where the corpus has files, else split and language."""
        file = getattr(self.corpus, "file", None)
        return str(file(split, lang)) if file else f"the {split} split's {lang} side"

    def _open(self, split: str, tokenizer: SubwordTokenizer) -> MultilingualDataset:
        """Every direction's token store of `split`, joined and framed with its tag."""
        hp, ids = self.hparams, tag_ids(tokenizer.tokens(), self.languages)
        parts, frames, self.dropped[split] = [], [], 0
        for direction in self.languages.directions:
            name = direction_name(direction)
            fingerprint = direction_fingerprint(self.corpus, split, direction, self.max_train_pairs)
            part, dropped = open_or_build(
                store_path(hp.cache_dir, split, fingerprint, tokenizer, hp.max_len),
                lambda direction=direction: self._pairs(split, direction),
                tokenizer,
                hp.max_len,
                keep_text=split != "train",
            )
            if not len(part):
                raise DataFormatError(
                    f"{split} {name}: all {dropped} pairs have a side longer than "
                    f"data.max_len={hp.max_len} BPE tokens; raise data.max_len"
                )
            log.info("%s %s: %d pairs kept, %d too long", split, name, len(part), dropped)
            self.dropped[split] += dropped
            parts.append(part)
            frames.append(self.languages.frame(direction[1], ids, direction[0]))
        dataset = MultilingualDataset(parts, frames)
        if split == "train":
            self._plan_sampling(dataset.sizes)
        return dataset

    def setup(self, stage: str | None = None) -> None:
        """As one direction's; the loggers also record each direction's sampling probability."""
        super().setup(stage)
        if self.probabilities and self.trainer is not None:
            for logger in self.trainer.loggers:
                logger.log_hyperparams({SAMPLING_KEY: self.sampling()})

    def sampling(self) -> dict:
        """The temperature and each direction's probability: what the run records of its draw."""
        return {"temperature": self.temperature, "probabilities": dict(self.probabilities)}

    def _plan_sampling(self, sizes: np.ndarray) -> None:
        probabilities = sampling_probabilities(sizes, self.temperature)
        self.probabilities = {
            name: float(p) for name, p in zip(self.languages.names, probabilities, strict=True)
        }
        log.info(
            "Directions drawn with temperature %g: %s",
            self.temperature,
            ", ".join(f"{name} {p:.3f}" for name, p in self.probabilities.items()),
        )

    def _fingerprint(self, directions: Sequence[Direction]) -> str:
        return train_fingerprint(self.corpus, directions, self.max_train_pairs)

    def state_dict(self) -> dict:
        """The training pairs' fingerprint, the languages and each direction's probability."""
        return {
            "train_fingerprint": self._fingerprint(self.languages.directions),
            "languages": self.languages.to_dict(),
            SAMPLING_KEY: self.sampling(),
        }

    def train_dataloader(self) -> DataLoader:
        """This epoch's draw of the training pairs (all of them, once, at T=1)."""
        dataset = self.datasets["train"]
        if self.temperature != 1:
            trainer = self.trainer
            if trainer is not None and not trainer.reload_dataloaders_every_n_epochs:
                # Otherwise the whole run would silently train on epoch 0's draw.
                raise ValueError(
                    f"data.temperature={self.temperature} draws each epoch's pairs anew when the "
                    "training loader is built, and this Trainer builds it once: pass "
                    "reload_dataloaders_every_n_epochs=1 to the Trainer, as `train` does"
                )
            epoch = trainer.current_epoch if trainer else 0
            indices = epoch_indices(dataset.sizes, self.temperature, self.hparams.seed, epoch)
            dataset = EpochSample(dataset, indices)
        return self._loader(dataset, shuffle=True)
