"""What several experiment scripts share: batches, timing, the peer implementations, the machine.

batches.py   real Multi30k lengths with random ids, cut as training and decoding cut them
timing.py    wall-clock timing with the device's queued work, medians of repeats
peers.py     ours and the reference implementations behind one interface, at the presets' sizes
torch_reference.py  the plain nn.Transformer recipe and its uncached searches, one of the peers
training.py  one training step and its timing, alike for every peer
machine.py   the CPU and its load, for a record's setup line
"""
