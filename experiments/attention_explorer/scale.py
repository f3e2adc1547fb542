"""The explorer page at scale: a long sentence's page, and the run page at its bound.

Long sentence: one source of `--tokens` tokens (Multi30k validation sentences joined, de->en,
with their references joined likewise) on the paper's base model (6 layers, 8 heads) with random
weights; max_len_b=0 makes the translation as long as the source. Run page: RUN_VALIDATIONS
validations of RUN_SENTENCES Multi30k validation sentences each, the run page's bound.

For each page: its size; the opening time, from the start of navigation to the first drawing
done (`explorer.readyAt`), median of --loads fresh loads; and each control's answer, from the
change event to the next frame drawn, fastest, median and slowest of --repeats. On a shared
machine the fastest is the nearest to what the page costs alone.

    python -m experiments.attention_explorer.scale --out /tmp/explorer_scale
"""

import argparse
import json
import shutil
import statistics
from pathlib import Path

import numpy as np
import torch
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait

from experiments.common.batches import MULTI30K
from experiments.common.machine import cpu_description, load_average
from transformer_nmt.cli.compose import compose_group
from transformer_nmt.data.bitext import read_lines
from transformer_nmt.data.framing import source_ids
from transformer_nmt.data.tokenizer import PAD_ID, BPETokenizer
from transformer_nmt.explorer import explore_sentence, run_validations, write_page
from transformer_nmt.explorer.page import RUN_SENTENCES, RUN_VALIDATIONS
from transformer_nmt.model import Transformer

DATA_TAG = '<script type="application/json" id="data">'
# Each control's values to step through; "validation" is the slider.
CONTROLS = {
    "layer": ["1", "2", "0"],
    "head": ["1", "-1", "0"],
    "kind": ["encoder_self", "decoder_self", "decoder_src"],
    "reading": ["1", "0"],
    "links": ["max", "fixed", "half"],
    "sentence": ["1", "0"],
    "validation": ["0", "1"],
}
# Time from a control's event to the next frame: the redraw, then one animation frame painted.
ANSWER_JS = """
const [id, value, done] = arguments;
const control = document.getElementById(id);
const start = performance.now();
control.value = value;
control.dispatchEvent(new Event(control.type === "range" ? "input" : "change"));
requestAnimationFrame(() => setTimeout(() => done(performance.now() - start), 0));
"""

# The values a control offers: a select's options, a shown slider's positions.
OPTIONS_JS = """
const c = document.getElementById(arguments[0]);
if (c.type !== "range") return [...c.options].map((o) => o.value);
return c.closest("[hidden]") ? [] : [...Array(Number(c.max) + 1).keys()].map(String);
"""


def multi30k(data: Path, split: str = "val") -> tuple[list[str], list[str]]:
    sources = [s.strip() for s in read_lines(data / f"{split}.de.gz")]
    return sources, [s.strip() for s in read_lines(data / f"{split}.en.gz")]


def base_model(tokenizer: BPETokenizer) -> Transformer:
    torch.manual_seed(0)
    base = {k: v for k, v in compose_group("model", "base").items() if k != "_target_"}
    return Transformer(tokenizer.vocab_size, PAD_ID, **base).eval()


def joined(tokenizer: BPETokenizer, lines: list[str], tokens: int) -> list[int]:
    """The first `tokens` ids of the lines joined into one text."""
    ids: list[int] = []
    for line in lines:
        ids += tokenizer.encode_batch([line])[0]
        if len(ids) >= tokens:
            return ids[:tokens]
    raise ValueError(f"the lines hold fewer than {tokens} tokens")


def long_page(out: Path, data: Path, tokens: int) -> Path:
    """One sentence of `tokens` positions (EOS included) and its reference, on base."""
    sources, references = multi30k(data)
    tokenizer = BPETokenizer.train(sources + references, vocab_size=8000, min_frequency=2)
    model = base_model(tokenizer)
    src = source_ids(joined(tokenizer, sources, tokens - 1))
    reference = joined(tokenizer, references, tokens - 1)
    sentence = explore_sentence(model, tokenizer, src, reference, max_len_b=0)
    return write_page(
        out / f"long_{tokens}.html", [{"step": None, "sentences": [sentence]}], "long"
    )


def run_page(out: Path, data: Path) -> Path:
    """The run page at its bound: RUN_VALIDATIONS validations of RUN_SENTENCES sentences."""
    sources, references = multi30k(data)
    tokenizer = BPETokenizer.train(sources + references, vocab_size=8000, min_frequency=2)
    model = base_model(tokenizer)
    picked = np.linspace(0, len(sources) - 1, RUN_SENTENCES).round().astype(int)
    sentences = [
        explore_sentence(
            model,
            tokenizer,
            source_ids(tokenizer.encode_batch([sources[i]])[0]),
            tokenizer.encode_batch([references[i]])[0],
            max_len_b=0,
        )
        for i in picked
    ]
    # Every validation holds the same sentences; each array is deflated alone, so the size is
    # as for different weights of the same shapes.
    validations = [{"step": 100 * (k + 1), "sentences": sentences} for k in range(RUN_VALIDATIONS)]
    kept = run_validations(validations)
    return write_page(out / "run.html", kept, "run")


def rewrapped(page: Path) -> Path:
    """The page written again from its own data, with the current script and style."""
    text = page.read_text(encoding="utf-8")
    start = text.index(DATA_TAG) + len(DATA_TAG)
    data = json.loads(text[start : text.index("</script>", start)].replace("<\\/", "</"))
    return write_page(page, data["validations"], data["title"])


def browser() -> webdriver.Chrome:
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)


def measure(driver: webdriver.Chrome, page: Path, loads: int, repeats: int) -> dict:
    """The page's size, opening times and each control's answer times, in milliseconds."""
    opening = []
    for _ in range(loads):
        driver.get("about:blank")
        driver.get(page.resolve().as_uri())
        WebDriverWait(driver, 120).until(lambda d: d.execute_script("return window.explorer"))
        opening.append(driver.execute_script("return window.explorer.readyAt"))
    answers = {}
    for control, values in CONTROLS.items():
        options = driver.execute_script(OPTIONS_JS, control)
        usable = [v for v in values if v in options]
        if len(usable) < 2:
            continue  # this page has one of it only
        driver.set_script_timeout(60)
        times = [
            driver.execute_async_script(ANSWER_JS, control, value)
            for _ in range(repeats)
            for value in usable
        ]
        answers[control] = times
    return {"bytes": page.stat().st_size, "opening": opening, "answers": answers}


def report(name: str, result: dict) -> list[str]:
    opening = result["opening"]
    lines = [
        f"{name}: {result['bytes'] / 1e6:.2f} MB; opens in {statistics.median(opening):.0f} ms"
        f" (median of {len(opening)}: {', '.join(f'{t:.0f}' for t in opening)}; fastest"
        f" {min(opening):.0f})"
    ]
    for control, times in result["answers"].items():
        lines.append(
            f"  {control}: fastest {min(times):.1f} ms, median {statistics.median(times):.1f} ms,"
            f" slowest {max(times):.1f} ms"
            f" ({len(times)} changes)"
        )
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("/tmp/explorer_scale"))
    parser.add_argument("--data", type=Path, default=MULTI30K, help="Multi30k's folder")
    parser.add_argument("--tokens", type=int, default=134, help="the long sentence's positions")
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--reuse", action="store_true", help="measure the pages in --out again")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"CPU: {cpu_description()}; {load_average()}")
    made = {
        f"{args.tokens}-token sentence, base": (
            f"long_{args.tokens}.html",
            lambda: long_page(args.out, args.data, args.tokens),
        ),
        f"run page: {RUN_VALIDATIONS} validations x {RUN_SENTENCES} sentences, base": (
            "run.html",
            lambda: run_page(args.out, args.data),
        ),
    }
    pages = {}
    for name, (file, make) in made.items():
        # --reuse: the data of pages made earlier, with this checkout's script and style.
        reused = args.reuse and (args.out / file).exists()
        pages[name] = rewrapped(args.out / file) if reused else make()
    driver = browser()
    try:
        for name, page in pages.items():
            print("\n".join(report(name, measure(driver, page, args.loads, args.repeats))))
    finally:
        driver.quit()
    print(load_average())


if __name__ == "__main__":
    main()
