"""A training run around the model: what Lightning and Hydra run, decide and record."""
