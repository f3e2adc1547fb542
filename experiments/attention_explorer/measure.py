"""The explorer page's size and opening time, and what making it adds to a validation.

Size and opening: 4 Multi30k validation sentences (de->en, spread evenly, with their references)
on the paper's base model (6 layers, 8 heads) with random weights, under the Multi30k BPE. A
random model never predicts EOS: max_len_b=0 makes each translation as long as its source, about
a real translation's length. Chromium (headless) opens the page 5 times; the time is from the
start of navigation to the first drawing done (`explorer.readyAt`), the median.

Overhead: three validations of the Multi30k recipe (`experiment=multi30k_de_en`, 1014 sentences
decoded greedily) on the weights of `--steps` updates (from `--init-from`'s if given), the
explorer on, off, on. Each is timed from its start hook to its end hook, the last callback's;
inside it the attention callback's explorer (`_explore`) and its parts (the beam search with its
trace, the teacher-forced passes, the data and page written) and the heatmaps beside it.

    python -m experiments.attention_explorer.measure --steps 20 --out /tmp/explorer_measure
"""

import argparse
import shutil
import statistics
from contextlib import ExitStack
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

from experiments.attention_explorer.validation_clock import Stopwatch, ValidationClock
from experiments.common.batches import MULTI30K, ROOT, multi30k_tokenizer
from experiments.common.machine import cpu_description, load_average
from transformer_nmt.cli.compose import compose_group
from transformer_nmt.data.bitext import read_lines
from transformer_nmt.data.framing import source_ids
from transformer_nmt.data.tokenizer import PAD_ID
from transformer_nmt.explorer import explore_sentence, sentence, write_page
from transformer_nmt.model import Transformer
from transformer_nmt.train import build_data_and_module, build_trainer
from transformer_nmt.training.callbacks import attention_maps
from transformer_nmt.training.callbacks.attention_maps import AttentionMaps
from transformer_nmt.training.fine_tuning.init_from import load_parent
from transformer_nmt.training.plan.resume import ResumePoint
from transformer_nmt.training.plan.run_config import register_resolvers
from transformer_nmt.training.plan.run_plan import plan_run


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


# explorer on, off, on: the validation without it is compared with the mean of one before and one
# after, so that the load drifting over the three hits both sides alike.
EXPLORER_ORDER = (True, False, True)


def recipe_trainer(
    steps: int, out: Path, overrides: list[str]
) -> tuple[L.Trainer, L.LightningModule, L.LightningDataModule]:
    """The recipe's trainer, module and data after `steps` updates, no validation run yet."""
    register_resolvers()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(
            "train",
            overrides=[
                f"paths.log_dir={out}/outputs",
                f"paths.cache_dir={out}/cache",
                "logger=none",
                f"trainer.max_steps={steps}",
                "+trainer.num_sanity_val_steps=0",
                "callbacks.attention_maps.every_n_validations=1",
                *overrides,
            ],
            return_hydra_config=True,
        )
    with open_dict(cfg):
        cfg.hydra.runtime.output_dir = str(out / "run")
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        del cfg.hydra
    parent = load_parent(cfg)  # as train(cfg) builds it: init.from's weights and vocabulary
    plan = plan_run(cfg)
    L.seed_everything(cfg.seed, workers=True)
    datamodule, module = build_data_and_module(cfg, plan, ResumePoint(plan.resume_from), parent)
    trainer = build_trainer(cfg, [], plan, parent)
    trainer.fit(module, datamodule=datamodule)  # ends before the epoch's validation
    return trainer, module, datamodule


def validation_overhead(steps: int, out: Path, overrides: list[str]) -> list[dict[str, float]]:
    """One record per validation of EXPLORER_ORDER on the same weights: its seconds, and where
    the explorer ran, the seconds of the explorer's parts and of the heatmaps inside it."""
    trainer, module, datamodule = recipe_trainer(steps, out, overrides)
    (maps,) = [c for c in trainer.callbacks if isinstance(c, AttentionMaps)]
    stopwatch = Stopwatch()
    clock = ValidationClock(stopwatch)
    trainer.callbacks.append(clock)
    parts = [
        ("explorer", maps, "_explore"),
        ("beam search with trace", sentence, "beam_search"),
        ("teacher-forced passes", sentence, "attention_weights"),
        ("data and page written", attention_maps, "write_atomically"),
        ("data and page written", attention_maps, "write_page"),
        ("heatmaps", attention_maps, "draw_sentence_attention"),
    ]
    with ExitStack() as watched:
        for name, owner, attribute in parts:
            watched.enter_context(stopwatch.watching(name, owner, attribute))
        for explorer in EXPLORER_ORDER:
            maps.explorer = explorer
            trainer.validate(module, datamodule=datamodule, verbose=False)
    return clock.validations


def overhead_report(validations: list[dict[str, float]]) -> list[str]:
    """Each validation's seconds with its parts; what the explorer adds to the validation it ran
    in (its seconds over the rest's), and the validations with it against the one without."""
    runs = list(zip(EXPLORER_ORDER, validations, strict=True))
    lines = []
    for explorer, record in runs:
        parts = ", ".join(f"{k} {v:.2f} s" for k, v in record.items() if k != "validation")
        state = "on" if explorer else "off"
        lines.append(f"explorer {state}: validation {record['validation']:.1f} s ({parts})")
    for record in (record for explorer, record in runs if explorer):
        added, rest = record["explorer"], record["validation"] - record["explorer"]
        lines.append(
            f"inside: explorer {added:.2f} s over the rest {rest:.1f} s: +{added / rest:.2%}"
        )
    on = statistics.mean(record["validation"] for explorer, record in runs if explorer)
    (off,) = [record["validation"] for explorer, record in runs if not explorer]
    added = on - off
    lines.append(
        f"between: on (mean) {on:.1f} s - off {off:.1f} s = {added:+.1f} s, {added / off:+.2%}"
    )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=20, help="updates before the validation")
    parser.add_argument("--out", type=Path, default=Path("/tmp/explorer_measure"))
    parser.add_argument("--init-from", help="a checkpoint of the recipe to start from (init.from)")
    parser.add_argument("--threads", type=int, help="torch's threads; its default if not given")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch threads: {torch.get_num_threads()}")
    print(f"CPU: {cpu_description()}; {load_average()}")
    page = base_page(args.out)
    print(f"base, 4 sentences: {page.stat().st_size / 1e6:.2f} MB")
    times = opening_ms(page)
    print(f"opens in {statistics.median(times):.0f} ms (median of {len(times)}: {times})")
    recipe = ["experiment=multi30k_de_en", f"paths.data_dir={MULTI30K.parent}"]
    if args.init_from:
        recipe.append(f"init.from={args.init_from}")
    validations = validation_overhead(args.steps, args.out, recipe)
    print("\n".join(overhead_report(validations)))
    print(load_average())


if __name__ == "__main__":
    main()
