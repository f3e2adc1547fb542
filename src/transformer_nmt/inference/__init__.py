"""From a checkpoint to text: the `Translator` API, scoring, word alignment and sharded runs."""
