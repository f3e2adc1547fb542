"""A training run around the model: the LightningModule (`module`), its `loss`, `lr_schedule`
and `bleu` metric; `checkpoint_io`, how Lightning writes checkpoints; `precision`, the
`batch_size` per update, the `hot_path` helpers that keep a step free of host syncs, `loggers`,
the `trainer_settings` a run is refused for and the `config_checks` across config groups (both
collected by the `run_plan`), the `run_lock` on its folder, what `sweeps` get back; and the
`callbacks`."""
