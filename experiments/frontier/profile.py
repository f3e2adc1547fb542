"""Where our engine's decoding time goes: encoder, decoder steps (its layers and the output
projection apart), and the search around them, from torch's profiler.

    python -m experiments.frontier.profile CKPT --src test.de.gz --threads 1 --beam-size 1

One `Translator` (what nmt-translate runs) translates the first --sentences sources once untimed,
once timed without the profiler, and once under it. `model.encode` and `model.decode` are wrapped
in profiler ranges; the output projection is the `linear` whose weight has the vocabulary's rows.
Time outside every operator (Python: the search's bookkeeping, tokenizing) is wall time under the
profiler less the operators' self time.
"""

import functools
import time
from collections import defaultdict

import torch

from experiments.common.machine import cpu_name, load_average
from experiments.frontier import timing
from transformer_nmt import Translator
from transformer_nmt.data.bitext import read_lines

MATMULS = {"aten::addmm", "aten::mm", "aten::bmm", "aten::linear", "aten::matmul"}


def ranged(name: str, method):
    @functools.wraps(method)
    def call(*args, **kwargs):
        with torch.profiler.record_function(name):
            return method(*args, **kwargs)

    return call


def main() -> None:
    parser = timing.parser(__doc__, beam_size=1)
    parser.add_argument("--sentences", type=int, default=256)
    parser.add_argument("--rows", type=int, default=8, help="operators listed by self time")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    sources = [line.strip() for line in read_lines(args.src)][: args.sentences]
    translator = Translator.from_checkpoint(args.checkpoint, device="cpu")
    model = translator.model
    vocabulary = model.config.vocab_size
    model.encode = ranged("encoder", model.encode)
    model.decode = ranged("decoder step", model.decode)
    translate = functools.partial(translator.translate, **timing.search(args))
    translate(sources)  # one-off costs: thread pools, allocator growth
    start = time.perf_counter()
    translate(sources)
    plain = time.perf_counter() - start
    with torch.profiler.profile(record_shapes=True) as prof:
        start = time.perf_counter()
        translate(sources)
        profiled = time.perf_counter() - start
    ranges = {e.key: e for e in prof.key_averages() if e.key in ("encoder", "decoder step")}
    shapes = prof.key_averages(group_by_input_shape=True)
    operators = [e for e in shapes if e.key.startswith("aten")]
    self_total = sum(e.self_cpu_time_total for e in operators)
    # The output projection: a matmul whose weight is (vocabulary, d_model).
    projection = sum(
        e.cpu_time_total
        for e in operators
        if e.key == "aten::linear" and any(list(s)[:1] == [vocabulary] for s in e.input_shapes)
    )
    encoder = ranges["encoder"].cpu_time_total
    decoder = ranges["decoder step"].cpu_time_total
    outside = profiled * 1e6 - self_total
    search = "greedy" if args.beam_size == 1 else f"beam {args.beam_size}"
    print(
        f"CPU {cpu_name()}; {args.threads} thread(s); {load_average()}\n"
        f"{len(sources)} sentences, {search}, batches of {args.batch_size}: {plain:.2f} s "
        f"({len(sources) / plain:.1f} sentences/s), {profiled:.2f} s under the profiler\n"
    )
    print("| part | s | share of wall time under the profiler |\n|---|---|---|")
    for name, micros in (
        ("encoder", encoder),
        (f"decoder steps ({ranges['decoder step'].count} calls)", decoder),
        ("  of which the output projection", projection),
        ("  of which the layers and embedding", decoder - projection),
        ("search, outside the model (operators and Python)", profiled * 1e6 - encoder - decoder),
        ("Python outside every operator (all parts)", outside),
    ):
        print(f"| {name} | {micros / 1e6:.3f} | {micros / (profiled * 1e6):.1%} |")
    kinds = defaultdict(float)
    for e in operators:
        kinds["matmuls" if e.key in MATMULS else e.key] += e.self_cpu_time_total
    print("\n| operator | self s | share of operators' self time |\n|---|---|---|")
    ranked = sorted(kinds.items(), key=lambda kv: kv[1], reverse=True)
    for key, micros in ranked[: args.rows]:
        print(f"| `{key}` | {micros / 1e6:.3f} | {micros / self_total:.1%} |")
    rest = sum(micros for _, micros in ranked[args.rows :])
    print(f"| (all others) | {rest / 1e6:.3f} | {rest / self_total:.1%} |")


if __name__ == "__main__":
    main()
