"""The training step: the LightningModule, its loss, learning-rate schedule, validation metrics."""
