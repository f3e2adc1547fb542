"""`--device`, `--dtype` and `--quantization` of nmt-translate and nmt-evaluate."""

import argparse
from pathlib import Path

import pytest
import torch

from transformer_nmt.cli.search_args import (
    add_search_arguments,
    engine_options,
    parse_search_args,
)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_search_arguments(parser)
    return parse_search_args(parser, list(argv))


@pytest.mark.parametrize(
    ("name", "dtype"),
    [("float32", torch.float32), ("bfloat16", torch.bfloat16), ("float16", torch.float16)],
)
def test_dtype_names_reach_the_translator(name, dtype):
    assert engine_options(parse("--dtype", name))["dtype"] == dtype


def test_without_dtype_the_checkpoint_keeps_its_own():
    assert engine_options(parse())["dtype"] is None


def test_dtype_is_refused_with_ctranslate2():
    with pytest.raises(SystemExit):
        parse("--engine", "ct2", "--dtype", "float16")


def test_int8_quantization_reaches_the_torch_engine():
    options = engine_options(parse("--quantization", "int8"))
    assert options == {
        "engine": "torch",
        "quantization": "int8",
        "dtype": None,
        "autocast": None,
        "vmap_from": None,
        "workers": 1,
    }


def test_workers_reach_the_torch_engine_on_a_cpu_and_are_refused_elsewhere(capsys):
    assert engine_options(parse("--workers", "2", "--device", "cpu"))["workers"] == 2
    for argv in (["--engine", "ct2"], ["--device", "meta"], ["--workers", "0"]):
        with pytest.raises(SystemExit):
            parse("--workers", "2", *argv)
        assert "--workers" in capsys.readouterr().err


def test_a_vmap_reaches_the_ct2_engine():
    options = engine_options(parse("--engine", "ct2", "--vmap-from", "train.en.gz"))
    assert options["engine"] == "ct2" and options["vmap_from"] == Path("train.en.gz")


@pytest.mark.parametrize(
    "argv",
    [["--quantization", "int8_float32"], ["--quantization", "int8", "--dtype", "bfloat16"]],
)
def test_quantization_the_torch_engine_cannot_run_is_refused(argv):
    with pytest.raises(SystemExit):
        parse(*argv)
