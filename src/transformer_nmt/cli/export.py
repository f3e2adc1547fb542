"""`nmt-export`: a checkpoint as a Hugging Face (MarianMT), CTranslate2 or safetensors model
folder, each with a model card (README.md).

    nmt-export hf run/checkpoints/last.ckpt exported/hf
    nmt-export ct2 run/checkpoints --average-last 5 exported/ct2 --quantization int8
    nmt-export ct2 run/checkpoints/last.ckpt exported/ct2 --vmap-from data/train.en.gz
    nmt-export safetensors run/checkpoints/last.ckpt exported/native
    nmt-export hf run/checkpoints/last.ckpt exported/hf --push-to-hub someone/transformer-de-en
"""

import argparse
import sys
from pathlib import Path

from transformer_nmt.checkpoint import (
    CheckpointError,
    load_translator,
    resolve_checkpoints,
)
from transformer_nmt.cli.search_args import positive_int
from transformer_nmt.data.corpus import DataError
from transformer_nmt.export import ExportError
from transformer_nmt.export.formats import check_exportable
from transformer_nmt.runtime.atomic import write_atomically

FORMATS = {
    "hf": "Hugging Face transformers: MarianMT config, safetensors weights, fast tokenizer",
    "ct2": "CTranslate2: a model for its Translator, optionally quantized",
    "safetensors": "transformer-nmt's own model without pickle: safetensors weights, JSON config",
}
QUANTIZATIONS = ("int8", "int8_float32", "float32")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    formats = parser.add_subparsers(dest="format", required=True, metavar="FORMAT")
    for name, help_text in FORMATS.items():
        sub = formats.add_parser(name, help=help_text, description=help_text)
        sub.add_argument(
            "checkpoints", nargs="+", help="one .ckpt; several to average; or a folder"
        )
        sub.add_argument("out", type=Path, help="the folder to write")
        sub.add_argument(
            "--average-last",
            type=positive_int,
            metavar="N",
            help="export the average of the folder's last N periodic checkpoints",
        )
        sub.add_argument(
            "--force", action="store_true", help="write into OUT even if it holds files"
        )
        sub.add_argument(
            "--push-to-hub",
            metavar="REPO",
            help="then upload the folder to this Hugging Face Hub model repo (created if absent; "
            "the token comes from HF_TOKEN or `hf auth login`)",
        )
        sub.add_argument(
            "--private", action="store_true", help="with --push-to-hub: create the repo private"
        )
        if name == "ct2":
            sub.add_argument(
                "--quantization",
                choices=QUANTIZATIONS,
                default="float32",
                help="weight type: int8 is about 4x smaller and faster on CPUs (default float32)",
            )
            sub.add_argument(
                "--vmap-from",
                type=Path,
                metavar="FILE",
                help="also write vmap.txt, CTranslate2's vocabulary map, listing the tokens of "
                "FILE, the target side of the training data (.gz allowed): translate_batch(..., "
                "use_vmap=True) then scores only those, which is faster",
            )
    args = parser.parse_args(argv)
    if args.private and not args.push_to_hub:
        parser.error("--private applies to --push-to-hub REPO only")
    return args


def check_folder(out: Path, force: bool) -> None:
    """Refuse to mix an export into a folder that holds files, unless forced."""
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out} is a file, not a folder")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise ExportError(f"{out} is not empty: choose another folder, or pass --force")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    # Imported here: each pulls in its runtime (transformers, ctranslate2), which takes seconds.
    from transformer_nmt.export import card

    try:
        paths = resolve_checkpoints(args.checkpoints, args.average_last)
        check_folder(args.out, args.force)
        model, tokenizer = load_translator(paths)
        check_exportable(model.config, args.format)  # before any file is written
        if args.format == "hf":
            from transformer_nmt.export import hf

            hf.export_hf(model, tokenizer, args.out)
            what, usage = hf.kind_and_usage(tokenizer)
            library = hf.LIBRARY
        elif args.format == "ct2":
            from transformer_nmt.export import ct2

            vmap = None
            if args.vmap_from is not None:
                from transformer_nmt.export.vmap import target_vocabulary_map

                vmap = target_vocabulary_map(tokenizer, args.vmap_from)
            ct2.export_ct2(model, tokenizer, args.out, args.quantization, vmap)
            what = f"a CTranslate2 model ({args.quantization} weights)"
            usage, library = ct2.usage(), ct2.LIBRARY
        else:
            from transformer_nmt.export import native

            native.save_safetensors(model, tokenizer, args.out)
            what = "transformer-nmt safetensors weights"
            usage, library = native.usage(), native.FORMAT
        model_card = card.model_card(model, card.run_record(paths), what, usage, library)
        write_atomically(args.out / "README.md", str(model_card))
        print(f"{args.out}: {what}, from {', '.join(str(p) for p in paths)}")
        if args.push_to_hub:
            from transformer_nmt.export.hub_push import push_to_hub

            print(f"pushed to {push_to_hub(args.out, args.push_to_hub, args.private, what)}")
    except (CheckpointError, DataError, ExportError, OSError) as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()
