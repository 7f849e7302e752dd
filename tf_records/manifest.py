"""A records folder's `manifest.json`, for every family's writer and reader.

The file's name and version, the sha256 the manifest records of each shard
(and of the vocabulary), reading it with a clear error, checking that it
holds the reader's kind of records and that its shards are whole (framing
and counts, optionally their sha256), and `pipeline_share`, which deals the
listed files out to the input pipelines. No TensorFlow: the writers' worker
processes and the training commands' checks import it as it is.
"""

import dataclasses
import hashlib
import json
import os

MANIFEST_FILE = "manifest.json"
MANIFEST_VERSION = 1


class KindSchema:
    """Base of a family's frozen dataclass schema that names its `kind` (a
    `ClassVar`): the manifest's `"schema"` entry and back."""

    def to_manifest(self):
        """The manifest's `"schema"` entry."""
        return {"kind": self.kind, **dataclasses.asdict(self)}

    @classmethod
    def from_manifest(cls, schema):
        """The inverse of `to_manifest` (the kind is checked by the reader)."""
        return cls(**{k: v for k, v in schema.items() if k != "kind"})


def file_sha256(path):
    """Hex sha256 of a file, as the manifest records each shard's."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def checked_vocab_files(vocab_files, what):
    """`vocab_files` (a path or a list of them) as a list of existing files;
    `ValueError` if there is none, saying `what` to pass, or one is missing."""
    if isinstance(vocab_files, str):
        vocab_files = [vocab_files]
    if not vocab_files:
        raise ValueError(f"`vocab_files` is empty: pass {what}.")
    for path in vocab_files:
        if not os.path.isfile(path):
            raise ValueError(f"Vocabulary file {path} does not exist.")
    return vocab_files


def vocab_file_entries(vocab_files):
    """The manifest's `"vocab_files"`: each file's name and sha256, so data
    and model can be matched."""
    return [{"file": os.path.basename(p), "sha256": file_sha256(p)} for p in vocab_files]


def check_batches_per_shard(batches_per_shard):
    """`ValueError` unless `batches_per_shard` is a positive integer."""
    if isinstance(batches_per_shard, bool) or not isinstance(batches_per_shard, int) or (
            batches_per_shard < 1):
        raise ValueError("`batches_per_shard` must be a positive integer. Received: "
                         f"batches_per_shard={batches_per_shard!r}.")


def check_vocab_fits(folder, vocab_size, model_config):
    """`ValueError` if the records in `folder`, tokenized with `vocab_size`
    ids, hold more ids than `model_config.vocab_size` (when it has one)."""
    model_vocab_size = getattr(model_config, "vocab_size", None)
    if model_vocab_size is not None and vocab_size > model_vocab_size:
        raise ValueError(
            f"{folder} was tokenized with vocab_size={vocab_size}, more ids than the "
            f"model's vocab_size={model_vocab_size}.")


def shard_paths(manifest):
    """The paths of the manifest's shards, in its order."""
    return [os.path.join(manifest["folder"], s["file"]) for s in manifest["shards"]]


def read_manifest(path):
    """`manifest.json` (or its folder) -> dict; clear error if missing/bad."""
    if os.path.isdir(path):
        path = os.path.join(path, MANIFEST_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
    except FileNotFoundError:
        raise ValueError(f"No manifest at {path}: was the writer interrupted?") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not valid JSON: {e}") from None
    manifest["folder"] = os.path.dirname(os.path.abspath(path))
    return manifest


def check_kind(manifest, kind):
    """Raises `ValueError` unless the records are of `kind` ("bert", "lm", "elmo").

    BERT's manifests name no kind: a manifest without one is "bert".
    """
    found = manifest["schema"].get("kind", "bert")
    if found != kind:
        readers = {"bert": "tf_records.bert.reader.pretraining_dataset",
                   "lm": "tf_records.gpt.reader.lm_dataset",
                   "elmo": "tf_records.elmo.reader.elmo_dataset",
                   "xlnet": "tf_records.xlnet.reader.xlnet_pretraining_dataset"}
        raise ValueError(
            f"{manifest['folder']} holds {found!r} records, but this reader reads {kind!r} "
            f"records. Read them with {readers.get(found, f'a {found!r} reader')}.")


def count_records(path):
    """Whole records in a TFRecord file, from the record headers alone (12
    bytes per record, no payload read); `ValueError` naming a truncated file."""
    try:
        size = os.path.getsize(path)
    except FileNotFoundError:
        raise ValueError(f"Shard {path} is missing.") from None
    count, offset = 0, 0
    with open(path, "rb") as f:
        while offset < size:
            header = f.read(8)
            if len(header) < 8:
                break
            length = int.from_bytes(header, "little")
            offset += 8 + 4 + length + 4  # length, its CRC, data, data CRC
            if offset > size:
                raise ValueError(
                    f"Shard {path} is truncated: record {count} ends at byte {offset}, "
                    f"the file has {size}.")
            f.seek(offset)
            count += 1
    if offset != size:
        raise ValueError(f"Shard {path} is truncated: {size - offset} bytes after record {count}.")
    return count


def check_shard_framing(manifest):
    """Checks each shard's record framing and count against the manifest, so
    a truncated or cut-short shard is named before training instead of
    failing later with TensorFlow's "truncated record" error, which names no
    file."""
    for shard in manifest["shards"]:
        path = os.path.join(manifest["folder"], shard["file"])
        count = count_records(path)
        if count != shard["records"]:
            raise ValueError(
                f"Shard {path} holds {count} whole records; the manifest says {shard['records']}.")


def verify_shards(manifest):
    """Checks every shard's sha256 against the manifest; names a bad file."""
    for shard in manifest["shards"]:
        path = os.path.join(manifest["folder"], shard["file"])
        if not os.path.exists(path):
            raise ValueError(f"Shard {path} listed in the manifest is missing.")
        if file_sha256(path) != shard["sha256"]:
            raise ValueError(f"Shard {path} is corrupt: its sha256 differs from the manifest's.")


def pipeline_share(files, counts, input_context):
    """This input pipeline's files (and their record counts, if known): every
    `n`-th of the ordered list, so pipelines read disjoint files."""
    n, i = input_context.num_input_pipelines, input_context.input_pipeline_id
    if len(files) < n:
        raise ValueError(
            f"{len(files)} files cannot feed {n} input pipelines: each pipeline needs "
            "its own files. Write more shards (smaller --documents_per_block).")
    return files[i::n], counts and counts[i::n]
