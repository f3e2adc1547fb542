"""`nmt-export ... --push-to-hub REPO`: upload a finished export folder to the Hugging Face Hub."""

from pathlib import Path

from huggingface_hub import HfApi
from huggingface_hub.errors import HTTPError

from transformer_nmt.export import ExportError


def push_to_hub(folder: Path, repo_id: str, private: bool, what: str) -> str:
    """Create `repo_id` if needed and upload every file of `folder` in one commit; its URL.

    The token is huggingface_hub's: HF_TOKEN, or the one `hf auth login` saved. The folder is
    complete before the upload starts, so a failed upload loses nothing: it can be retried.
    """
    api = HfApi()
    try:
        repo = api.create_repo(repo_id, private=private, exist_ok=True)
        api.upload_folder(
            repo_id=repo.repo_id,
            folder_path=folder,
            commit_message=f"Upload {what} exported by transformer-nmt",
        )
    except (HTTPError, OSError) as e:  # no network, no or a wrong token, a refused name
        raise ExportError(
            f"the push to {repo_id} failed: {e}. Check the network and the token (HF_TOKEN or "
            f"`hf auth login`); the export is complete in {folder}, so retry the push with "
            f"`hf upload {repo_id} {folder}`"
        ) from e
    return repo.url
