"""transformer-nmt: the Transformer of "Attention Is All You Need" for machine translation.

model/     the network and search, plain PyTorch
data/      corpora, tokenizer, framing, batching, the DataModule
training/  the LightningModule and everything around a training run
cli/       the nmt-* commands
train.py   `train(cfg)`, what `python train.py` runs
"""
