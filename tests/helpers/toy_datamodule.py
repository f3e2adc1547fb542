"""A small toy-task `TranslationDataModule` for the data tests."""

from transformer_nmt.data.datamodule import TranslationDataModule
from transformer_nmt.data.toy import ToyCorpus


def make_datamodule(tmp_path, **overrides) -> TranslationDataModule:
    """300 training pairs and 40 for val, 256-token batches, the cache under `tmp_path`."""
    settings = {
        "corpus": ToyCorpus(num_train=300, num_val=40, num_test=30),
        "src_lang": "en",
        "tgt_lang": "de",
        "vocab_size": 1000,
        "max_tokens": 256,
        "max_len": 32,
        "cache_dir": str(tmp_path / "cache"),
    }
    return TranslationDataModule(**{**settings, **overrides})
