"""Our engine's int8 paths on a CPU: torch.ao's dynamic int8 (what `--quantization int8` runs)
against torchao's int8 configs, each on the same checkpoint and sentences, without torch.compile.

    pip install torchao   # for this benchmark only, not in requirements.txt
    python -m experiments.frontier.int8 CKPT --src test.de.gz --ref test.en.gz --threads 1

Each path runs in a fresh process: the model converted, one untimed pass over the sources, then
--repeats timed passes (the median reported), beam --beam-size in batches of 64, as
`experiments.export.benchmark` runs ours. BLEU against --ref checks that the path keeps quality.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

PATHS = ("float32", "torch.ao dynamic int8", "torchao int8 weight-only", "torchao int8 dynamic")


def convert(model, path: str):
    """The model as `path` runs it."""
    if path == "float32":
        return model
    if path == "torch.ao dynamic int8":
        from transformer_nmt.model.quantization import quantize_int8

        return quantize_int8(model)
    from torchao.quantization import (
        Int8DynamicActivationInt8WeightConfig,
        Int8WeightOnlyConfig,
        quantize_,
    )

    config = {
        "torchao int8 weight-only": Int8WeightOnlyConfig(),
        "torchao int8 dynamic": Int8DynamicActivationInt8WeightConfig(),
    }[path]
    quantize_(model, config)
    return model


def run_one(args: argparse.Namespace) -> dict:
    import torch
    from sacrebleu.metrics import BLEU

    from transformer_nmt import Translator
    from transformer_nmt.checkpoint import load_checkpoint
    from transformer_nmt.data.bitext import read_lines

    torch.set_num_threads(args.threads)
    model, tokenizer = load_checkpoint(args.checkpoint)[:2]
    translator = Translator(convert(model.eval(), args.path), tokenizer, device="cpu")
    sources = [line.strip() for line in read_lines(args.src)]
    references = [line.strip() for line in read_lines(args.ref)]
    options = dict(beam_size=args.beam_size, alpha=1.0, penalty="fairseq", batch_size=64)
    hypotheses = translator.translate(sources, **options)  # untimed: one-off costs
    passes = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        translator.translate(sources, **options)
        passes.append(time.perf_counter() - start)
    seconds = statistics.median(passes)
    bleu = BLEU().corpus_score(hypotheses, [references]).score
    return {"path": args.path, "sentences_per_second": len(sources) / seconds, "BLEU": bleu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--src", type=Path, required=True)
    parser.add_argument("--ref", type=Path, required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--path", choices=PATHS, help="run one path here (child mode)")
    args = parser.parse_args()
    if args.path:
        print(json.dumps(run_one(args)))
        return
    rows = []
    for path in PATHS:
        child = [sys.executable, "-m", __spec__.name, *sys.argv[1:], "--path", path]
        done = subprocess.run(child, check=True, capture_output=True, text=True)
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    base = rows[0]["sentences_per_second"]
    print("| path | sentences/s | × float32 | BLEU |\n|---|---|---|---|")
    for r in rows:
        speed = r["sentences_per_second"]
        print(f"| {r['path']} | {speed:.1f} | {speed / base:.2f} | {r['BLEU']:.2f} |")


if __name__ == "__main__":
    main()
