"""Test-only: a datamodule whose `setup` fails on global rank 1 alone, inside `fit` before the
first step, as a missing token store on one host's disk would."""

from transformer_nmt.data.datamodule import TranslationDataModule
from transformer_nmt.runtime.run_names import launcher_rank

SETUP_FAULT = "rank 1's token store is unreadable (injected)"


class FailsOnRank1(TranslationDataModule):
    """`TranslationDataModule` whose `setup` raises on global rank 1 (as its launcher set it)."""

    def setup(self, stage: str | None = None) -> None:
        if launcher_rank() == "1":
            raise OSError(SETUP_FAULT)
        super().setup(stage)
