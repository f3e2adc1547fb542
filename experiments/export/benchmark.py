"""Sentences and output tokens per second and BLEU of one checkpoint under each engine, each in a
fresh process.

    python -m experiments.export.benchmark CKPT --src test.de.gz --ref test.en.gz --threads 2

Engines: ours (`Translator`, what nmt-translate runs); ours with int8 linear layers
(`--quantization int8`) and in bf16 (`--dtype bfloat16`, only on CPUs with native bf16: elsewhere
it is emulated, far slower than float32, and skipped with a message); the `nmt-export hf` folder
through transformers' `generate`; ours with torchao's int8 configs, weight-only and dynamic
(without torch.compile; skipped with a message where torchao is not installed: it is not in
requirements.txt); CTranslate2 in float32 and int8 (`Translator(engine="ct2")`,
what `nmt-translate --engine ct2` runs), and in int8 scoring only the tokens of `--vmap-from FILE`
(the target side of the training data: `nmt-translate --engine ct2 --vmap-from`). All decode
with beam 4, batches of 64 sentences in input order, and one length penalty: log P / |Y|^alpha,
which is our `--penalty fairseq`, transformers' `length_penalty` and CTranslate2's
`length_penalty` alike (transformers has no GNMT form).
Loading and exporting are not timed; tokenizing and detokenizing are. With --repeats N each
engine translates the sources N times in its process and the median pass is reported (the first
pass pays one-off costs: thread pools, allocator growth). Output tokens are the outputs' BPE
tokens, EOS excluded, counted by re-encoding each engine's text with the model's tokenizer, so
that every engine is counted alike.
"""

import argparse
import functools
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from experiments.common.machine import cpu_name, load_average
from transformer_nmt.checkpoint import load_checkpoint
from transformer_nmt.export import ExportError
from transformer_nmt.export.formats import check_exportable
from transformer_nmt.model import ModelConfig
from transformer_nmt.training.plan.precision import cpu_has_native_bf16

ROOT = Path(__file__).resolve().parents[2]
TORCHAO = ("torchao-int8-weight-only", "torchao-int8-dynamic")
# "-workers": a worker per thread, each decoding whole batches on one core, as CTranslate2's
# engines always run; the others run one batch at a time on all threads.
WORKERS = ("ours-workers", "ours-int8-workers")
ENGINES = ("ours", "ours-int8", *WORKERS, "ours-bf16", "hf", *TORCHAO, "ct2-float32", "ct2-int8")
ENGINES += ("ct2-int8-vmap",)


def translate_hf(checkpoint: str, args: argparse.Namespace) -> Callable[[list[str]], list[str]]:
    """The `nmt-export hf` folder, loaded by transformers: a function that translates."""
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from transformer_nmt.export.hf import export_hf

    folder = tempfile.mkdtemp()
    export_hf(*load_checkpoint(checkpoint), folder)
    model = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)

    def translate(sources: list[str]) -> list[str]:
        out = []
        for i in range(0, len(sources), args.batch_size):
            batch = tokenizer(
                sources[i : i + args.batch_size], return_tensors="pt", padding=True, truncation=True
            )  # truncation: cut at max_positions, as ours cuts
            longest = int(batch.attention_mask.sum(dim=1).max())  # a batch shares one limit
            with torch.no_grad():
                ids = model.generate(
                    **batch,
                    num_beams=args.beam_size,
                    length_penalty=args.alpha,
                    # No further than the positions there are, as ours.
                    max_new_tokens=min(
                        longest + args.max_len_b, model.config.max_position_embeddings
                    ),
                )
            out += tokenizer.batch_decode(ids, skip_special_tokens=True)
        return out

    return translate


def translate_ours(
    checkpoint: str, args: argparse.Namespace, engine: str
) -> Callable[[list[str]], list[str]]:
    """Our `Translator` with the engine's options: a function that translates."""
    import torch

    from transformer_nmt import Translator

    if engine in TORCHAO:
        model, tokenizer = load_checkpoint(checkpoint)[:2]
        translator = Translator(torchao_int8(model.eval(), engine), tokenizer, device="cpu")
    else:
        options = {
            "ours": {},
            "ours-int8": {"quantization": "int8"},
            "ours-workers": {"workers": args.threads},
            "ours-int8-workers": {"quantization": "int8", "workers": args.threads},
            "ours-bf16": {"dtype": torch.bfloat16},
            "ct2-float32": {"engine": "ct2", "quantization": "float32"},
            "ct2-int8": {"engine": "ct2", "quantization": "int8"},
            "ct2-int8-vmap": {"engine": "ct2", "quantization": "int8", "vmap_from": args.vmap_from},
        }[engine]
        translator = Translator.from_checkpoint(checkpoint, device="cpu", **options)
    return functools.partial(
        translator.translate,
        beam_size=args.beam_size,
        alpha=args.alpha,
        penalty="fairseq",
        max_len_b=args.max_len_b,
        batch_size=args.batch_size,
    )


def torchao_int8(model, engine: str):
    """`model` with its linear layers in torchao's int8 config named by `engine`, in place."""
    from torchao.quantization import (
        Int8DynamicActivationInt8WeightConfig,
        Int8WeightOnlyConfig,
        quantize_,
    )

    config = {
        "torchao-int8-weight-only": Int8WeightOnlyConfig(),
        "torchao-int8-dynamic": Int8DynamicActivationInt8WeightConfig(),
    }[engine]
    quantize_(model, config)
    return model


def run_one(args: argparse.Namespace) -> None:
    """Child process: one engine, a JSON line on stdout."""
    import torch
    from sacrebleu.metrics import BLEU

    from transformer_nmt.data.bitext import read_lines

    torch.set_num_threads(args.threads)
    sources = [line.strip() for line in read_lines(Path(args.src))]
    references = [line.strip() for line in read_lines(Path(args.ref))]
    if args.engine == "hf":
        translate = translate_hf(args.checkpoint, args)
    else:
        translate = translate_ours(args.checkpoint, args, args.engine)
    passes = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        hypotheses = translate(sources)  # the same every pass: decoding is deterministic
        passes.append(time.perf_counter() - start)
    seconds = statistics.median(passes)
    tokenizer = load_checkpoint(args.checkpoint)[1]
    output_tokens = sum(map(len, tokenizer.encode_batch(hypotheses)))
    bleu = BLEU()
    result = {
        "engine": args.engine,
        "sentences_per_second": len(sources) / seconds,
        "output_tokens_per_second": output_tokens / seconds,
        "output_tokens": output_tokens,
        "seconds": seconds,
        "passes": passes,
        "BLEU": bleu.corpus_score(hypotheses, [references]).score,
        "signature": str(bleu.get_signature()),
    }
    print(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("checkpoint")
    parser.add_argument("--src", required=True)
    parser.add_argument("--ref", required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--alpha", type=float, default=1.0)
    parser.add_argument("--max-len-b", type=int, default=50)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument(
        "--repeats", type=int, default=1,
        help="passes over the sources per engine, in its one process; the median pass is reported",
    )  # fmt: skip
    parser.add_argument(
        "--engines", nargs="+", choices=ENGINES, default=ENGINES, help="those to run (all)"
    )
    parser.add_argument("--engine", choices=ENGINES, help="run one engine here (child mode)")
    parser.add_argument(
        "--vmap-from", type=Path,
        help="the target side of the training data, for ct2-int8-vmap's vocabulary map",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args()
    if args.engine:
        run_one(args)
        return
    native_bf16 = cpu_has_native_bf16()
    config = load_checkpoint(args.checkpoint)[0].config
    print(
        f"CPU {cpu_name()}, native bf16 (avx512_bf16 or amx_bf16): "
        f"{'yes' if native_bf16 else 'no'}; {args.threads} thread(s); {load_average()}"
    )
    # One fresh process per engine: no engine inherits another's warm caches or thread pools.
    env = os.environ | {"OMP_NUM_THREADS": str(args.threads)}
    results, skipped = [], {}
    for engine in args.engines:
        if reason := skip_reason(engine, config, native_bf16, args.vmap_from, args.threads):
            skipped[engine] = reason
            print(f"{engine}: skipped, {reason}", flush=True)
            continue
        child = [sys.executable, "-m", __spec__.name, *sys.argv[1:], "--engine", engine]
        done = subprocess.run(child, cwd=ROOT, env=env, check=True, capture_output=True, text=True)
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(json.dumps(results[-1]), flush=True)
    print_table(results, skipped, args.beam_size)
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")


def skip_reason(
    engine: str, config: ModelConfig, native_bf16: bool, vmap_from: Path | None, threads: int
) -> str | None:
    """Why this machine, command or model does not run `engine`, or None."""
    if engine in WORKERS and threads == 1:
        return "one thread: one worker, the row without -workers"
    if engine == "hf":
        try:
            check_exportable(config, "hf")
        except ExportError as error:
            return str(error)
    if engine == "ours-bf16" and not native_bf16:
        return "this CPU has no native bf16: emulated bf16 is far slower than float32"
    if engine in TORCHAO and importlib.util.find_spec("torchao") is None:
        return "torchao is not installed (pip install torchao; it is not in requirements.txt)"
    if engine == "ct2-int8-vmap" and vmap_from is None:
        return "its vocabulary map needs --vmap-from, the target side of the training data"
    return None


def print_table(results: list[dict], skipped: dict[str, str], beam_size: int) -> None:
    """Markdown: speed against ours (sentences/s) and against transformers (output tokens/s)."""
    speeds = {r["engine"]: r for r in results}
    ours, hf = speeds.get("ours"), speeds.get("hf")
    print(
        f"\n| engine | sentences/s (beam {beam_size}) | output tokens/s | × ours | × hf | BLEU |"
        "\n|---|---|---|---|---|---|"
    )
    for r in results:
        sentences, tokens = r["sentences_per_second"], r["output_tokens_per_second"]
        x_ours = f"{sentences / ours['sentences_per_second']:.2f}" if ours else ""
        x_hf = f"{tokens / hf['output_tokens_per_second']:.2f}" if hf else ""
        print(
            f"| {r['engine']} | {sentences:.1f} | {tokens:.0f} | {x_ours} | {x_hf} "
            f"| {r['BLEU']:.2f} |"
        )
    for engine, reason in skipped.items():
        print(f"| {engine} | skipped: {reason} | | | | |")


if __name__ == "__main__":
    main()
