"""`train(cfg)`: what `python train.py` runs, callable in-process from tests and notebooks."""

import logging

import lightning as L
from hydra.utils import instantiate
from lightning.pytorch.loggers import Logger
from omegaconf import DictConfig, OmegaConf

from transformer_nmt.data.tokenizer import PAD_ID

log = logging.getLogger(__name__)


def train(cfg: DictConfig) -> dict[str, float]:
    """Builds data, model, module, loggers and trainer from the config, then fits.

    Returns the final metrics (e.g. `val/bleu`) as floats.
    """
    L.seed_everything(cfg.seed, workers=True)
    datamodule = instantiate(cfg.data)
    tokenizer = datamodule.load_tokenizer()
    model = instantiate(cfg.model, vocab_size=tokenizer.vocab_size, pad_id=PAD_ID)
    # Plain lists and dicts in hyperparameters keep checkpoints loadable with weights_only=True.
    module = instantiate(cfg.module, model=model, tokenizer=tokenizer, _convert_="all")
    log.info("Model: %s parameters", f"{sum(p.numel() for p in model.parameters()):,}")

    loggers: list[Logger] = [instantiate(c) for c in (cfg.logger or {}).values()]
    callbacks = [instantiate(c) for c in (cfg.callbacks or {}).values()]
    trainer: L.Trainer = instantiate(cfg.trainer, logger=loggers or False, callbacks=callbacks)
    for logger in loggers:
        logger.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))

    trainer.fit(module, datamodule=datamodule, ckpt_path=cfg.get("ckpt_path"))
    return {name: float(value) for name, value in trainer.callback_metrics.items()}
