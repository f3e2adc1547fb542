"""Fine-tuning's `init.keep=[data]`: the run goes on with the parent's epoch where it stopped.

Only the parent's batches make that position mean anything: an epoch's batches follow from the
training pairs, their segmentation and length cut, the batch budget, the process count and the
seed, so each is checked against what the parent checkpoint recorded.
"""

from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, ListConfig, OmegaConf

from transformer_nmt.data.datamodule import TranslationDataModule
from transformer_nmt.data.languages import Languages
from transformer_nmt.data.multilingual import MultilingualDataModule, train_fingerprint
from transformer_nmt.training.plan.batch_size import device_count
from transformer_nmt.training.plan.resume import ResumePoint
from transformer_nmt.training.plan.run_plan import planned_update

# Data settings that cut or order an epoch's batches, as the parent's datamodule recorded them.
BATCHING = ("src_lang", "tgt_lang", "max_len", "bpe_dropout", "seed")
# A multilingual parent's too: which directions, how framed, and how each epoch draws them.
MULTILINGUAL = ("languages", "directions", "exclude", "tag_side", "temperature")


def position_problems(cfg: DictConfig, checkpoint: dict[str, Any]) -> list[str]:
    """Settings under which the parent's epoch would hold other batches than those it trained,
    or under which `trainer.max_epochs` leaves it nothing to train."""
    recorded = checkpoint.get("datamodule_hyper_parameters") or {}
    plan = checkpoint.get("run_plan") or {}
    kinds = (TranslationDataModule, MultilingualDataModule)  # the datamodule's state, by class
    data = next((checkpoint[k.__qualname__] for k in kinds if k.__qualname__ in checkpoint), {})
    if not (recorded and plan and "train_fingerprint" in data):
        return [
            "init.keep names data, but the parent checkpoint does not record which batches it "
            "trained (its training data, batch budget and process count): leave data out of "
            "init.keep"
        ]
    train = run_fingerprint(cfg.data)
    world_size = device_count(cfg.trainer) * cfg.trainer.get("num_nodes", 1)
    # As the run plans it: data.tokens_per_update may shrink the budget; auto measures anew.
    max_tokens = planned_update(cfg, world_size, ResumePoint(None))[1] or cfg.data.max_tokens
    ours = {
        "data.corpus's training split": (train, data["train_fingerprint"]),
        **{f"data.{name}": (cfg.data[name], recorded[name]) for name in BATCHING},
        **{
            f"data.{name}": (_plain(cfg.data.get(name)), recorded.get(name))
            for name in MULTILINGUAL
            if "languages" in recorded or cfg.data.get("languages")
        },
        "data.max_tokens": (max_tokens, plan["max_tokens"]),
        "trainer.devices x trainer.num_nodes": (world_size, plan["world_size"]),
    }
    differ = [
        f"{name}={mine} (the parent's: {theirs})"
        for name, (mine, theirs) in ours.items()
        if mine != theirs
    ]
    if cfg.init.extend_vocab:
        differ.append("init.extend_vocab=true (segments the pairs anew)")
    problems = []
    if differ:
        problems.append(
            "init.keep names data, which goes on with the parent's epoch where it stopped, but "
            f"these give that epoch other batches: {'; '.join(differ)}; match the parent's, or "
            "leave data out of init.keep"
        )
    if problem := epoch_problem(checkpoint["epoch"], cfg.trainer.get("max_epochs")):
        problems.append(problem)
    return problems


def run_fingerprint(data: DictConfig) -> str:
    """This run's training pairs, identified as its datamodule records them."""
    corpus = instantiate(data.corpus)
    if not data.get("languages"):
        return corpus.fingerprint("train", data.src_lang, data.tgt_lang)
    languages = Languages.from_config(
        data.languages,
        data.get("directions"),
        data.get("exclude") or (),
        data.get("tag_side") or "target",
    )
    return train_fingerprint(corpus, languages.directions, data.get("max_train_pairs"))


def _plain(value: Any) -> Any:
    """A config value as a checkpoint records it: lists as lists."""
    return OmegaConf.to_container(value) if isinstance(value, ListConfig) else value


def epoch_problem(epoch: int, max_epochs: int | None) -> str | None:
    """A kept epoch that leaves `trainer.max_epochs` nothing to train."""
    if max_epochs is None or max_epochs < 0 or max_epochs > epoch:
        return None
    return (
        f"init.keep names data, and the parent is in epoch {epoch}, so trainer.max_epochs="
        f"{max_epochs} trains nothing: set trainer.max_epochs above {epoch}, or -1"
    )
