"""The run's config, as training uses it, to the loggers and the run folder once fit has set up."""

import lightning as L
from omegaconf import DictConfig, OmegaConf

from transformer_nmt.training.batch_size import UpdatePlan, record_plan
from transformer_nmt.training.run_config import write_run_config


class LoggedConfig(L.Callback):
    """Logs `cfg` as fit starts, when the batch budget and accumulation are final.

    `data.max_tokens=auto` is resolved in `AutoMaxTokens.setup`, after the loggers exist: the
    config logged before would say `auto` and one batch per update. Here `data.max_tokens`,
    `trainer.accumulate_grad_batches` and `tokens_per_update_used` are read back from the
    trainer, given to every logger (W&B, CSV), and written into the run folder's
    `.hydra/config.yaml`, which the model card reads.
    """

    def __init__(self, cfg: DictConfig) -> None:
        self.cfg = cfg

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        max_tokens = getattr(trainer.datamodule, "max_tokens", None)
        if isinstance(max_tokens, int):
            accumulate = trainer.accumulate_grad_batches
            used = accumulate * max_tokens * trainer.world_size
            record_plan(self.cfg, UpdatePlan(accumulate, max_tokens, used))
        cfg = self.cfg.copy()
        OmegaConf.set_struct(cfg, False)
        cfg.pop("hydra", None)  # tests compose with the Hydra node; a run's task config has none
        for logger in trainer.loggers:
            logger.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))
        if trainer.is_global_zero:
            write_run_config(cfg)
