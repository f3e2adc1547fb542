"""`init.keep=[data]` from a multilingual parent: its directions, their framing and sampling are
compared as a one-direction parent's languages are, naming what differs."""

import re

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from helpers.hydra_compose import compose_train
from helpers.multilingual_files import write_parallel
from transformer_nmt.data.languages import Languages
from transformer_nmt.data.multilingual import train_fingerprint
from transformer_nmt.training.fine_tuning.parent_position import (
    BATCHING,
    MULTILINGUAL,
    position_problems,
)


def multilingual_parent(cfg) -> dict:
    """What a multilingual run of `cfg`'s data records: settings, its pairs, budget, epoch."""
    data = cfg.data
    languages = Languages.from_config(data.languages, data.directions, data.exclude)
    recorded = {
        name: OmegaConf.to_container(data, resolve=True)[name]
        for name in (*BATCHING, *MULTILINGUAL)
    }
    fingerprint = train_fingerprint(instantiate(data.corpus), languages.directions)
    return {
        "datamodule_hyper_parameters": recorded,
        "run_plan": {"max_tokens": data.max_tokens, "world_size": 1},
        "MultilingualDataModule": {"train_fingerprint": fingerprint},
        "epoch": 0,
    }


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ([], None),
        (["data.temperature=2"], r"data.temperature=2 \(the parent's: 1.0\)"),
        (
            ["data.exclude=[de-fr]"],
            r"training split=.*data.exclude=\['de-fr'\] \(the parent's: \[\]\)",
        ),
        (["data.tag_side=source"], r"data.tag_side=source \(the parent's: target\)"),
    ],
)
def test_init_keep_data_of_a_multilingual_parent_compares_its_directions(tmp_path, change, problem):
    folder = write_parallel(tmp_path / "data", {"train": 20, "val": 5})
    overrides = [
        "data=multi30k_multilingual", "model=tiny", f"data.corpus.path={folder}",
        "data.corpus.splits={train: train, val: val, test: val}", "data.languages=[en,de,fr]",
        "data.max_tokens=192", "trainer.max_steps=1",
    ]  # fmt: skip
    parent = multilingual_parent(compose_train(tmp_path / "parent", overrides))
    problems = position_problems(compose_train(tmp_path / "child", [*overrides, *change]), parent)
    assert problems == [] if problem is None else re.search(problem, problems[0]), problems
