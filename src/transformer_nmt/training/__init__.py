"""A training run around the model: the LightningModule (`module`), its `loss`, `lr_schedule`
and `bleu` metric; `checkpoint_io`, how Lightning writes checkpoints; `precision`, the
`batch_size` per update, the `hot_path` helpers that keep a step free of host syncs, `loggers`,
the `config_checks` a run passes first, the `run_lock` on its folder, what `sweeps` get back;
and the `callbacks`."""
