"""`train(cfg)`: what `python train.py` runs, callable in-process from tests and notebooks."""

import logging
import signal

import lightning as L
from hydra.utils import instantiate
from lightning.pytorch.loggers import Logger
from lightning.pytorch.utilities.exceptions import SIGTERMException
from omegaconf import DictConfig, OmegaConf

from transformer_nmt.data.tokenizer import PAD_ID
from transformer_nmt.training.config_checks import check_config, check_resume
from transformer_nmt.training.loggers import finish_wandb_runs, start_wandb_runs
from transformer_nmt.training.precision import resolve_precision
from transformer_nmt.training.sweeps import (
    group_wandb_runs_by_sweep,
    raise_if_diverged,
    refuse_multirun_with_ddp,
)

log = logging.getLogger(__name__)

# The shell's status for a process ended by SIGTERM: schedulers and scripts see an unfinished run.
SIGTERM_EXIT = 128 + signal.SIGTERM


def train(cfg: DictConfig) -> dict[str, float]:
    """Builds data, model, module, loggers and trainer from the config, then fits.

    Returns the final metrics (e.g. `val/bleu`) as floats, and as `best/<name>` the best value
    of each metric a checkpoint callback monitors. Raises `FloatingPointError` if the training
    loss became non-finite, so that a sweep records the trial as failed, and `SystemExit(143)`
    after a SIGTERM, once the `last_checkpoint` callback has saved.
    """
    refuse_multirun_with_ddp(cfg)
    check_config(cfg)
    group_wandb_runs_by_sweep(cfg)
    L.seed_everything(cfg.seed, workers=True)
    datamodule = instantiate(cfg.data)
    tokenizer = datamodule.load_tokenizer()
    check_resume(cfg.get("ckpt_path"), tokenizer)
    model = instantiate(cfg.model, vocab_size=tokenizer.vocab_size, pad_id=PAD_ID)
    # Plain lists and dicts in hyperparameters keep checkpoints loadable with weights_only=True.
    module = instantiate(cfg.module, model=model, tokenizer=tokenizer, _convert_="all")
    log.info("Model: %s parameters", f"{sum(p.numel() for p in model.parameters()):,}")

    loggers: list[Logger] = [instantiate(c) for c in (cfg.logger or {}).values()]
    callbacks = [instantiate(c) for c in (cfg.callbacks or {}).values()]
    precision = resolve_precision(cfg.trainer.precision, cfg.trainer.accelerator)
    log.info("Precision: %s", precision)
    trainer: L.Trainer = instantiate(
        cfg.trainer, logger=loggers or False, callbacks=callbacks, precision=precision
    )
    for logger in loggers:
        logger.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))
    start_wandb_runs(loggers)

    try:
        trainer.fit(
            module, datamodule=datamodule, ckpt_path=cfg.get("ckpt_path"), weights_only=True
        )
        metrics = {name: float(value) for name, value in trainer.callback_metrics.items()}
        raise_if_diverged(metrics)
    except SIGTERMException:
        # The `last_checkpoint` callback has saved and said where: no traceback to add.
        for logger in loggers:
            logger.save()  # Lightning does not flush loggers when fit ends by an exception
        finish_wandb_runs(loggers, trainer.checkpoint_callback, exit_code=SIGTERM_EXIT)
        raise SystemExit(SIGTERM_EXIT) from None
    except BaseException as error:
        log.error("Training failed: %r", error)  # into this run's log, also inside a sweep
        finish_wandb_runs(loggers, trainer.checkpoint_callback, exit_code=1)
        raise
    finish_wandb_runs(loggers, trainer.checkpoint_callback)
    for checkpoint in trainer.checkpoint_callbacks:
        if checkpoint.monitor and checkpoint.best_model_score is not None:
            metrics[f"best/{checkpoint.monitor}"] = float(checkpoint.best_model_score)
    return metrics
