"""From text to batches: corpora (bitext, hub, toy behind `corpus.Corpus`), the joint BPE
`tokenizer`, sequence `framing` (BOS, EOS, padding), the encoded `dataset`, length-bucketed
`batching` and the Lightning `datamodule`."""
