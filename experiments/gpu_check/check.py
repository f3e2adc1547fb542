"""The GPU check: the headline path, the WMT shape, the levers and the peers, in one call.

Rows, most important first, each written to `--out` (rows.jsonl, table.md) as soon as it is
measured, so a call cut short still returns what it finished; the table is printed last:

1. the end-to-end path: `train.py experiment=toy model=base` (auto precision, sanity check, one
   validation with greedy BLEU on the GPU, attention maps, a checkpoint), then `nmt-evaluate
   --device cuda` with beam 4 (end_to_end.py);
2. the WMT shape at `model=base` and `model=big`: batches sized by `data.max_tokens=auto`,
   `tokens_per_update=25000`; training tokens/s, peak memory, MFU (6 x matmul parameters x
   target tokens/s over the bf16 matmul rate measured here), host-device syncs per update;
3. A/B on base's batches: torch.compile, the SDPA backends, fused against foreach Adam, our loss
   against F.cross_entropy;
4. the peers on the same batches and precision (training, base and big), and beam-4 decoding
   against MarianMT's generate and CTranslate2 (decoding.py).

    python -m experiments.gpu_check.check --out $OUT     # a GPU: about 6 minutes
    python -m experiments.gpu_check.check --cpu          # the same code, tiny, on the CPU

The device command, with the wheels the GPU image lacks: experiments/gpu_check/README.md.
"""

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from experiments.common.peers import build, missing
from experiments.gpu_check import decoding
from experiments.gpu_check.end_to_end import end_to_end
from experiments.gpu_check.training_rows import (
    AutoBudget,
    Shape,
    adam,
    batches,
    cross_entropy_loss,
    free_device,
    is_out_of_memory,
    matmul_params,
    matmul_peak,
    project_loss,
    setup_size,
    time_updates,
    transformer,
    wmt_lengths,
)
from experiments.gpu_check.versions import describe as describe_versions
from experiments.gpu_check.versions import versions
from transformer_nmt.runtime.allocator import use_expandable_segments
from transformer_nmt.training.callbacks.auto_max_tokens import describe

# The targets (an H100, bf16), each measured against its comparison in the same run.
MFU_TARGET = {"base": 0.25, "big": 0.35}
PEER_TARGET = 1.3  # training tokens/s over the fastest peer
DECODING_TARGET = 1.5  # beam-4 sentences/s over MarianMT's generate
SYNC_TARGET = 2  # host-device syncs per training step
TRAINING_PEERS = ("torch", "marian", "x-transformers")
SIMULATED_RANKS = 3  # a world size whose share of 25,000 tokens once halved every batch
UPDATE_OVERSHOOT = 0.01  # how far above tokens_per_update the plan's update may land
SECTIONS = (1, 2, 3, 4)


class Rows:
    """The table's rows, each appended to rows.jsonl and table.md the moment it is added."""

    def __init__(self, out: Path, start: float, seconds: float):
        self.out, self.rows = out, []
        self.deadline, self.last, self.last_cpu = start + seconds, start, cpu_seconds()
        out.mkdir(parents=True, exist_ok=True)
        (out / "rows.jsonl").write_text("")

    def left(self) -> float:
        return self.deadline - time.perf_counter()

    def add(self, what: str, result: str, target: str = "-", met: bool | None = None, **extra):
        """A row; rows.jsonl adds the wall and CPU seconds (subprocesses' too) since the last."""
        now, cpu = time.perf_counter(), cpu_seconds()
        row = {"what": what, "result": result, "target": target, "met": met, **extra}
        row["seconds"] = round(now - self.last, 1)
        row["cpu_seconds"] = round(cpu - self.last_cpu, 1)
        self.last, self.last_cpu = now, cpu
        self.rows.append(row)
        with open(self.out / "rows.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
        (self.out / "table.md").write_text(self.markdown() + "\n")
        print(f"| {what} | {result} | {target} | {verdict(met)} | {row['seconds']} s", flush=True)

    def markdown(self) -> str:
        lines = ["| what | result | target | met |", "|---|---|---|---|"]
        for r in self.rows:
            lines.append(f"| {r['what']} | {r['result']} | {r['target']} | {verdict(r['met'])} |")
        return "\n".join(lines)

    def attempt(self, what: str, needs: float, measure: Callable[[], None]) -> None:
        """Run a section if `needs` seconds are left; a failure becomes its row, not the end."""
        if self.left() < needs:
            self.add(what, f"skipped: {self.left():.0f} s left, about {needs:.0f} needed")
            return
        try:
            measure()
        except Exception as error:  # noqa: BLE001 - the check reports it and goes on
            self.add(what, f"failed: {type(error).__name__}: {str(error)[:300]}", met=False)


def cpu_seconds() -> float:
    """User and system time of this process and of its finished subprocesses."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def verdict(met: bool | None) -> str:
    return {True: "yes", False: "**no**", None: "-"}[met]


def section_end_to_end(rows: Rows, args, work: Path) -> None:
    result = end_to_end(work, args.cpu, args.steps, timeout=max(rows.left() - 30, 60))
    for name in ("train.log", "evaluate.log", "probe.json"):
        source = work / "end_to_end" / name
        if source.exists():
            (args.out / name).write_bytes(source.read_bytes())
    clean = not result["warnings"]
    rows.add(
        f"1. end-to-end: train.py model={'tiny' if args.cpu else 'base'}, validation, attention "
        "maps, checkpoint, nmt-evaluate beam 4",
        f"completes in {result['precision']}: val BLEU {result['val_bleu']:.2f}, nmt-evaluate "
        f"BLEU {result['test_bleu']:.2f} ({result['eval_device']}), "
        f"{result['attention_maps']} attention maps, {result['tokens_per_sec']:,.0f} tokens/s, "
        f"{result['peak_memory_gb']:.2f} GB peak; {len(result['warnings'])} warning lines",
        "completes; no warning about a CPU tensor or a sync",
        clean,
        warnings=result["warnings"],
    )
    rows.add(
        "1. syncs per training step, Lightning's loop",
        f"{result['syncs_per_step']:.1f}",
        f"<= {SYNC_TARGET}",
        result["syncs_per_step"] <= SYNC_TARGET,
        sources=result["sync_sources"],
    )


def budget_row(rows: Rows, shape: Shape, name: str, auto: AutoBudget) -> None:
    """What the probe measured on this device and the update the plan takes from it."""
    measured, plan, ranks = auto.measured, auto.plan, auto.world_size
    peak = max(measured.peak_bytes.values(), default=0) / 1e9
    memory = f"; peak {peak:.2f} of {measured.allowed_bytes / 1e9:.2f} GB allowed" * bool(peak)
    rows.add(
        f"2. {name}: data.max_tokens=auto, {ranks} rank{'s simulated on one device' * (ranks > 1)}",
        f"probe: {measured.max_tokens:,} of the rank's cap {measured.cap:,} ({describe(measured)}"
        f"{memory}); plan: {plan.accumulate_grad_batches} x {plan.max_tokens:,} tokens x "
        f"{ranks} = {plan.tokens_per_update:,} an update",
        f"within 1% of tokens_per_update {shape.tokens_per_update:,}",
        plan.tokens_per_update <= shape.tokens_per_update * (1 + UPDATE_OVERSHOOT),
        world_size=ranks,
        max_tokens=plan.max_tokens,
        accumulate_grad_batches=plan.accumulate_grad_batches,
    )


def section_wmt(
    rows: Rows, shape: Shape, name: str, lengths, peak: float, data: dict, ours: dict
) -> None:
    """Our step at model=name on its auto-sized batches; keeps the batches and rate for 3, 4.
    At `model=base` (tiny on a CPU) the budget is also planned for `SIMULATED_RANKS`."""
    auto = setup_size(shape, name, lengths)
    budget_row(rows, shape, name, auto)
    if name in ("base", "tiny"):
        budget_row(rows, shape, name, setup_size(shape, name, lengths, SIMULATED_RANKS))
    budget, accumulate = auto.plan.max_tokens, auto.plan.accumulate_grad_batches
    count = (shape.warmup + shape.timed) * accumulate
    data[name] = (batches(shape, lengths, budget, count), accumulate)
    model = transformer(shape.size(name)).to(shape.device)
    rate = time_updates(
        shape,
        lambda b: project_loss(model, b, shape.precision),
        adam(model, shape.device),
        data[name][0],
        accumulate,
    )
    ours[name] = rate.tokens_per_s
    mfu = 6 * matmul_params(model) * rate.tokens_per_s / peak
    target = MFU_TARGET.get(name)
    rows.add(
        f"2. {name}: training, target tokens/s (peak memory)",
        f"{rate.tokens_per_s:,.0f} ({rate.peak_gb:.1f} GB)",
    )
    rows.add(
        f"2. {name}: MFU over the measured {peak / 1e12:.3g} TFLOP/s",
        f"{mfu:.1%}",
        f">= {target:.0%}" if target else "-",
        None if target is None else mfu >= target,
    )
    rows.add(
        f"2. {name}: host-device syncs per update",
        f"{rate.syncs_per_update:.0f}",
        f"<= {SYNC_TARGET}",
        rate.syncs_per_update <= SYNC_TARGET,
    )
    model = None
    free_device(shape.device)


def variants(shape: Shape) -> dict[str, dict]:
    """The A/B levers: what each changes from the default step."""
    from torch.nn.attention import SDPBackend

    out = {"default (eager, SDPA auto, fused Adam, our loss)": {}}
    if shape.device.type == "cuda":  # on CPUs its compile time outlasts a check (experiments/speed)
        out["torch.compile"] = {"compile": True}
    backends = {"flash": SDPBackend.FLASH_ATTENTION, "math": SDPBackend.MATH}
    if shape.device.type == "cuda":  # a CUDA kernel only
        backends["memory-efficient"] = SDPBackend.EFFICIENT_ATTENTION
    for label, backend in backends.items():
        out[f"SDPA {label} only"] = {"sdpa": backend}
    out["foreach Adam"] = {"adam": "foreach"}
    out["F.cross_entropy over full logits"] = {"loss": cross_entropy_loss}
    return out


def section_levers(rows: Rows, shape: Shape, data: dict) -> None:
    from torch.nn.attention import sdpa_kernel

    name = "base" if "base" in data else next(iter(data))
    train, accumulate = data[name]
    base_rate = None
    for label, change in variants(shape).items():
        if rows.left() < 30:
            rows.add(f"3. A/B {name}: {label}", "skipped: out of time")
            continue
        model = transformer(shape.size(name)).to(shape.device)
        if change.get("compile"):
            model.compile(dynamic=True)
        loss_of = change.get("loss", project_loss)
        backend = change.get("sdpa")

        def loss(batch, model=model, loss_of=loss_of, backend=backend):
            if backend is None:
                return loss_of(model, batch, shape.precision)
            with sdpa_kernel(backend):
                return loss_of(model, batch, shape.precision)

        try:
            optimizer = adam(model, shape.device, change.get("adam", "fused"))
            rate = time_updates(shape, loss, optimizer, train, accumulate)
        except Exception as error:  # noqa: BLE001 - a backend that cannot run these batches
            rows.add(f"3. A/B {name}: {label}", f"failed: {str(error).splitlines()[0][:200]}")
            continue
        finally:
            del model
            free_device(shape.device)
        base_rate = base_rate or rate.tokens_per_s
        rows.add(
            f"3. A/B {name}: {label}",
            f"{rate.tokens_per_s:,.0f} tokens/s, {rate.tokens_per_s / base_rate:.2f}x the default",
            tokens_per_s=rate.tokens_per_s,
        )


def section_peers(rows: Rows, shape: Shape, data: dict, ours: dict[str, float]) -> None:
    for name, (train, accumulate) in data.items():
        speeds = {}
        for peer_name in TRAINING_PEERS:
            if package := missing(peer_name):
                rows.add(f"4. {name}: {peer_name} training", f"skipped: {package} not installed")
                continue
            if rows.left() < 30:
                rows.add(f"4. {name}: {peer_name} training", "skipped: out of time")
                continue
            peer = build(peer_name, shape.size(name))
            peer.model.to(shape.device)
            try:
                optimizer = adam(peer.model, shape.device)
                rate = time_updates(shape, peer.loss, optimizer, train, accumulate)
                speeds[peer_name] = rate.tokens_per_s
                result = f"{rate.tokens_per_s:,.0f} tokens/s ({rate.peak_gb:.1f} GB)"
            except Exception as error:  # noqa: BLE001 - e.g. out of memory at our batch size
                kind = "out of memory" if is_out_of_memory(error) else type(error).__name__
                result = f"failed: {kind}: {str(error).splitlines()[0][:160]}"
            finally:
                peer = None
                free_device(shape.device)
            rows.add(f"4. {name}: {peer_name} training, same batches", result)
        if speeds and name in ours:
            fastest = max(speeds, key=speeds.get)
            ratio = ours[name] / speeds[fastest]
            rows.add(
                f"4. {name}: ours over the fastest peer ({fastest}), training tokens/s",
                f"{ratio:.2f}x",
                f">= {PEER_TARGET}x",
                ratio >= PEER_TARGET,
            )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="tiny sizes on the CPU: the same code")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(os.environ.get("OUT", "outputs/gpu_check")),
        help="rows.jsonl, table.md and the end-to-end logs (default: $OUT, else outputs/gpu_check)",
    )
    parser.add_argument(
        "--seconds",
        type=float,
        help="start no row after this many seconds (default: 330 on a GPU, none with --cpu)",
    )
    parser.add_argument("--steps", type=int, default=50, help="end-to-end training steps")
    parser.add_argument(
        "--rows",
        type=int,
        nargs="+",
        choices=SECTIONS,
        default=SECTIONS,
        help="the sections to measure, e.g. `--rows 3 4` for a rerun; 3 and 4 train on the "
        "batches 2 sizes, so either brings 2 with it (default: all; row 0 is always written)",
    )
    args = parser.parse_args()
    args.rows = set(args.rows) | ({2} if {3, 4} & set(args.rows) else set())
    if not args.cpu and not torch.cuda.is_available():
        parser.error("no CUDA GPU here: --cpu runs the same code on a tiny model")
    if args.seconds is None:
        args.seconds = 1e9 if args.cpu else 330
    return args


def main() -> None:
    use_expandable_segments()  # the CUDA allocator setting train.py runs with
    args = parse_args()
    start = time.perf_counter()
    device = torch.device("cpu" if args.cpu else "cuda")
    if args.cpu:
        shape = Shape(device, "fp32", 1000, 64, 1024, 2000, 300 * 2**20, warmup=1, timed=2)
        sizes = ("tiny",)
    else:
        shape = Shape(device, "bf16", 37000, 256, 25000, 200_000)
        sizes = ("base", "big")
    rows = Rows(args.out, start, args.seconds)
    found = versions(device)
    print(f"gpu_check on {describe_versions(found)}", flush=True)
    rows.add("0. libraries, device and commit", describe_versions(found), **found)
    if 1 in args.rows:
        with tempfile.TemporaryDirectory() as work:
            rows.attempt("1. end-to-end", 60, lambda: section_end_to_end(rows, args, Path(work)))
    data, ours = {}, {}
    if 2 in args.rows:
        lengths = wmt_lengths(shape)
        peak = matmul_peak(shape)
        for name in sizes:
            measure = lambda name=name: section_wmt(rows, shape, name, lengths, peak, data, ours)  # noqa: E731
            rows.attempt(f"2. {name}", 40, measure)
    if 3 in args.rows:
        rows.attempt("3. A/B", 60, lambda: section_levers(rows, shape, data))
    if 4 in args.rows:
        rows.attempt("4. peers, training", 60, lambda: section_peers(rows, shape, data, ours))
        rows.attempt("4. peers, decoding", 40, lambda: decoding.section(rows, shape, sizes[0]))
    print(f"\n## gpu_check: {describe_versions(found)}, {time.perf_counter() - start:.0f} s\n")
    print(rows.markdown())


if __name__ == "__main__":
    main()
