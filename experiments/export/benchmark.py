"""Sentences per second and BLEU of one checkpoint under each engine, each in a fresh process.

    python experiments/export/benchmark.py CKPT --src test.de.gz --ref test.en.gz --threads 2

Engines: ours (`Translator`, what nmt-translate runs), the `nmt-export hf` folder through
transformers' `generate`, and CTranslate2 in float32 and int8 (`Translator(engine="ct2")`, what
`nmt-translate --engine ct2` runs). All decode with beam 4, batches of 64 sentences in input order,
and one length penalty: log P / |Y|^alpha, which is our `--penalty fairseq`, transformers'
`length_penalty` and CTranslate2's `length_penalty` alike (transformers has no GNMT form).
Loading and exporting are not timed; tokenizing and detokenizing are.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENGINES = ("ours", "hf", "ct2-float32", "ct2-int8")


def translate_hf(
    checkpoint: str, sources: list[str], args: argparse.Namespace
) -> tuple[list, float]:
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from transformer_nmt.export.hf import export_hf
    from transformer_nmt.training.checkpoint import load_checkpoint

    folder = tempfile.mkdtemp()
    export_hf(*load_checkpoint(checkpoint), folder)
    model = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    start, out = time.perf_counter(), []
    for i in range(0, len(sources), args.batch_size):
        batch = tokenizer(sources[i : i + args.batch_size], return_tensors="pt", padding=True)
        longest = int(batch.attention_mask.sum(dim=1).max())  # a batch shares one limit
        with torch.no_grad():
            ids = model.generate(
                **batch,
                num_beams=args.beam_size,
                length_penalty=args.alpha,
                max_new_tokens=longest + args.max_len_b,
            )
        out += tokenizer.batch_decode(ids, skip_special_tokens=True)
    return out, time.perf_counter() - start


def translate_ours(checkpoint: str, sources: list[str], args: argparse.Namespace, engine: str):
    from transformer_nmt import Translator

    options = {} if engine == "ours" else {"engine": "ct2", "quantization": engine[4:]}
    translator = Translator.from_checkpoint(checkpoint, device="cpu", **options)
    start = time.perf_counter()
    out = translator.translate(
        sources,
        beam_size=args.beam_size,
        alpha=args.alpha,
        penalty="fairseq",
        max_len_b=args.max_len_b,
        batch_size=args.batch_size,
    )
    return out, time.perf_counter() - start


def run_one(args: argparse.Namespace) -> None:
    """Child process: one engine, a JSON line on stdout."""
    import torch
    from sacrebleu.metrics import BLEU

    from transformer_nmt.data.bitext import read_lines

    torch.set_num_threads(args.threads)
    sources = [line.strip() for line in read_lines(Path(args.src))]
    references = [line.strip() for line in read_lines(Path(args.ref))]
    if args.engine == "hf":
        hypotheses, seconds = translate_hf(args.checkpoint, sources, args)
    else:
        hypotheses, seconds = translate_ours(args.checkpoint, sources, args, args.engine)
    bleu = BLEU()
    result = {
        "engine": args.engine,
        "sentences_per_second": len(sources) / seconds,
        "seconds": seconds,
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
    parser.add_argument("--engine", choices=ENGINES, help="run one engine here (child mode)")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args()
    if args.engine:
        run_one(args)
        return
    # One fresh process per engine: no engine inherits another's warm caches or thread pools.
    env = os.environ | {"OMP_NUM_THREADS": str(args.threads)}
    results = []
    for engine in ENGINES:
        child = [sys.executable, __file__, *sys.argv[1:], "--engine", engine]
        done = subprocess.run(child, env=env, check=True, capture_output=True, text=True)
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(json.dumps(results[-1]), flush=True)
    ours = results[0]["sentences_per_second"]
    print(f"\n| engine | sentences/s (beam {args.beam_size}) | × ours | BLEU |\n|---|---|---|---|")
    for r in results:
        speed = r["sentences_per_second"]
        print(f"| {r['engine']} | {speed:.1f} | {speed / ours:.1f} | {r['BLEU']:.2f} |")
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
