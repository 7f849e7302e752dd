"""Checkpoints by name: a Hugging Face Hub repository id -> a local folder.

`resolve_checkpoint("bert-base-uncased")` (or `"google-bert/bert-base-uncased"`,
`"org/name@revision"`) gives the folder of that repository's files, through
`huggingface_hub`: downloaded when online, read from the local cache when
offline (`HF_HUB_OFFLINE=1`) or when the download fails. A path that exists
here is always a path, never a name. We use `huggingface_hub` rather than
our own downloader: its cache is the one `transformers` and keras-hub users
already have filled, and it handles revisions, resumes and offline mode.
"""

import os
import re

# A repository id: "name" (the Hub's legacy ids, e.g. bert-base-uncased) or
# "owner/name", optionally "@revision" (a branch, tag or commit).
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?(@[\w./-]+)?$")

# The files a checkpoint of any family needs: weights, config, vocabularies
# (vocab.txt, vocab.json + merges.txt, spiece.model), tokenizer settings.
# Not pytorch_model.bin, tf_model.h5, ONNX or flax files: we read safetensors.
ALLOW_PATTERNS = ("*.json", "*.safetensors", "*.txt", "*.model")


def is_repo_id(text):
    """Whether `text` reads as a Hub repository id (and not as a path)."""
    return bool(_REPO_ID.match(text)) and not text.startswith((".", "/")) and (
        not text.endswith((".keras", ".json", ".txt", ".ckpt")))


def _exists_here(path):
    return os.path.exists(path) or os.path.exists(path + ".index")  # a Google prefix


def resolve_checkpoint(path_or_name):
    """A local path for `path_or_name`.

    An existing file, folder or Google checkpoint prefix is returned as it
    is. A Hub repository id resolves to its snapshot folder in the Hugging
    Face cache (`huggingface_hub.snapshot_download`). Anything else is
    returned unchanged, for the loader to report as missing.

    Raises:
        ValueError: a name that cannot be resolved, saying which name, which
            cache folder was searched and how to fill it.
    """
    path_or_name = os.fspath(path_or_name)  # a pathlib.Path too
    if not path_or_name or _exists_here(path_or_name) or not is_repo_id(path_or_name):
        return path_or_name
    # lazy: the Hub's client loads only when a checkpoint is named by a Hub id
    import huggingface_hub
    from huggingface_hub import constants  # lazy: as above
    from huggingface_hub.errors import LocalEntryNotFoundError  # lazy: as above

    repo_id, _, revision = path_or_name.partition("@")
    offline = constants.HF_HUB_OFFLINE
    try:
        return huggingface_hub.snapshot_download(
            repo_id, revision=revision or None, allow_patterns=list(ALLOW_PATTERNS),
            local_files_only=offline)
    except LocalEntryNotFoundError:
        pass  # offline, or online and unreachable: say so below
    except Exception as e:  # noqa: BLE001 (the Hub's errors: not found, gated, bad revision)
        raise ValueError(f"{path_or_name!r} is not a path here, and the Hugging Face Hub "
                         f"could not give it: {type(e).__name__}: {e}") from None
    why = "HF_HUB_OFFLINE=1 is set" if offline else "the Hub could not be reached"
    raise ValueError(
        f"{path_or_name!r} is not a path here and not in the Hugging Face cache "
        f"{constants.HF_HUB_CACHE} ({why}). Fill the cache on a machine with the network "
        f"(`hf download {repo_id}`{f' --revision {revision}' if revision else ''}) "
        "and copy it here (or point HF_HUB_CACHE at it), or pass the checkpoint's folder.")
