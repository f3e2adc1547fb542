"""The LightningDataModule: tokenizer, encoding, length filtering and token-budget loaders."""

import functools
import itertools
import logging
from collections.abc import Iterator

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader

from transformer_nmt.data.batching import TokenBatchSampler, collate
from transformer_nmt.data.bpe_dropout import BPEDropout
from transformer_nmt.data.corpus import Corpus, DataFormatError
from transformer_nmt.data.dataset import TranslationDataset
from transformer_nmt.data.framing import ADDED_TOKENS
from transformer_nmt.data.languages import Languages
from transformer_nmt.data.padding import pad_multiple, rounding_budget
from transformer_nmt.data.store import open_or_build, store_path
from transformer_nmt.data.tokenizer import PAD_ID, SubwordTokenizer, load_or_train

log = logging.getLogger(__name__)

# No test or predict stage: the module has no test_step, and `nmt-evaluate --data <config>
# --split test` scores a test split with beam search, reading it with the same corpus classes.
STAGE_SPLITS = {"fit": ("train", "val"), "validate": ("val",), None: ("train", "val")}


class TranslationDataModule(L.LightningDataModule):
    """Serves one corpus in one direction as batches of padded token ids."""

    languages: Languages | None = None  # one direction; a multilingual module's (multilingual.py)

    def __init__(
        self,
        corpus: Corpus,
        src_lang: str,
        tgt_lang: str,
        vocab_size: int = 8000,
        min_frequency: int = 2,
        max_tokens: int | str = 4096,
        tokens_per_update: int | None = None,
        max_len: int = 256,
        bpe_dropout: float = 0.0,
        pad_to_multiple_of: int | str = "auto",
        num_workers: int = 0,
        cache_dir: str = "cache",
        seed: int = 0,
        tokenizer: SubwordTokenizer | None = None,
    ):
        """Configure; nothing is read or trained until `prepare_data`, `load_tokenizer` or `setup`.

        Args:
            corpus: the source of sentence pairs (TextCorpus, HubCorpus, ToyCorpus, or several
                mixed by factor or weight: CorpusMixture).
            src_lang: language translated from, e.g. "en".
            tgt_lang: language translated to, e.g. "de".
            vocab_size: upper bound on the joint BPE vocabulary.
            min_frequency: a pair seen fewer times is never merged into a BPE token.
            max_tokens: tokens per side of a batch, padding to the longest pair included and
                `pad_to_multiple_of`'s rounding not, so batches hold the same pairs in any
                precision. "auto": the largest that fits the device's memory, found when
                training starts (`callbacks.auto_max_tokens.AutoMaxTokens`).
            tokens_per_update: tokens per side of an optimizer step, recorded with the data
                settings and not read here: training passes its run plan's, which derives the
                accumulation (`training/plan/batch_size.py`); None where not planned.
            max_len: pairs with more BPE tokens on either side are dropped (specials not counted).
            bpe_dropout: probability of skipping each BPE merge when the training pairs are
                segmented anew for an epoch (`BPEDropout`; training then reloads its loader
                every epoch); 0, the paper, keeps the one segmentation.
            pad_to_multiple_of: batches are padded to lengths that are multiples of this, which
                16-bit kernels prefer; 1 saves the extra padding where nothing gains from it.
                "auto": 8 when the trainer's precision is 16-bit, else 1 (`pad_multiple`), and
                finer for a batch of short pairs, so that the rounding adds at most an eighth
                of `max_tokens` (`rounding_multiple`).
            num_workers: DataLoader worker processes.
            cache_dir: folder of cached tokenizers and token stores.
            seed: seeds batch composition and order.
            tokenizer: the vocabulary to encode with instead of training a BPE (fine-tuning's
                `init.from`: the parent's, perhaps extended by this config's BPE).
        """
        super().__init__()
        if not 0 <= bpe_dropout < 1:
            raise ValueError(f"data.bpe_dropout={bpe_dropout} must lie in [0, 1)")
        if max_tokens != "auto" and not isinstance(max_tokens, int):
            raise ValueError(f"data.max_tokens={max_tokens!r} must be a number of tokens or auto")
        longest = max_len + ADDED_TOKENS
        if max_tokens != "auto" and max_tokens < longest:
            raise ValueError(
                f"max_tokens={max_tokens} cannot hold one pair of max_len={max_len} tokens "
                f"plus EOS; set max_tokens >= {longest} or lower max_len"
            )
        self.save_hyperparameters(ignore=["corpus", "tokenizer"])
        # None until AutoMaxTokens resolves "auto" on the device.
        self.max_tokens: int | None = None if max_tokens == "auto" else max_tokens
        self.corpus = corpus
        self.tokenizer = tokenizer
        self.datasets: dict[str, TranslationDataset] = {}
        self.dropped: dict[str, int] = {}
        self.resegmenter: BPEDropout | None = None

    def prepare_data(self) -> None:
        """Train the tokenizer and encode the splits `fit` needs into token stores, once a machine.

        Lightning calls this on each machine's local rank 0 only, before `setup` on every rank.
        """
        tokenizer = self.load_tokenizer()
        for split in STAGE_SPLITS["fit"]:
            self._open(split, tokenizer)

    def load_tokenizer(self) -> SubwordTokenizer:
        """The tokenizer, trained on both sides of the train split on the first call ever.

        `train` calls this on every rank before the Trainer exists, so before any barrier; under
        torchrun or SLURM the ranks start together, and `load_or_train`'s file lock lets one of
        them train while the others wait for its file.
        """
        if self.tokenizer is None:
            hp = self.hparams
            self.tokenizer = load_or_train(
                hp.cache_dir,
                self._train_sentences,
                vocab_size=hp.vocab_size,
                min_frequency=hp.min_frequency,
                fingerprint=self.corpus.fingerprint("train", hp.src_lang, hp.tgt_lang),
            )
        return self.tokenizer

    def setup(self, stage: str | None = None) -> None:
        """Map the token stores of the splits `stage` needs, building any that is missing."""
        if stage not in STAGE_SPLITS:
            raise ValueError(
                f"no {stage!r} stage: score a test split with "
                "nmt-evaluate CKPT --data <config> --split test"
            )
        tokenizer = self.load_tokenizer()
        for split in STAGE_SPLITS[stage]:
            if split not in self.datasets:
                self.datasets[split] = self._open(split, tokenizer)

    def state_dict(self) -> dict[str, str]:
        """What checkpoints record of the data: the training split's fingerprint, by which
        fine-tuning's `init.keep=[data]` knows the parent trained the same pairs."""
        hp = self.hparams
        return {"train_fingerprint": self.corpus.fingerprint("train", hp.src_lang, hp.tgt_lang)}

    def train_dataloader(self) -> DataLoader:
        dataset = self.datasets["train"]
        if self.hparams.bpe_dropout:
            dataset = self._resegmented(dataset)
        return self._loader(dataset, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.datasets["val"], shuffle=False)

    def _resegmented(self, dataset: TranslationDataset) -> TranslationDataset:
        """This epoch's segmentation of the training pairs: drawn on rank 0, sent to every rank.

        Every rank must batch the same lengths, or their batch counts could differ and hang DDP.
        """
        trainer = self.trainer
        if trainer is not None and not trainer.reload_dataloaders_every_n_epochs:
            # Otherwise the whole run would silently train on one draw.
            raise ValueError(
                f"data.bpe_dropout={self.hparams.bpe_dropout} draws a new segmentation each "
                "time the training loader is built, and this Trainer builds it once: pass "
                "reload_dataloaders_every_n_epochs=1 to the Trainer, as `train` does"
            )
        sampled = None
        if trainer is None or trainer.is_global_zero:
            if self.resegmenter is None:
                hp = self.hparams
                self.resegmenter = BPEDropout(dataset, self.tokenizer, hp.bpe_dropout, hp.max_len)
            sampled = self.resegmenter.sample()
        return trainer.strategy.broadcast(sampled) if trainer else sampled

    def _train_sentences(self) -> Iterator[str]:
        """Both sides of the train split as they are read, for a joint vocabulary."""
        pairs = self.corpus.stream("train", self.hparams.src_lang, self.hparams.tgt_lang)
        return itertools.chain.from_iterable(pairs)

    def _open(self, split: str, tokenizer: SubwordTokenizer) -> TranslationDataset:
        """One split's token store, memory-mapped; read and encoded only the first time."""
        hp = self.hparams
        fingerprint = self.corpus.fingerprint(split, hp.src_lang, hp.tgt_lang)
        dataset, dropped = open_or_build(
            store_path(hp.cache_dir, split, fingerprint, tokenizer, hp.max_len),
            lambda: self.corpus.stream(split, hp.src_lang, hp.tgt_lang),
            tokenizer,
            hp.max_len,
            # Training never looks at raw text; val and test need it as BLEU references.
            keep_text=split != "train",
        )
        self.dropped[split] = dropped
        if not len(dataset):
            raise DataFormatError(
                f"{split}: all {dropped} pairs have a side longer than data.max_len={hp.max_len} "
                "BPE tokens; raise data.max_len"
            )
        log.info(
            "%s: %d pairs kept, %d dropped for exceeding data.max_len=%d tokens",
            split,
            len(dataset),
            dropped,
            hp.max_len,
        )
        return dataset

    def train_pair_lengths(self) -> tuple[int, int]:
        """Tokens a side, as the model reads them, of the shortest and the longest training
        pair, each pair's longer side counted, as batching counts it (after `setup`)."""
        train = self.datasets["train"]
        longer = np.maximum(train.src_lengths, train.tgt_lengths)
        return int(longer.min()), int(longer.max())

    def _loader(self, dataset: TranslationDataset, shuffle: bool) -> DataLoader:
        """A loader of token-budget batches over one split."""
        if self.max_tokens is None:
            raise ValueError(
                "data.max_tokens=auto is resolved on the device when training starts, by the "
                "auto_max_tokens callback (conf/callbacks/default.yaml): keep that callback, "
                "or give data.max_tokens a number"
            )
        trainer = self.trainer  # None outside a Trainer: one process holds every batch
        multiple = pad_multiple(self.hparams.pad_to_multiple_of, trainer and trainer.precision)
        sampler = TokenBatchSampler(
            dataset.src_lengths,
            dataset.tgt_lengths,
            max_tokens=self.max_tokens,
            shuffle=shuffle,
            seed=self.hparams.seed,
            rank=trainer.global_rank if trainer else 0,
            world_size=trainer.world_size if trainer else 1,
        )
        if trainer:
            # A resumed run must continue with the restored epoch's order, not replay epoch 0's.
            sampler.set_epoch(trainer.current_epoch)
            if shuffle:
                _skip_trained_batches(sampler, trainer)
        workers = self.hparams.num_workers
        return DataLoader(
            dataset,
            batch_sampler=sampler,
            collate_fn=functools.partial(
                collate,
                pad_id=PAD_ID,
                pad_to_multiple_of=multiple,
                max_tokens=rounding_budget(self.hparams.pad_to_multiple_of, self.max_tokens),
            ),
            num_workers=workers,
            # Its workers' seeds, drawn for each epoch, come from here, not from the global
            # generator, which then serves training steps only: a resumed run's dropout matches.
            generator=torch.Generator().manual_seed(self.hparams.seed),
            # Restarting workers every epoch would ship the dataset to each of them again.
            persistent_workers=workers > 0,
        )


def _skip_trained_batches(sampler: TokenBatchSampler, trainer: L.Trainer) -> None:
    """After a mid-epoch resume, start the epoch's batches where the checkpoint left them.

    The count comes from the trainer's restored progress: batches whose optimizer step ran, the
    same whether the checkpoint was written in `on_train_batch_end` or after it. The sampler's own
    count runs ahead of it by whatever the DataLoader had prefetched.
    """
    epoch_loop = trainer.fit_loop.epoch_loop
    # Only while resuming: a loader reloaded for a later epoch would see the last one's count.
    if not epoch_loop.restarting:
        return
    trained = epoch_loop.batch_progress.current.processed
    if 0 < trained < len(sampler):  # at an epoch's end Lightning starts the next one itself
        sampler.load_state_dict({**sampler.state_dict(), "consumed": trained})
