"""`nmt-import`: a model trained elsewhere as a checkpoint that translates, evaluates and exports
like one trained here.

    nmt-import hf opus-mt-de-en/ opus-mt-de-en.ckpt     # a MarianMT folder (OPUS-MT), downloaded
    nmt-import hf m2m100_418M/ m2m100.ckpt              # an M2M-100 folder: --src-lang, --tgt-lang
    nmt-import hf nllb-200-distilled-600M/ nllb.ckpt    # NLLB's: --src-lang deu_Latn, --tgt-lang
"""

import argparse
import sys
from pathlib import Path

from transformer_nmt.checkpoint import CheckpointError
from transformer_nmt.data.languages import LANGUAGES_KEY
from transformer_nmt.model import config_from_dict

FORMATS = {
    "hf": "a Hugging Face transformers MarianMT (OPUS-MT), M2M-100 or NLLB folder, as the models "
    "ship"
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    formats = parser.add_subparsers(dest="format", required=True, metavar="FORMAT")
    for name, help_text in FORMATS.items():
        sub = formats.add_parser(name, help=help_text, description=help_text)
        sub.add_argument("folder", type=Path, help="the model folder, on disk")
        sub.add_argument("out", type=Path, help="the checkpoint to write (.ckpt)")
        sub.add_argument("--force", action="store_true", help="replace OUT if it exists")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    # Imported here: transformers takes seconds to import, and --help needs none of it.
    from transformer_nmt.export.hf_import import ImportProblem, import_hf

    try:
        if args.out.exists() and not args.force:
            raise CheckpointError(f"{args.out} exists: choose another path, or pass --force")
        if not args.folder.is_dir():
            raise CheckpointError(f"{args.folder}: no such folder")
        checkpoint = import_hf(args.folder, args.out)
    except (CheckpointError, ImportProblem, OSError) as e:
        sys.exit(f"error: {e}")
    config = config_from_dict(checkpoint["model_config"])
    languages = checkpoint.get(LANGUAGES_KEY)
    kind = "MarianMT" if languages is None else f"M2M-100 ({len(languages['languages'])} languages)"
    print(
        f"{args.out}: {args.folder}'s {kind} model, {config.sizes()}, a vocabulary of "
        f"{config.vocab_size} (SentencePiece)"
    )


if __name__ == "__main__":
    main()
