"""`--push-to-hub`: everything up to the upload, which needs a network this machine lacks."""

import huggingface_hub
import pytest

from helpers.checkpoint_files import SENTENCES, write_checkpoint
from transformer_nmt.cli.export import main as export_main
from transformer_nmt.data.tokenizer import BPETokenizer
from transformer_nmt.export import hub_push


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    tokenizer = BPETokenizer.train(SENTENCES, vocab_size=280, min_frequency=1)
    return write_checkpoint(tmp_path_factory.mktemp("ckpt") / "last.ckpt", tokenizer, seed=3)


class RecordingHub(hub_push.HfApi):
    """The real client up to its two network calls, which record what they were given."""

    calls: list[tuple[str, dict]] = []

    def create_repo(self, repo_id, **options):
        self.calls.append(("create_repo", {"repo_id": repo_id, **options}))
        return huggingface_hub.RepoUrl(
            f"https://huggingface.co/{repo_id}", endpoint="https://huggingface.co"
        )

    def upload_folder(self, **options):
        files = sorted(p.name for p in options["folder_path"].iterdir())
        self.calls.append(("upload_folder", {**options, "files": files}))


def test_the_finished_folder_is_uploaded_to_the_named_repo(checkpoint, tmp_path, monkeypatch):
    monkeypatch.setattr(hub_push, "HfApi", RecordingHub)
    RecordingHub.calls = []
    out = tmp_path / "native"
    export_main(["safetensors", str(checkpoint), str(out), "--push-to-hub", "me/m", "--private"])
    (create, options), (upload, uploaded) = RecordingHub.calls
    assert (create, upload) == ("create_repo", "upload_folder")
    assert options == {"repo_id": "me/m", "private": True, "exist_ok": True}
    assert uploaded["repo_id"] == "me/m" and uploaded["folder_path"] == out
    # The card is written before the upload starts, so the Hub gets the whole folder.
    assert uploaded["files"] == ["README.md", "config.json", "model.safetensors", "tokenizer.json"]


def test_a_failed_push_names_the_retry_and_keeps_the_export(checkpoint, tmp_path, monkeypatch):
    # HF_HUB_OFFLINE as huggingface_hub read it at import: the real client refuses to connect.
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    out = tmp_path / "native"
    with pytest.raises(SystemExit, match=r"error: the push to me/m failed: .* offline mode") as e:
        export_main(["safetensors", str(checkpoint), str(out), "--push-to-hub", "me/m"])
    assert f"complete in {out}, so retry the push with `hf upload me/m {out}`" in str(e.value)
    assert (out / "model.safetensors").is_file() and (out / "README.md").is_file()


def test_private_without_a_push_is_refused(checkpoint, tmp_path, capsys):
    with pytest.raises(SystemExit):
        export_main(["safetensors", str(checkpoint), str(tmp_path / "o"), "--private"])
    assert "--private applies to --push-to-hub REPO only" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
