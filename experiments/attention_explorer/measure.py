"""The explorer page's size and opening time, and what making it adds to a validation.

Size and opening: 4 Multi30k validation sentences (de->en, spread evenly, with their references)
on the paper's base model (6 layers, 8 heads) with random weights, under the Multi30k BPE. A
random model never predicts EOS: max_len_b=0 makes each translation as long as its source, about
a real translation's length. Chromium (headless) opens the page 5 times; the time is from the
start of navigation to the first drawing done (`explorer.readyAt`), the median.

Overhead: a real validation of the Multi30k recipe (`experiment=multi30k_de_en`, 1014
sentences) after `--steps` updates; the attention callback's explorer pages are timed inside it.

    python -m experiments.attention_explorer.measure --steps 20 --out /tmp/explorer_measure
"""

import argparse
import shutil
import statistics
import time
from pathlib import Path

import lightning as L
import numpy as np
import torch
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from omegaconf import open_dict
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait

from experiments.common.batches import MULTI30K, ROOT, multi30k_tokenizer
from experiments.common.machine import cpu_description, load_average
from transformer_nmt.cli.compose import compose_group
from transformer_nmt.data.bitext import read_lines
from transformer_nmt.data.framing import source_ids
from transformer_nmt.data.tokenizer import PAD_ID
from transformer_nmt.explorer import explore_sentence, write_page
from transformer_nmt.model import Transformer
from transformer_nmt.run_names import register_resolvers
from transformer_nmt.train import train
from transformer_nmt.training.callbacks.attention_maps import AttentionMaps


def base_page(out: Path, sentences: int = 4) -> Path:
    """The page of `sentences` validation sentences on the base model with random weights."""
    tokenizer = multi30k_tokenizer()
    sources = [s.strip() for s in read_lines(MULTI30K / "val.de.gz")]
    references = [s.strip() for s in read_lines(MULTI30K / "val.en.gz")]
    torch.manual_seed(0)
    base = {k: v for k, v in compose_group("model", "base").items() if k != "_target_"}
    model = Transformer(tokenizer.vocab_size, PAD_ID, **base).eval()
    picked = np.linspace(0, len(sources) - 1, sentences).round().astype(int)
    explored = [
        explore_sentence(
            model,
            tokenizer,
            source_ids(tokenizer.encode_batch([sources[i]])[0]),
            tokenizer.encode_batch([references[i]])[0],
            max_len_b=0,
        )
        for i in picked
    ]
    return write_page(
        out / "base_4_sentences.html", [{"step": None, "sentences": explored}], "base"
    )


def opening_ms(page: Path, loads: int = 5) -> list[float]:
    """Milliseconds from navigation to the first drawing done, one per fresh load."""
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    try:
        times = []
        for _ in range(loads):
            driver.get("about:blank")
            driver.get(page.resolve().as_uri())
            WebDriverWait(driver, 60).until(lambda d: d.execute_script("return window.explorer"))
            times.append(driver.execute_script("return window.explorer.readyAt"))
        return times
    finally:
        driver.quit()


class ValidationClock(L.Callback):
    """Seconds of each validation, the callbacks' work at its end included (it runs last)."""

    seconds: list[float] = []

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._start = time.perf_counter()

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.sanity_checking:
            ValidationClock.seconds.append(time.perf_counter() - self._start)


def validation_overhead(steps: int, out: Path) -> tuple[float, float]:
    """(validation seconds without the explorer, the explorer's seconds) of one validation."""
    explored = []
    explore = AttentionMaps._explore

    def timed(*args, **kwargs) -> None:
        start = time.perf_counter()
        explore(*args, **kwargs)
        explored.append(time.perf_counter() - start)

    AttentionMaps._explore = timed
    register_resolvers()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(
            "train",
            overrides=[
                "experiment=multi30k_de_en",
                f"data.corpus.path={MULTI30K}",
                "logger=none",
                f"paths.log_dir={out}/outputs",
                f"trainer.max_steps={steps}",
                f"trainer.val_check_interval={steps}",
                "+trainer.num_sanity_val_steps=0",
                "callbacks.attention_maps.every_n_validations=1",
                "+callbacks.clock._target_=experiments.attention_explorer.measure.ValidationClock",
            ],
            return_hydra_config=True,
        )
    with open_dict(cfg):
        cfg.hydra.runtime.output_dir = str(out / "run")
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        del cfg.hydra
    train(cfg)
    (total,), (explorer,) = ValidationClock.seconds, explored
    return total - explorer, explorer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=20, help="updates before the validation")
    parser.add_argument("--out", type=Path, default=Path("/tmp/explorer_measure"))
    args = parser.parse_args()
    print(f"CPU: {cpu_description()}; {load_average()}")
    page = base_page(args.out)
    print(f"base, 4 sentences: {page.stat().st_size / 1e6:.2f} MB")
    times = opening_ms(page)
    print(f"opens in {statistics.median(times):.0f} ms (median of {len(times)}: {times})")
    validation, explorer = validation_overhead(args.steps, args.out)
    print(f"validation {validation:.1f} s, explorer {explorer:.2f} s: +{explorer / validation:.1%}")


if __name__ == "__main__":
    main()
