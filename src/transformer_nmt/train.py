"""`train(cfg)`: what `python train.py` runs, callable in-process from tests and notebooks."""

import logging

import lightning as L
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from hydra.utils import instantiate
from lightning.pytorch.loggers import Logger
from omegaconf import DictConfig, OmegaConf

from transformer_nmt.data.tokenizer import PAD_ID
from transformer_nmt.loggers import finish_wandb_runs, start_wandb_runs
from transformer_nmt.precision import resolve_precision

log = logging.getLogger(__name__)


def train(cfg: DictConfig) -> dict[str, float]:
    """Builds data, model, module, loggers and trainer from the config, then fits.

    Returns the final metrics (e.g. `val/bleu`) as floats.
    """
    refuse_multirun_with_ddp(cfg)
    L.seed_everything(cfg.seed, workers=True)
    datamodule = instantiate(cfg.data)
    tokenizer = datamodule.load_tokenizer()
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

    trainer.fit(module, datamodule=datamodule, ckpt_path=cfg.get("ckpt_path"))
    finish_wandb_runs(loggers, trainer.checkpoint_callback)
    return {name: float(value) for name, value in trainer.callback_metrics.items()}


def refuse_multirun_with_ddp(cfg: DictConfig) -> None:
    """Stop a Hydra sweep whose trials would run on several devices through re-launched ranks.

    `ddp` (and `auto` on several GPUs) re-runs the command line once per extra rank: under
    `--multirun` every rank would run the whole sweep, and with a sampling sweeper such as Optuna
    the ranks would silently train different hyperparameters.
    """
    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return
    devices = cfg.trainer.get("devices", 1)
    one_device = devices == 1 or (OmegaConf.is_list(devices) and len(devices) == 1)
    strategy = str(cfg.trainer.get("strategy", "auto"))
    if (one_device and cfg.trainer.get("num_nodes", 1) == 1) or "spawn" in strategy:
        return
    raise ValueError(
        f"Hydra multirun with trainer.strategy={strategy} on trainer.devices={devices} would run "
        "the sweep once per rank. Run one device per trial (trainer.devices=1), or keep several "
        "devices per trial with trainer.strategy=ddp_spawn."
    )
