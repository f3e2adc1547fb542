"""Our engine's speed over CTranslate2's on one model, their passes alternated in one process.

    python -m experiments.frontier.pair CKPT --src test.de.gz --beam-size 4 --rounds 4

This VM's speed drifts by up to ~40 % within minutes, so engines timed in separate processes
one after the other (the benchmark's way) can differ by the drift alone. Here one process loads
both (`Translator` and `Translator(engine="ct2")`, the model exported on the fly), translates all
sources once with each untimed, then times them in turn, round after round; each round's ratio
sees the same machine. Run it under two commits (a worktree each) and compare the ratios for an
A/B of our engine with CTranslate2 as the fixed yardstick.
"""

import statistics
import time

import torch

from experiments.common.machine import cpu_name, load_average
from experiments.frontier import timing
from transformer_nmt import Translator
from transformer_nmt.data.bitext import read_lines


def main() -> None:
    parser = timing.parser(__doc__, beam_size=4)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--quantization", choices=["int8"], help="both engines in int8")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    sources = [line.strip() for line in read_lines(args.src)]
    engines = {
        "ours": Translator.from_checkpoint(args.checkpoint, quantization=args.quantization),
        "ct2": Translator.from_checkpoint(
            args.checkpoint, engine="ct2", quantization=args.quantization or "float32"
        ),
    }
    options = timing.search(args)

    def speed(name: str) -> tuple[float, list[str]]:
        start = time.perf_counter()
        outputs = engines[name].translate(sources, **options)
        return len(sources) / (time.perf_counter() - start), outputs

    print(f"CPU {cpu_name()}; {args.threads} thread(s); {load_average()}")
    for name in engines:  # one-off costs: thread pools, allocator growth
        speed(name)
    ratios = []
    for round_ in range(args.rounds):
        (ours, ours_out), (ct2, ct2_out) = speed("ours"), speed("ct2")
        ratios.append(ours / ct2)
        print(f"round {round_ + 1}: ours {ours:.1f}, ct2 {ct2:.1f} sentences/s, {ours / ct2:.3f}")
    same = sum(a == b for a, b in zip(ours_out, ct2_out, strict=True))
    print(
        f"ours / ct2, beam {args.beam_size}, {args.quantization or 'float32'}: median "
        f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}); "
        f"{same} of {len(sources)} outputs the same"
    )


if __name__ == "__main__":
    main()
