"""Lightning and Hydra stay at the edges, stated as rules about folders, so that a new module is
covered where it lands: what a user who only translates or exports runs imports neither, and the
model reads as the paper, without search."""

import json
import subprocess
import sys
import tomllib

import pytest

from helpers.checkpoint_files import SENTENCES, write_checkpoint
from helpers.import_graph import SRC, graph, modules, third_party_imports
from transformer_nmt.data.tokenizer import BPETokenizer

TRAINER = ("lightning", "pytorch_lightning", "hydra")
EDGE = (*TRAINER, "omegaconf")  # Hydra's config library goes with it
# The wings a translation or an export runs in.
INFERENCE_WINGS = ("model", "decoding", "inference", "evaluation", "export", "runtime")
# The only module there that reads a Hydra config: the model card quotes the run's
# `.hydra/config.yaml` and command, which need OmegaConf to load and resolve (no trainer).
ALLOWED = {"transformer_nmt.export.card": {"omegaconf"}}
# The commands that train; every other nmt-* command only translates, scores or exports.
TRAINING_COMMANDS = {"nmt-train", "nmt-pipeline"}

KNOWN = modules()


def in_wings(wings: tuple[str, ...]) -> list[str]:
    return sorted(name for name, module in KNOWN.items() if module.wing in wings)


def reached_from(name: str) -> set[str]:
    """The package's modules `name` imports, directly or through others (itself included)."""
    edges, seen, todo = graph(KNOWN), {name}, [name]
    while todo:
        for target in edges[todo.pop()] - seen:
            seen.add(target)
            todo.append(target)
    return seen


@pytest.mark.parametrize("name", in_wings(INFERENCE_WINGS))
def test_inference_wings_import_neither_lightning_nor_hydra(name):
    """Also not through another module of the package (data/, checkpoint.py...) they import."""
    found = {
        (reached, package)
        for reached in reached_from(name)
        for package in third_party_imports(KNOWN[reached]) & set(EDGE)
        if package not in ALLOWED.get(reached, set())
    }
    assert not found, f"{name} imports (module, package): {sorted(found)}"


@pytest.mark.parametrize("name", in_wings(("model",)))
def test_the_model_imports_no_search(name):
    """model/ is the networks, as the paper describes them; search builds on it, not in it."""
    outside = {t for t in graph(KNOWN)[name] if KNOWN[t].wing not in ("model",)}
    assert outside <= {"transformer_nmt"}, f"{name} imports {sorted(outside)}"


def test_the_rules_see_a_new_module_and_a_late_import(tmp_path):
    """A module no list names, importing Lightning inside a function, is found."""
    package = tmp_path / "transformer_nmt"
    (package / "inference").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "inference" / "__init__.py").write_text("")
    (package / "inference" / "new.py").write_text("def f():\n    import lightning.pytorch\n")
    (new,) = [m for m in modules(package).values() if m.path.name == "new.py"]
    assert new.wing == "inference" and "lightning" in third_party_imports(new)


def loaded_after(code: str, packages: tuple[str, ...], *args: str) -> list[str]:
    """Which of `packages` a fresh interpreter has loaded after running `code` with `args`."""
    loaded = (
        "import json, sys; print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        f"{packages!r})))"
    )
    run = [sys.executable, "-c", f"{code}\n{loaded}", *args]
    out = subprocess.run(run, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.splitlines()[-1])


def translating_commands() -> list[str]:
    """The modules of the nmt-* commands that do not train, as pyproject installs them."""
    scripts = tomllib.loads((SRC.parents[1] / "pyproject.toml").read_text())["project"]["scripts"]
    return sorted(
        target.partition(":")[0]
        for command, target in scripts.items()
        if command not in TRAINING_COMMANDS
    )


@pytest.mark.slow  # imports every exporter's runtime (transformers, ctranslate2)
def test_translating_a_checkpoint_imports_neither_lightning_nor_hydra(tmp_path):
    tokenizer = BPETokenizer.train(SENTENCES, vocab_size=280, min_frequency=1)
    path = write_checkpoint(tmp_path / "tiny.ckpt", tokenizer)
    code = "\n".join(
        [
            *(f"import {module}" for module in in_wings(INFERENCE_WINGS) + translating_commands()),
            "from transformer_nmt import Translator",
            "(text,) = Translator.from_checkpoint(sys.argv[1], 'cpu').translate(['one two three'])",
            "assert isinstance(text, str)",
        ]
    )
    assert loaded_after(f"import sys\n{code}", TRAINER, str(path)) == []
