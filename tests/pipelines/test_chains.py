"""Back-translation and distillation end to end on the toy task: each stage interrupted and
resumed, a rerun that does nothing, a changed factor that retrains only the last stage, and bad
inputs refused before any stage runs."""

import logging
import re
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from helpers.fail_at_step import Interrupted, fail_at
from helpers.hydra_compose import ROOT
from helpers.quick_toy_run import quick_toy_run
from transformer_nmt.cli import pipeline
from transformer_nmt.data.tokenizer import BPETokenizer
from transformer_nmt.data.toy import ToyCorpus
from transformer_nmt.decoding.sampling import Sampling
from transformer_nmt.pipelines import translation
from transformer_nmt.pipelines.chains import (
    BackTranslation,
    Distillation,
    backtranslate,
    distill,
)
from transformer_nmt.pipelines.stages import DONE
from transformer_nmt.pipelines.training import best_checkpoint
from transformer_nmt.pipelines.translation import Decoding
from transformer_nmt.training.plan.config_checks import ConfigError

pytestmark = pytest.mark.slow

STEPS = 4
TAG = "<BT>"


def overrides(tmp: Path) -> list[str]:
    return [
        *quick_toy_run(STEPS),
        f"paths.root_dir={ROOT}",
        f"paths.cache_dir={tmp}/cache",
        "data.corpus.num_train=60",
        "logger=none",
        "callbacks.checkpoints.every_n_steps=1",  # last.ckpt at every step: a resume point
        *fail_at(2),
    ]


def german(tmp: Path, lines: int = 24) -> Path:
    """Target-side (German) text the toy corpus's training pairs do not hold."""
    path = tmp / "mono.de"
    pairs = ToyCorpus(num_train=lines, num_val=0, num_test=0, seed=7).read("train", "en", "de")
    path.write_text("".join(f"{de}\n" for _, de in pairs))
    return path


def fail_after(stream, n: int):
    """Translator.stream that fails after `n` sentences."""

    def failing(translator, *args, **kwargs):
        for k, result in enumerate(stream(translator, *args, **kwargs)):
            if k == n:
                raise Interrupted("translation failed on purpose")
            yield result

    return failing


def folder(work: Path, stage: str) -> Path:
    (found,) = work.glob(f"{stage}-*")
    return found


def resumed(stage: Path) -> bool:
    """Whether the run went on after its failure from the step it reached (checkpoints of the
    steps before the failure predate it), not from the start."""
    failed = (stage / "failed_once").stat().st_mtime_ns
    before = [stage / "checkpoints" / f"step{n}.ckpt" for n in (1, 2)]
    after = stage / "checkpoints" / f"step{STEPS}.ckpt"
    return all(p.stat().st_mtime_ns < failed for p in before) and after.stat().st_mtime_ns > failed


def stages_run(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage().split(":")[0] for r in caplog.records if ": runs in" in r.getMessage()]


@pytest.fixture(scope="module")
def bt(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Back-translation run to the end through a failure in each stage; what each start did."""
    tmp = tmp_path_factory.mktemp("bt")
    spec = BackTranslation(
        work=tmp / "work",
        monolingual=german(tmp),
        overrides=overrides(tmp),
        decoding=Decoding(max_len_b=5, max_tokens=64, sampling=Sampling(seed=3)),
        tag=TAG,
        synthetic_factor=2,
    )
    seen = {}
    with pytest.raises(Interrupted):  # reverse training, at step 2
        backtranslate(spec)
    reverse = folder(spec.work, "reverse")
    seen["reverse interrupted"] = (
        (reverse / "checkpoints/last.ckpt").is_file(),
        (reverse / DONE).exists(),
    )
    patch = pytest.MonkeyPatch()
    patch.setattr(translation.Translator, "stream", fail_after(translation.Translator.stream, 3))
    with pytest.raises(Interrupted):  # reverse resumed and done; the translation fails
        backtranslate(spec)
    patch.undo()
    bt_folder = folder(spec.work, "backtranslate")
    seen["translation interrupted"] = sorted(p.name for p in bt_folder.iterdir())
    with pytest.raises(Interrupted):  # translated; forward training fails at step 2
        backtranslate(spec)
    result = backtranslate(spec)
    return {"spec": spec, "seen": seen, "result": result, "tmp": tmp}


def test_backtranslation_resumes_each_stage_and_trains_on_tagged_synthetic_pairs(bt: dict):
    spec, seen = bt["spec"], bt["seen"]
    assert seen["reverse interrupted"] == (True, False)
    assert seen["translation interrupted"] == []  # no partial output, not marked done
    checkpoint = torch.load(bt["result"], weights_only=True)
    assert checkpoint["global_step"] == STEPS
    reverse = torch.load(folder(spec.work, "reverse") / "checkpoints/last.ckpt", weights_only=True)
    assert reverse["global_step"] == STEPS
    assert resumed(folder(spec.work, "reverse")) and resumed(folder(spec.work, "train"))
    synthetic = folder(spec.work, "synthetic")
    sources = (synthetic / "train.en").read_text().splitlines()
    targets = (synthetic / "train.de").read_text().splitlines()
    assert targets == spec.monolingual.read_text().splitlines()
    assert len(sources) == len(targets) and all(s.startswith(f"{TAG} ") for s in sources)
    config = OmegaConf.load(folder(spec.work, "train") / ".hydra/config.yaml")
    corpora = config.data.corpus.corpora
    assert corpora.synthetic.factor == 2 and corpora.real.factor == 1
    assert corpora.synthetic.corpus.path == str(synthetic)


def test_a_translation_stage_logs_its_progress_off_a_terminal(
    bt: dict, caplog: pytest.LogCaptureFixture
):
    reverse = folder(bt["spec"].work, "reverse") / "checkpoints/last.ckpt"
    work = bt["tmp"] / "logged"
    work.mkdir()
    with caplog.at_level(logging.INFO):
        translation.translate_stage(work, "t", [[reverse]], german(work, lines=5), Decoding())
    assert "Stage t: done, 5 sentences in" in caplog.text


def test_a_training_stage_gives_the_best_checkpoint_by_validation_or_else_the_last(tmp_path):
    last = tmp_path / "last.ckpt"
    for name in ("last.ckpt", "step4.ckpt", "step6.ckpt"):
        (tmp_path / name).touch()
    assert best_checkpoint(last, "val/bleu") == last  # no validation ran
    (tmp_path / "step3-bleu12.50.ckpt").touch()
    assert best_checkpoint(last, "val/bleu") == tmp_path / "step3-bleu12.50.ckpt"
    assert best_checkpoint(last, None) == last


def test_backtranslation_rerun_does_nothing_and_a_new_factor_trains_again_alone(
    bt: dict, caplog: pytest.LogCaptureFixture
):
    spec = bt["spec"]
    last = bt["result"]
    before = last.stat().st_mtime_ns
    with caplog.at_level(logging.INFO, logger="transformer_nmt.pipelines"):
        assert backtranslate(spec) == last
    assert stages_run(caplog) == [] and last.stat().st_mtime_ns == before
    caplog.clear()
    changed = BackTranslation(**{**spec.__dict__, "synthetic_factor": 1.5})
    with caplog.at_level(logging.INFO, logger="transformer_nmt.pipelines"):
        with pytest.raises(Interrupted):  # a new training stage (failing once at step 2)
            backtranslate(changed)
    assert stages_run(caplog) == ["Stage train"]
    assert len(list(spec.work.glob("train-*"))) == 2


def test_distillation_trains_the_student_on_the_teachers_beam_output(bt: dict):
    tmp = bt["tmp"]
    periodic = bt["result"].parent
    # An ensemble of the last checkpoint and the average of two periodic ones.
    teacher = [[bt["result"]], [periodic / "step2.ckpt", periodic / "step3.ckpt"]]
    spec = Distillation(
        work=tmp / "kd",
        teacher=teacher,
        overrides=[*overrides(tmp), "model.N_dec=1"],  # a student: its decoder one layer deep
        decoding=Decoding(beam_size=2, max_len_b=5, max_tokens=64),
        references_factor=1,
    )
    with pytest.raises(Interrupted):  # the student, at step 2
        distill(spec)
    student = distill(spec)
    trained = torch.load(student, weights_only=True)
    assert trained["global_step"] == STEPS
    assert (trained["model_config"]["N_enc"], trained["model_config"]["N_dec"]) == (2, 1)
    assert resumed(folder(spec.work, "train"))
    pairs = folder(spec.work, "distilled")
    references = ToyCorpus(num_train=60, num_val=100, num_test=100, seed=1234).read(
        "train", "en", "de"
    )
    assert (pairs / "train.en").read_text().splitlines() == [s for s, _ in references]
    distilled = (pairs / "train.de").read_text().splitlines()
    # What the teacher's beam search gives, line for line.
    expected = translation.Translator.from_ensemble(teacher).translate(
        [s for s, _ in references], beam_size=2, max_len_b=5, max_tokens=64
    )
    assert distilled == expected
    config = OmegaConf.load(folder(spec.work, "train") / ".hydra/config.yaml")
    assert set(config.data.corpus.corpora) == {"references", "distilled"}


def test_bad_inputs_are_refused_before_any_stage(bt: dict, tmp_path: Path):
    spec = bt["spec"]
    work = tmp_path / "work"
    english = tmp_path / "mono.txt"
    english.write_text("one two three\nfour five\n")
    cases = [
        (BackTranslation(work, spec.monolingual, spec.overrides, synthetic_factor=0), "> 0"),
        (BackTranslation(work, tmp_path / "missing.de", spec.overrides), "no such file"),
        (BackTranslation(work, english, spec.overrides), "reads as en"),
    ]
    cases.append(
        (BackTranslation(work, spec.monolingual, [*spec.overrides, "trainer.devices=2"]), "own")
    )
    named_en = tmp_path / "news.en"
    named_en.write_text("zwei drei\n")
    cases.append((BackTranslation(work, named_en, spec.overrides), "named as en"))
    for case, message in cases:
        with pytest.raises(ConfigError, match=message):
            backtranslate(case)
    other = tmp_path / "other"
    other.mkdir()
    for lang, text in (("en", "le chat noir dort\n"), ("de", "la maison bleue\n")):
        for split in ("train", "val", "test"):
            (other / f"{split}.{lang}").write_text(text * 3)
    student = [o for o in spec.overrides if not o.startswith("data.corpus.")]
    text = "transformer_nmt.data.bitext.TextCorpus"
    student += ["~data.corpus", f"+data.corpus={{_target_:{text},path:{other}}}"]
    with pytest.raises(ConfigError, match="vocabulary holds 0%"):
        distill(Distillation(work, [[bt["result"]]], student))
    foreign = torch.load(bt["result"], weights_only=True)
    foreign["tokenizer"] = BPETokenizer.train(["le chat noir dort"] * 3, 300, 1).to_str()
    torch.save(foreign, tmp_path / "foreign.ckpt")
    ensemble = [[bt["result"]], [tmp_path / "foreign.ckpt"]]
    with pytest.raises(ConfigError, match="foreign.ckpt has another vocabulary"):
        distill(Distillation(work, ensemble, spec.overrides))
    with pytest.raises(ConfigError, match="--references-factor=-1"):
        distill(Distillation(work, [[bt["result"]]], spec.overrides, references_factor=-1))
    argv = ["backtranslate", "--work", str(work), "--monolingual", str(spec.monolingual)]
    with pytest.raises(SystemExit, match="error: --synthetic-factor=0.0 must be > 0"):
        pipeline.main([*argv, "--synthetic-factor", "0", *spec.overrides])
    assert not work.exists()


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("model.d_modle=32", r"the overrides do not compose: Could not override 'model.d_modle'"),
        ("module.lr_factor=two", r"module.lr_factor='two' is not a number, what TranslationModule"),
        ("trainer.max_steps=ten", r"trainer.max_steps='ten' is not an integer, what Trainer takes"),
    ],
)
def test_a_stage_config_that_cannot_train_is_refused_in_one_line_before_any_stage(
    tmp_path: Path, bad: str, message: str
):
    work, teacher = tmp_path / "work", tmp_path / "teacher.ckpt"  # never read: refused first
    argv = ["distill", "--work", str(work), "--teacher", str(teacher), *overrides(tmp_path), bad]
    with pytest.raises(SystemExit) as refused:
        pipeline.main(argv)
    assert re.match(f"error: {message}", str(refused.value))
    assert "\n" not in str(refused.value) and not work.exists()
    mono = german(tmp_path)
    argv = ["backtranslate", "--work", str(work), "--monolingual", str(mono)]
    with pytest.raises(SystemExit, match=message):
        pipeline.main([*argv, *overrides(tmp_path), bad])
    assert not work.exists()
