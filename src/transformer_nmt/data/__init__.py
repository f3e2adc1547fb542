"""From text to batches: corpora (bitext, hub_corpus, toy behind `corpus.Corpus`), the joint BPE
`tokenizer`, sequence `framing` (BOS, EOS, padding), the encoded `dataset` and its on-disk
`store`, `progress` (bars, or log lines off a terminal), length-bucketed `batching` and the
Lightning `datamodule`."""
