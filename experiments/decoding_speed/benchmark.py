"""Sentences per second of greedy and beam-4 decoding on CPU, cached versus uncached.

Multi30k test sentences (German), the Multi30k BPE the data module trains (cached in cache/),
random weights for the small and base presets. A random model never predicts EOS, so
max_len_b=0 makes every output exactly as long as its source, about the length of a real
translation; every configuration decodes the same number of tokens.

    python -m experiments.decoding_speed.benchmark --threads 1 --sentences 128
"""

import argparse
from typing import Any

import torch
from omegaconf import OmegaConf

from experiments.common.batches import DATA, MULTI30K, multi30k_tokenizer
from experiments.common.timing import seconds
from transformer_nmt.cli.compose import compose_group
from transformer_nmt.data.bitext import read_lines
from transformer_nmt.data.framing import source_batch
from transformer_nmt.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, BPETokenizer
from transformer_nmt.decoding import beam_search, greedy_search
from transformer_nmt.model import Transformer


def preset(name: str) -> dict[str, Any]:
    """A conf/model preset as Transformer keyword arguments, composed as training composes it."""
    config = OmegaConf.to_container(compose_group("model", name))
    return {k: v for k, v in config.items() if k != "_target_"}


def decode(model: Transformer, batch: torch.Tensor, beam_size: int, use_cache: bool) -> None:
    """Beam size 1 runs greedy search, as a user would."""
    if beam_size == 1:
        greedy_search(model, batch, BOS_ID, EOS_ID, max_len_b=0, use_cache=use_cache)
    else:
        beam_search(model, batch, BOS_ID, EOS_ID, beam_size, max_len_b=0, use_cache=use_cache)


def sentences_per_second(
    model: Transformer,
    sources: list[str],
    tokenizer: BPETokenizer,
    batch_size: int,
    beam_size: int,
    cached: bool,
) -> float:
    def decode_all() -> None:
        for i in range(0, len(sources), batch_size):
            ids = tokenizer.encode_batch(sources[i : i + batch_size])
            batch = source_batch(ids, model.config.max_positions)
            decode(model, batch, beam_size, cached)

    return len(sources) / seconds(decode_all)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--sentences", type=int, default=128, help="first N of the test set")
    parser.add_argument("--presets", nargs="+", default=["small", "base"])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    tokenizer = multi30k_tokenizer()
    sources = [line.strip() for line in read_lines(MULTI30K / f"{DATA.corpus.splits.test}.de.gz")]
    sources = sources[: args.sentences]
    tokens = sum(map(len, tokenizer.encode_batch(sources)))
    print(
        f"{len(sources)} sentences, {tokens / len(sources):.1f} BPE tokens each, "
        f"vocabulary {tokenizer.vocab_size}, {args.threads} thread(s), torch {torch.__version__}"
    )
    print("| preset | search | batch | uncached sent/s | cached sent/s | speed-up |")
    print("|---|---|---|---|---|---|")
    for name in args.presets:
        torch.manual_seed(0)
        model = Transformer(vocab_size=tokenizer.vocab_size, pad_id=PAD_ID, **preset(name)).eval()
        for beam_size in (1, 4):
            for batch_size in (1, 64):
                uncached, cached = (
                    sentences_per_second(model, sources, tokenizer, batch_size, beam_size, c)
                    for c in (False, True)
                )
                search = "greedy" if beam_size == 1 else f"beam {beam_size}"
                print(
                    f"| {name} | {search} | {batch_size} | {uncached:.1f} | {cached:.1f} "
                    f"| {cached / uncached:.1f}x |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
