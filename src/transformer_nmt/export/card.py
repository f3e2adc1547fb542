"""The model card (README.md) of an export: what the model is, how it was trained, how it scores.

Everything comes from files a run leaves: the checkpoint (model config, languages, step), the run
folder's `.hydra/` (data settings, the exact command, trainer settings), `train.log` (wall time)
and an `nmt-evaluate` report.json beside the checkpoint. What is not found is said to be unknown.
The metadata header is huggingface_hub's `ModelCardData`: the Hub shows its `model-index` scores.
"""

import json
import re
import shlex
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from huggingface_hub import EvalResult, ModelCard, ModelCardData
from omegaconf import OmegaConf

from transformer_nmt.checkpoint import read_checkpoint
from transformer_nmt.model import EncoderDecoder, ModelConfig, TransformerConfig

# The license of transformer-nmt (LICENSE), as the Hub names it.
LICENSE = "mit"
# The scores of an nmt-evaluate report that the card's model-index lists, by metric type.
INDEXED_METRICS = {"BLEU": "bleu", "chrF2": "chrf"}
LOG_TIME = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),\d+\]")


@dataclass
class RunRecord:
    """What the files of a training run tell about a checkpoint."""

    checkpoints: list[Path]
    src_lang: str | None = None
    tgt_lang: str | None = None
    step: int | None = None
    epoch: int | None = None
    data: dict[str, Any] = field(default_factory=dict)
    trainer: dict[str, Any] = field(default_factory=dict)
    plan: dict[str, Any] | None = None  # the checkpoint's run plan: what training derived
    command: str | None = None
    wall_time: str | None = None
    report: dict[str, Any] | None = None
    report_path: Path | None = None


def run_record(paths: list[Path]) -> RunRecord:
    """Gather what is known about the checkpoint(s) from them and from their run folder."""
    record = RunRecord(checkpoints=paths)
    last = read_checkpoint(paths[-1], mmap=True)
    languages = last.get("datamodule_hyper_parameters", {})
    record.src_lang, record.tgt_lang = languages.get("src_lang"), languages.get("tgt_lang")
    record.step, record.epoch = last.get("global_step"), last.get("epoch")
    run_dir = paths[-1].resolve().parent.parent  # <run dir>/checkpoints/<name>.ckpt
    hydra = run_dir / ".hydra"
    if (hydra / "config.yaml").is_file():
        config = OmegaConf.load(hydra / "config.yaml")
        record.data = _plain(config.get("data", {}))
        record.trainer = _plain(config.get("trainer", {}))
        record.src_lang = record.src_lang or record.data.get("src_lang")
        record.tgt_lang = record.tgt_lang or record.data.get("tgt_lang")
    record.plan = last.get("run_plan")
    if record.plan:  # the precision trained in, where the config may say auto
        record.trainer = {**record.trainer, "precision": record.plan["precision"]}
    if (hydra / "overrides.yaml").is_file():
        overrides = OmegaConf.to_container(OmegaConf.load(hydra / "overrides.yaml"))
        record.command = shlex.join(["python", "train.py", *overrides])
    if (run_dir / "train.log").is_file():
        record.wall_time = _wall_time(run_dir / "train.log")
    for folder in (paths[-1].parent / "evaluation", run_dir / "evaluation"):
        if (folder / "report.json").is_file():
            record.report_path = folder / "report.json"
            record.report = json.loads(record.report_path.read_text(encoding="utf-8"))
            break
    return record


def _plain(node: Any) -> dict[str, Any]:
    """A config node as plain data, interpolations resolved where they can be."""
    try:
        return OmegaConf.to_container(node, resolve=True)
    except Exception:  # an interpolation of a key outside this node, e.g. ${paths.cache_dir}
        return OmegaConf.to_container(node, resolve=False)


def _wall_time(log: Path) -> str | None:
    """The time between the first and the last timestamped line of a run's train.log."""
    lines = log.read_text(errors="replace").splitlines()
    stamps = [m[1] for line in lines if (m := LOG_TIME.match(line))]
    if len(stamps) < 2:
        return None
    first, last = (datetime.fromisoformat(s) for s in (stamps[0], stamps[-1]))
    minutes = (last - first).total_seconds() / 60
    return f"{minutes:.0f} min" if minutes < 120 else f"{minutes / 60:.1f} h"


def model_card(
    model: EncoderDecoder, record: RunRecord, export_format: str, usage: str, library: str
) -> ModelCard:
    """The README.md of an export; `str(card)` is its text.

    Args:
        model: the exported model.
        record: from `run_record`.
        export_format: what the folder holds, e.g. "Hugging Face transformers (MarianMT)".
        usage: a Markdown section showing how to load and run the folder.
        library: the library that loads the folder, e.g. "transformers" (the Hub's library_name).
    """
    direction = f"{record.src_lang or '?'} → {record.tgt_lang or '?'}"
    name = f"transformer-nmt {direction}"
    data = ModelCardData(
        model_name=name,
        language=[lang for lang in (record.src_lang, record.tgt_lang) if lang] or None,
        license=LICENSE,
        library_name=library,
        pipeline_tag="translation",
        tags=["translation", "transformer-nmt", model.config.family],
        datasets=_hub_datasets(record.data) or None,
        eval_results=_eval_results(record) or None,
    )
    parameters = sum(p.numel() for p in model.parameters())  # tied matrices count once
    lines = [
        f"# {name}",
        "",
        f"{_summary(model.config)}, trained with transformer-nmt and exported as {export_format}.",
        "",
        "## Model",
        "",
        "| | |",
        "|---|---|",
        f"| direction | {direction} |",
        *(f"| {key} | {value} |" for key, value in _architecture(model.config, parameters)),
        f"| vocabulary | joint byte-level BPE, {model.config.vocab_size} tokens |",
        f"| checkpoint | {_checkpoints(record)} |",
        "",
        "## Training",
        "",
        f"- data: {_data(record.data)}",
        f"- training time: {record.wall_time or 'unknown'} (wall clock of the run's train.log)",
        f"- hardware: {_hardware(record.trainer)}",
        *([f"- update: {_update(record.plan)}"] if record.plan else []),
    ]
    if record.command:
        lines += ["- command, from the run's `.hydra/overrides.yaml`:", "", "```bash"]
        lines += [record.command, "```"]
    else:
        lines.append("- command: unknown (no `.hydra/` folder beside `checkpoints/`)")
    lines += ["", "## Evaluation", "", *_scores(record), "", usage.strip(), "", "## License", ""]
    lines.append(
        "MIT, the license of transformer-nmt (its LICENSE file). The terms of the data the "
        "model was trained on apply as well."
    )
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n" + "\n".join(lines) + "\n")


def _summary(config: ModelConfig) -> str:
    if isinstance(config, TransformerConfig):
        return 'The Transformer of "Attention Is All You Need"'
    return "An RNN encoder-decoder with additive attention (Bahdanau et al., 2015)"


def _architecture(config: ModelConfig, parameters: int) -> list[tuple[str, str]]:
    """The model table's rows on sizes and switches, as the family names them."""
    c = config
    if isinstance(c, TransformerConfig):
        sizes = c.sizes()
        norm = "ReZero" if c.rezero else "pre-norm" if c.norm_first else "post-norm"
        layers = f"{norm}, {c.activation}, {c.positions} positions (at most {c.max_positions})"
    else:
        sizes = f"{c.cell.upper()}, embed_dim={c.embed_dim}, hidden_size={c.hidden_size}"
        sizes += f", num_layers={c.num_layers}"
        layers = f"bidirectional encoder, attention_dim={c.attention_dim}, at most "
        layers += f"{c.max_positions} positions"
    return [
        ("size", f"{parameters:,} parameters: {sizes}"),
        ("layers", f"{layers}, embeddings tied: {c.tie_embeddings}"),
    ]


def _hub_datasets(data: dict[str, Any]) -> list[str]:
    """The Hub data set the run trained on, if its corpus is one (`data.hub.HubCorpus`)."""
    corpus = data.get("corpus")
    if isinstance(corpus, dict) and str(corpus.get("_target_", "")).endswith(".HubCorpus"):
        return [corpus["name"]]
    return []


def _eval_results(record: RunRecord) -> list[EvalResult]:
    """BLEU and chrF of the nmt-evaluate report as model-index entries, signatures as config."""
    report = record.report
    if report is None:
        return []
    test_set = report.get("data") or Path(str(report.get("src"))).name
    split = report.get("split")
    return [
        EvalResult(
            task_type="translation",
            dataset_type=test_set,
            dataset_name=f"{test_set} {split}" if split else test_set,
            dataset_split=split,
            metric_type=metric_type,
            metric_name=name,
            metric_value=round(report[name]["score"], 2),
            metric_config=report[name]["signature"],
        )
        for name, metric_type in INDEXED_METRICS.items()
        if name in report
    ]


def _checkpoints(record: RunRecord) -> str:
    names = ", ".join(p.name for p in record.checkpoints)
    where = "the average of " if len(record.checkpoints) > 1 else ""
    step = f", step {record.step}" if record.step is not None else ""
    epoch = f", epoch {record.epoch}" if record.epoch is not None else ""
    return f"{where}{names}{step}{epoch}"


def _data(data: dict[str, Any]) -> str:
    corpus = data.get("corpus")
    if not isinstance(corpus, dict):
        return "unknown (no `.hydra/config.yaml` beside `checkpoints/`)"
    settings = ", ".join(f"{k}={v}" for k, v in corpus.items() if k != "_target_")
    bpe = data.get("vocab_size")
    return f"`{corpus.get('_target_', '?')}` ({settings}); BPE vocab_size={bpe}"


def _hardware(trainer: dict[str, Any]) -> str:
    if not trainer:
        return "unknown"
    keys = ("accelerator", "devices", "num_nodes", "precision", "strategy")
    return ", ".join(f"{k}={trainer[k]}" for k in keys if k in trainer)


def _update(plan: dict[str, Any]) -> str:
    return (
        f"{plan['world_size']} process(es) x {plan['accumulate_grad_batches']} batch(es) of "
        f"{plan['max_tokens']} tokens a side ({plan['tokens_per_update']} at most), from the "
        "checkpoint's run plan"
    )


def _scores(record: RunRecord) -> list[str]:
    """BLEU and chrF with their sacreBLEU signatures, from nmt-evaluate's report.json."""
    if record.report is None:
        return [
            "No `nmt-evaluate` report beside the checkpoint: run `nmt-evaluate CKPT --src ... "
            "--ref ...` and export again to have its scores here."
        ]
    report = record.report
    lines = [
        f"`nmt-evaluate` on `{report.get('src')}` ({report.get('sentences')} sentences), "
        f"search {json.dumps(report.get('search'))}:",
        "",
    ]
    # A list, not a table: signatures hold "|".
    for name in ("BLEU", "chrF2", "BLEU-lc"):
        if name in report:
            lines.append(f"- {name} {report[name]['score']:.2f}, `{report[name]['signature']}`")
    return lines
