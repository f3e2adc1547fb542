"""From text to batches, for training and translation alike."""
