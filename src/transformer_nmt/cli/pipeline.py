"""`nmt-pipeline`: back-translation and sequence-level distillation, each one command.

    nmt-pipeline backtranslate --work bt --monolingual news.en experiment=multi30k_de_en
    nmt-pipeline distill --work kd --teacher big/checkpoints/last.ckpt experiment=... model=small
    nmt-pipeline distill --work kd --teacher big.ckpt --mbr 32 --epsilon 0.02 experiment=...

Trailing arguments are `python train.py` overrides: the forward run's (and, with the sides
swapped, the reverse run's) or the student's. Each stage writes into `--work/<stage>-<hash of its
inputs>`; the same command again reuses what is done and resumes what was interrupted.
"""

import argparse
import logging
from pathlib import Path

from transformer_nmt.cli import sampling_args
from transformer_nmt.cli.errors import exits_on
from transformer_nmt.cli.search_args import (
    non_negative_int,
    positive_float,
    positive_int,
    probability,
)
from transformer_nmt.decoding.mbr import CANDIDATES
from transformer_nmt.decoding.sampling import Sampling
from transformer_nmt.evaluation.utility import UTILITIES
from transformer_nmt.pipelines.translation import Decoding


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nmt-pipeline", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    bt = commands.add_parser("backtranslate", help="train on real plus back-translated pairs")
    bt.add_argument("--monolingual", type=Path, required=True, help="target-language text")
    bt.add_argument(
        "--reverse",
        type=Path,
        action="append",
        help="the reverse model's checkpoint (repeated: an ensemble); default: trained from "
        "the overrides with the sides swapped",
    )
    bt.add_argument(
        "--reverse-override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an override of the trained reverse run only (repeatable)",
    )
    bt.add_argument("--tag", help="a token put before every synthetic source, e.g. '<BT>'")
    bt.add_argument("--real-factor", type=float, default=1.0, help="real pairs' upsampling")
    bt.add_argument("--synthetic-factor", type=float, default=1.0, help="synthetic pairs'")
    kd = commands.add_parser("distill", help="train a student on a teacher's translations")
    kd.add_argument(
        "--teacher",
        type=Path,
        action="append",
        required=True,
        help="a checkpoint (repeated: an ensemble); with --teacher-average-last, a folder",
    )
    kd.add_argument(
        "--teacher-average-last",
        type=positive_int,
        metavar="N",
        help="each --teacher folder's last N periodic checkpoints, averaged",
    )
    kd.add_argument(
        "--references-factor",
        type=float,
        help="train on the references too, upsampled by this (default: the distilled alone)",
    )
    kd.add_argument("--distilled-factor", type=float, default=1.0)
    for command in (bt, kd):
        command.add_argument("--work", type=Path, required=True, help="the stages' folder")
        add_decoding_arguments(command, sampling=command is bt)
        command.add_argument("overrides", nargs="*", help="python train.py overrides")
    add_mbr_arguments(kd)
    return parser


def add_mbr_arguments(parser: argparse.ArgumentParser) -> None:
    """The teacher's minimum Bayes risk decoding, as `nmt-translate --mbr` takes it."""
    group = parser.add_argument_group("the teacher's MBR decoding (instead of beam search)")
    group.add_argument(
        "--mbr",
        type=sampling_args.samples_to_compare,
        metavar="N",
        help="N samples a sentence are the pseudo-references; the candidate of the highest mean "
        "utility against them is the student's target, as nmt-translate --mbr N gives it; "
        "N >= 2 (default: beam search)",
    )
    group.add_argument(
        "--mbr-candidates",
        choices=CANDIDATES,
        help="the N samples, the beam's --beam-size n-best, or both (default: sample)",
    )
    group.add_argument(
        "--mbr-utility", choices=UTILITIES, help="sentence chrF, chrF++ or BLEU (default: chrf)"
    )
    group.add_argument("--temperature", type=positive_float, help="of the samples (default: 1)")
    group.add_argument("--top-k", type=positive_int, help="of the samples (default: all)")
    group.add_argument("--top-p", type=probability, help="of the samples (default: 1, all)")
    group.add_argument(
        "--epsilon",
        type=sampling_args.epsilon,
        metavar="E",
        help="sample among the ids of probability >= E only, E in [0, 1) (default: 0, all)",
    )
    group.add_argument("--seed", type=non_negative_int, help="of the samples (default: 0)")


def check_mbr_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse MBR options without --mbr, as nmt-translate does."""
    names = ("mbr_candidates", "mbr_utility", *sampling_args.SHAPING)
    given = [f"--{name.replace('_', '-')}" for name in names if getattr(args, name) is not None]
    if given and args.mbr is None:
        parser.error(f"{' '.join(given)} shape the teacher's MBR decoding: add --mbr N")


def add_decoding_arguments(parser: argparse.ArgumentParser, sampling: bool) -> None:
    group = parser.add_argument_group("translation")
    group.add_argument("--beam-size", type=positive_int, default=4)
    group.add_argument("--max-len-b", type=non_negative_int, default=50)
    group.add_argument("--max-tokens", type=positive_int, default=4096, help="tokens a batch")
    group.add_argument("--shards", type=positive_int, default=1, help="processes translating")
    group.add_argument("--device", default="cpu", help="each shard's, e.g. cuda")
    if sampling:
        group.add_argument("--sample", action="store_true", help="sample instead of beam search")
        group.add_argument("--temperature", type=positive_float, default=1.0)
        group.add_argument("--top-k", type=positive_int)
        group.add_argument("--top-p", type=probability, default=1.0)
        group.add_argument("--seed", type=non_negative_int, default=0)


def decoding(args: argparse.Namespace) -> Decoding:
    sampling = None
    if getattr(args, "sample", False):
        sampling = Sampling(1, args.temperature, args.top_k, args.top_p, args.seed)
    return Decoding(
        beam_size=args.beam_size,
        max_len_b=args.max_len_b,
        max_tokens=args.max_tokens,
        sampling=sampling,
        shards=args.shards,
        device=args.device,
        mbr=sampling_args.mbr(args) if hasattr(args, "mbr") else None,
    )


def deliberate_errors() -> tuple[type[Exception], ...]:
    from transformer_nmt.cli.train import deliberate_errors as training_errors

    return training_errors()


@exits_on(*deliberate_errors())
def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    arguments = parser()
    args = arguments.parse_args(argv)
    if args.command == "distill":
        check_mbr_args(arguments, args)
    # Imported once the command line is read: torch and Lightning load slowly.
    from transformer_nmt.checkpoint import resolve_checkpoints
    from transformer_nmt.pipelines.chains import (
        BackTranslation,
        Distillation,
        backtranslate,
        distill,
    )

    if args.command == "backtranslate":
        spec = BackTranslation(
            args.work, args.monolingual, args.overrides, args.reverse or (),
            args.reverse_override, decoding(args), args.tag, args.real_factor,
            args.synthetic_factor,
        )  # fmt: skip
        result = backtranslate(spec)
    else:
        if args.teacher_average_last:
            members = [
                resolve_checkpoints([str(f)], args.teacher_average_last) for f in args.teacher
            ]
        else:
            members = [[path] for path in args.teacher]
        spec = Distillation(
            args.work, members, args.overrides, decoding(args), args.references_factor,
            args.distilled_factor,
        )  # fmt: skip
        result = distill(spec)
    print(result)


if __name__ == "__main__":
    main()
