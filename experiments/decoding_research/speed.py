"""Decoding features' speed rows: sampling, ensembles and forced scoring, each against its baseline.

    python -m experiments.decoding_research.speed CKPT --ensemble CKPT2 \
        --src val.de.gz --ref val.en.gz --threads 1 --repeats 3

Three ratios, on one CPU in one process, each pair of runs timed alternately after an untimed
pass (`experiments.common.timing.interleaved`), the median of --repeats passes reported:
- sampling: ours, 4 samples a sentence from the full distribution at temperature 1
  (`nmt-translate --sample 4`), against transformers' `generate(do_sample=True,
  num_return_sequences=4, top_k=0)` on the `nmt-export hf` folder of the same checkpoint, in the
  same batches: the sources sorted by length as `Translator` sorts them, --batch-size a batch;
- ensemble: beam 4 with CKPT and --ensemble decoding as one model (`--ensemble`), against CKPT
  alone;
- scoring: forced decoding of the references (`nmt-score`), against beam-4 translation of the
  same sources.
Tokenizing and detokenizing are timed, loading and exporting are not. Each run's output tokens
(BPE, EOS excluded, re-encoded with the checkpoint's tokenizer) are printed beside its time:
runs whose outputs differ in length do different work.
"""

import argparse
import json
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch

from experiments.common.machine import cpu_description, load_average
from experiments.common.timing import interleaved
from transformer_nmt import Sampling, Translator
from transformer_nmt.checkpoint import load_checkpoint
from transformer_nmt.data.bitext import read_lines
from transformer_nmt.data.tokenizer import SubwordTokenizer

SAMPLES = 4
BEAM = 4
MAX_LEN_B = 50  # nmt-translate's default: a translation's cap is its source's length + 50


def length_sorted_batches(
    sources: list[str], tokenizer: SubwordTokenizer, batch_size: int
) -> list[list[str]]:
    """The sources in `Translator`'s batches: sorted by token length (stably), batch_size each."""
    lengths = [len(ids) for ids in tokenizer.encode_batch(sources)]
    order = sorted(range(len(sources)), key=lambda i: lengths[i])
    return [
        [sources[i] for i in order[start : start + batch_size]]
        for start in range(0, len(order), batch_size)
    ]


def hf_sampler(checkpoint: Path, batches: list[list[str]]) -> Callable[[], list[str]]:
    """transformers' sampling on the checkpoint's `nmt-export hf` folder: SAMPLES outputs a
    source, batch by batch, each batch capped at its longest source + MAX_LEN_B tokens."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from transformer_nmt.export.hf import export_hf

    folder = tempfile.mkdtemp()
    export_hf(*load_checkpoint(checkpoint), folder)
    model = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    limit = model.config.max_position_embeddings

    def run() -> list[str]:
        torch.manual_seed(0)
        out = []
        for batch in batches:
            inputs = tokenizer(batch, return_tensors="pt", padding=True, truncation=True)
            longest = int(inputs.attention_mask.sum(dim=1).max())
            with torch.no_grad():
                ids = model.generate(
                    **inputs,
                    do_sample=True,
                    num_beams=1,
                    num_return_sequences=SAMPLES,
                    top_k=0,  # the full distribution, as ours (transformers' default is 50)
                    top_p=1.0,
                    temperature=1.0,
                    max_new_tokens=min(longest + MAX_LEN_B, limit),
                )
            out += tokenizer.batch_decode(ids, skip_special_tokens=True)
        return out

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--ensemble", type=Path, required=True, help="the second member")
    parser.add_argument("--src", type=Path, required=True)
    parser.add_argument("--ref", type=Path, required=True)
    parser.add_argument("--sentences", type=int, help="the first N lines (default: all)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    sources = [line.strip() for line in read_lines(args.src)][: args.sentences]
    references = [line.strip() for line in read_lines(args.ref)][: args.sentences]
    one = Translator.from_checkpoint(args.checkpoint, device="cpu")
    pair = Translator.from_ensemble([args.checkpoint, args.ensemble], device="cpu")
    batches = length_sorted_batches(sources, one.tokenizer, args.batch_size)
    size = dict(batch_size=args.batch_size, max_len_b=MAX_LEN_B)
    sampling = Sampling(n=SAMPLES, seed=0)
    runs = {
        "ours sampling": lambda: one.translate(sources, sampling=sampling, **size),
        "generate sampling": hf_sampler(args.checkpoint, batches),
        "beam 4": lambda: one.translate(sources, beam_size=BEAM, **size),
        "ensemble beam 4": lambda: pair.translate(sources, beam_size=BEAM, **size),
        "score references": lambda: one.score(sources, references, args.batch_size),
    }
    found: dict[str, list] = {}
    print(f"CPU {cpu_description()}; {args.threads} thread(s); {load_average()}", flush=True)
    times = interleaved({name: kept(found, name, run) for name, run in runs.items()}, args.repeats)
    found["score references"] = references  # the tokens it read
    tokens = {name: output_tokens(one.tokenizer, out) for name, out in found.items()}
    rows = {
        "sampling: generate / ours": times["generate sampling"] / times["ours sampling"],
        "ensemble of two / one model, beam 4": times["ensemble beam 4"] / times["beam 4"],
        "beam 4 / scoring references": times["beam 4"] / times["score references"],
    }
    result = {
        "sentences": len(sources),
        "seconds": times,
        "output_tokens": tokens,
        "ratios": rows,
        "load_average": load_average(),
    }
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


def kept(found: dict[str, list], name: str, run: Callable[[], list]) -> Callable[[], None]:
    """`run`, its outputs kept as found[name], for counting their tokens."""

    def timed() -> None:
        found[name] = run()

    return timed


def output_tokens(tokenizer: SubwordTokenizer, outputs: list) -> int:
    """The BPE tokens of a run's outputs (translations, or each sentence's samples), re-encoded
    with the checkpoint's tokenizer: every run counted alike."""
    texts = [text for item in outputs for text in sample_texts(item)]
    return sum(map(len, tokenizer.encode_batch(texts)))


def sample_texts(item: str | list) -> list[str]:
    """A translation, or the texts of one sentence's (text, score) samples."""
    return [item] if isinstance(item, str) else [text for text, _ in item]


if __name__ == "__main__":
    main()
