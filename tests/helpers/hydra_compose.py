"""Composes `conf/train.yaml` as `python train.py` would, with every output under tmp_path."""

from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, open_dict

from transformer_nmt.training.plan.run_config import register_resolvers

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
SHARED_DATA = ROOT.parent / "shared" / "data"


def compose_train(tmp_path: Path, overrides: list[str] = ()) -> DictConfig:
    register_resolvers()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(
            "train",
            overrides=[
                f"paths.root_dir={ROOT}",
                f"paths.log_dir={tmp_path}/outputs",
                f"paths.cache_dir={tmp_path}/cache",
                *overrides,
            ],
            return_hydra_config=True,
        )
    with open_dict(cfg):
        cfg.hydra.runtime.output_dir = str(tmp_path / "run")
    HydraConfig.instance().set_config(cfg)
    return cfg
