"""What `training.pretrain` checks before it writes anything: its flags, the
paths they name, and the records it is given against the flags.

Validate first, act second: a run refused here has made no folder and
written no `run_config.json`, so the corrected command starts normally in
the same `--output_dir`.

Records with a manifest say what they were written with (sequence length,
predictions per sequence, batch of streams, vocabulary, casing). A flag
left at its default takes the records' value, and says so; a flag given
with another value is refused, with both values named: training at the
records' length and exporting text signatures at the flag's would
silently disagree. Every shard is then checked against the manifest's
sha256 when the run starts (`verify_records`): 0.02-0.04 s for the main
job's 6 shards (21.3 MB; measured, warm page cache), against a ~5-minute
run, and a bad shard is named before training instead of by a TensorFlow
`DataLossError` that names no file mid-run. (Naming the shard at the first
bad record instead would cost nothing up front but needs the reader to
wrap every file; one CRC-checked tf.data pass over the same records takes
0.3 s, so checking first is the cheaper of the two.)
"""

import dataclasses
import glob
import os
import time

from tf_records.bert.chinese_words import check_segmenter
from tf_records.input_files import check_output_folder
from tf_records.input_files import check_text_files
from tf_records.input_files import match_files
from tf_records.manifest import check_shard_framing
from tf_records.manifest import file_sha256
from tf_records.manifest import read_manifest
from tf_records.manifest import verify_shards
from training.pretraining.common import checkpoint_interval
from training.pretraining.common import is_tfrecords
from training.pretraining.common import say
from training.pretraining.recipe import has_manifest
from training.pretraining.recipe import pretrain_recipe
from training.run.config_flags import check_at_least
from training.run.config_flags import check_one_of
from training.run.distribution import STRATEGIES

OPTIMIZERS = ("adamw", "lamb", "adagrad")
# Which flag each schema value fixes, per kind of records.
RECORD_FLAGS = {
    "bert": (("max_seq_length", "max_seq_length"),
             ("max_predictions_per_seq", "max_predictions_per_seq")),
    "lm": (("max_seq_length", "max_seq_length"),),
    "elmo": (("max_seq_length", "unroll_steps"), ("global_batch_size", "batch_size")),
    "xlnet": (("max_seq_length", "seq_len"), ("max_predictions_per_seq", "num_predict"),
              ("global_batch_size", "batch_size")),
}
WRITERS = {"bert": "tf_records.create_pretraining_data", "lm": "tf_records.create_lm_data",
           "elmo": "tf_records.create_elmo_data", "xlnet": "tf_records.create_xlnet_data"}


def check_flags(cfg, manifests=None):
    """`SystemExit` naming the first flag out of range, unknown, or naming a
    path that is not there. Reads only the flags' paths. `manifests`: the
    records' manifests (`read_records_manifests(cfg)`); None: read here."""
    check_at_least(cfg, {
        "vocab_size": 1, "max_seq_length": 2, "max_predictions_per_seq": 1, "dupe_factor": 1,
        "global_batch_size": 1, "shuffle_buffer": 0, "length_grouping": 0,
        "batch_slices": 0, "num_train_steps": 1, "checkpoint_every_steps": 1, "steps_per_execution": 1,
        "learning_rate": 0.0, "warmup_steps": 0, "weight_decay": 0.0, "clip_norm": 0.0,
        "gradient_accumulation_steps": 1, "data_workers": 1, "log_every_steps": 1,
        "fill_mask_examples": 0, "phase2_steps": 0, "phase2_max_seq_length": 2,
        "phase2_max_predictions_per_seq": 1})
    family = pretrain_recipe(cfg.model)
    if cfg.phase2_steps and not family.two_phases:
        raise SystemExit(f"--phase2_steps is BERT's two-phase schedule; --model={cfg.model} "
                         "trains at one length.")
    if cfg.phase2_steps and is_tfrecords(cfg.input):
        raise SystemExit(f"--phase2_steps writes both phases' records from text; --input="
                         f"{cfg.input} is TFRecords. Give the text, or run phase 2 as continued "
                         "pretraining (--init_checkpoint=<phase 1>/export/pretrainer.keras) on "
                         "records of its length.")
    if cfg.chinese_word_segmenter:
        if not family.whole_word_mask or not cfg.do_whole_word_mask:
            raise SystemExit(f"--chinese_word_segmenter={cfg.chinese_word_segmenter} groups the "
                             "characters BERT's --do_whole_word_mask masks together: give "
                             "--model=bert --do_whole_word_mask.")
        try:
            check_segmenter(cfg.chinese_word_segmenter)
        except (ImportError, ValueError) as e:
            raise SystemExit(f"--chinese_word_segmenter: {e}") from None
    if not cfg.learning_rate > 0:
        raise SystemExit(f"--learning_rate={cfg.learning_rate}: must be > 0.")
    if cfg.batch_slices > cfg.global_batch_size:
        raise SystemExit(f"--batch_slices={cfg.batch_slices}: at most --global_batch_size="
                         f"{cfg.global_batch_size} (a slice holds at least one row).")
    check_one_of(cfg, "strategy", STRATEGIES)
    check_one_of(cfg, "optimizer", OPTIMIZERS)
    total = cfg.num_train_steps * cfg.gradient_accumulation_steps
    interval = checkpoint_interval(
        total, cfg.checkpoint_every_steps * cfg.gradient_accumulation_steps)
    if interval % cfg.steps_per_execution:
        raise SystemExit(f"--steps_per_execution={cfg.steps_per_execution} must divide the "
                         f"checkpoint interval ({interval} batches; --checkpoint_every_steps="
                         f"{cfg.checkpoint_every_steps}).")
    for flag in ("input", "heldout_input"):
        _check_source(getattr(cfg, flag), flag, manifests)
    if cfg.heldout_input and is_tfrecords(cfg.input) and not is_tfrecords(cfg.heldout_input):
        raise SystemExit(f"--heldout_input={cfg.heldout_input} must be TFRecords when --input is "
                         f"({cfg.input}).")
    for flag in ("vocab_file", "config_file"):
        path = getattr(cfg, flag)
        if path and not os.path.isfile(path):
            raise SystemExit(f"--{flag}={path}: no such file.")
    if cfg.vocab_file:
        try:
            family.check_vocab_file(cfg.vocab_file)
        except ValueError as e:
            raise SystemExit(f"--vocab_file: {e}") from None
    check_output_folder(cfg.output_dir, marks=("run_config.json",))


def export_choice(cfg, explicit):
    """`cfg` with `saved_model` True only when the SavedModel is to be
    written (`--saved_model` and `saved_model` in `--export_formats`);
    `SystemExit` naming the flag for an unknown, repeated or uninstalled
    format, one the family does not convert to, or `--nosaved_model`
    typed beside an `--export_formats` that names saved_model.
    `explicit`: the flags given."""
    # lazy: importing keras_bert_impl loads TensorFlow, which check_flags does not need
    from keras_bert_impl.runtimes import formats as runtime_formats

    try:
        formats = runtime_formats.parse_formats(cfg.export_formats)
        runtime_formats.check_installed(formats)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    runtime_formats.check_family_formats(pretrain_recipe(cfg.model), cfg.model, cfg.export_formats)
    if "saved_model" in formats and not cfg.saved_model and "export_formats" in explicit:
        raise SystemExit(f"--export_formats={cfg.export_formats} names saved_model; "
                         "--nosaved_model writes none.")
    return dataclasses.replace(cfg, saved_model=cfg.saved_model and "saved_model" in formats)


def read_records_manifests(cfg):
    """{path: its manifest, or the error reading it raised (`ValueError`,
    `OSError`)} of `--input` and `--heldout_input`, each that names a
    records folder or its manifest.json: every file read once, for the
    checks and the run to share. An error is raised where a check asks
    for that manifest (`records_manifest`), in the checks' order."""
    manifests = {}
    for spec in (cfg.input, cfg.heldout_input):
        if spec and has_manifest(spec) and spec not in manifests:
            try:
                manifests[spec] = read_manifest(spec)
            except (ValueError, OSError) as e:
                manifests[spec] = e
    return manifests


def records_manifest(spec, flag, manifests=None):
    """The manifest of `spec` (a records folder or its manifest.json) from
    `manifests` (`read_records_manifests`), read here where they hold none;
    `SystemExit` "--<flag>=<spec>: <why>" where it could not be read."""
    found = manifests.get(spec) if manifests else None
    if found is None:
        try:
            found = read_manifest(spec)
        except ValueError as e:
            found = e
    if isinstance(found, ValueError):
        raise SystemExit(f"--{flag}={spec}: {found}") from None
    if isinstance(found, OSError):
        raise found
    return found


def _check_source(spec, flag, manifests=None):
    """Text globs must each match a file and hold some text; records must
    have a readable manifest (`manifests`: as `check_flags` takes them)."""
    if not spec:
        return
    if has_manifest(spec):
        records_manifest(spec, flag, manifests)
        return
    try:
        files = match_files(spec, f"--{flag}")
        if not is_tfrecords(spec):  # text: opened, and some text found in it
            check_text_files(files, f"--{flag}")
    except ValueError as e:
        raise SystemExit(str(e)) from None


def agree_with_records(cfg, defaults, explicit=None, manifests=None):
    """`cfg` with the records' settings where `--input` names records with a
    manifest: a flag not given (`explicit`: the names given on the command
    line; None: those that differ from their default) takes the records'
    value, said in a line; a given one that disagrees is refused, naming
    both. Also refuses records of another model, and a `--vocab_file` or
    held-out records whose vocabulary differs from the training records'.
    `defaults`: the settings with no flag given, for `cfg.model` (the caller
    makes them: this module does not import the command). `manifests`: the
    records' manifests (`read_records_manifests(cfg)`); None: read here."""
    manifest = _manifest(cfg.input, "input", manifests)
    if manifest is None:
        return cfg
    if explicit is None:
        explicit = {f.name for f in dataclasses.fields(cfg)
                    if getattr(cfg, f.name) != getattr(defaults, f.name)}
    kind = manifest["schema"].get("kind", "bert")
    wanted = pretrain_recipe(cfg.model).record_kind
    if kind != wanted:
        raise SystemExit(f"--input={cfg.input} holds {kind!r} records ({WRITERS.get(kind, '?')}); "
                         f"--model={cfg.model} reads {wanted!r} records ({WRITERS[wanted]}).")
    where = os.path.join(manifest["folder"], "manifest.json")
    pairs = [(flag, manifest["schema"][key], key) for flag, key in RECORD_FLAGS[kind]]
    if "do_lower_case" in manifest:  # BERT's records: the casing the text was tokenized with
        pairs.append(("do_lower_case", manifest["do_lower_case"], "do_lower_case"))
    # How BERT's records were made: a typed flag the written records cannot obey is refused.
    for section, flag in (("instance_config", "input_format"),
                          ("instance_config", "do_whole_word_mask"),
                          ("instance_config", "chinese_word_segmenter"),
                          ("writer_config", "dupe_factor")):
        if flag in manifest.get(section, {}):
            pairs.append((flag, manifest[section][flag], flag))
    changes = {}
    for flag, value, key in pairs:
        mine = getattr(cfg, flag)
        if mine == value:
            continue
        if flag in explicit:
            raise SystemExit(
                f"--{flag}={mine!r}, but --input={cfg.input} holds records written with "
                f"{key}={value!r} ({where}). Leave --{flag} out (the records' value is used) or "
                f"write the records again with {key}={mine!r}.")
        say(f"--{flag}: {value!r}, as the records in {cfg.input} were written ({key} in {where}); "
            f"the flag was left at its default {mine!r}.")
        changes[flag] = value
    _check_vocabulary(cfg, manifest)
    heldout = _manifest(cfg.heldout_input, "heldout_input", manifests)
    if heldout is not None:
        if heldout["schema"].get("kind", "bert") != kind:
            raise SystemExit(f"--heldout_input={cfg.heldout_input} holds "
                             f"{heldout['schema'].get('kind', 'bert')!r} records; --input holds "
                             f"{kind!r} records.")
        if _vocab_hashes(heldout) != _vocab_hashes(manifest):
            raise SystemExit(
                f"--heldout_input={cfg.heldout_input} was written with another vocabulary than "
                f"--input={cfg.input} (sha256 {_short(_vocab_hashes(heldout))} vs "
                f"{_short(_vocab_hashes(manifest))}).")
    return dataclasses.replace(cfg, **changes)


def _manifest(spec, flag, manifests):
    """The manifest `spec` names (`records_manifest`), None where it names
    none (text, a glob); `SystemExit` for one that is not our writers'."""
    if not spec or not has_manifest(spec):
        return None
    manifest = records_manifest(spec, flag, manifests)
    if "schema" not in manifest or "shards" not in manifest:
        raise SystemExit(f"--{flag}={spec}: the manifest has no schema or shards: not one of our "
                         "writers' manifests.")
    return manifest


def _vocab_hashes(manifest):
    """The sha256 of the vocabulary files the records were written with."""
    if "vocab_sha256" in manifest:
        return (manifest["vocab_sha256"],)
    return tuple(entry["sha256"] for entry in manifest.get("vocab_files", ()))


def _short(hashes):
    return "+".join(h[:12] for h in hashes)


def _check_vocabulary(cfg, manifest):
    """A `--vocab_file` must be one the records were written with."""
    if not cfg.vocab_file:
        return
    mine = file_sha256(cfg.vocab_file)
    theirs = _vocab_hashes(manifest)
    if theirs and mine not in theirs:
        size = _count_lines(cfg.vocab_file)
        raise SystemExit(
            f"--vocab_file={cfg.vocab_file} (sha256 {mine[:12]}, {size} lines) is not the "
            f"vocabulary the records in {cfg.input} were written with (sha256 {_short(theirs)}, "
            f"vocab_size {manifest.get('vocab_size')}): ids would mean other tokens. Pass that "
            "vocabulary, or write the records again with this one.")


def _count_lines(path):
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def verify_records(source, manifest=None):
    """Checks every shard of a records folder against its manifest (sha256
    and record framing), naming the first bad shard; prints what it
    checked and the time it took; returns the manifest. `manifest`:
    `source`'s, already read (None: read here). Does nothing for records
    without a manifest (returns None)."""
    if not source or not has_manifest(source):
        return None
    start = time.perf_counter()
    if manifest is None:
        manifest = read_manifest(source)
    try:
        verify_shards(manifest)
        check_shard_framing(manifest)
    except ValueError as e:
        raise SystemExit(f"Bad records: {e} Write them again.") from None
    size = sum(os.path.getsize(os.path.join(manifest["folder"], s["file"]))
               for s in manifest["shards"])
    say(f"Checked {len(manifest['shards'])} shards ({size / 1e6:.1f} MB) of {source} against "
        f"the manifest's sha256 ({time.perf_counter() - start:.1f} s)")
    return manifest


def check_bare_records(cfg, source):
    """BERT records without a manifest (a glob, e.g. the original script's
    output) are read with the flags' lengths: the first record of each
    file must have them, else `SystemExit` naming the file and both lengths
    now, not a parse error after the model is built."""
    if not source or os.path.isdir(source) or source.endswith(".json"):
        return
    if not pretrain_recipe(cfg.model).reads_bare_records:
        return
    import tensorflow as tf  # lazy: the flag checks of this module run before TensorFlow loads

    files = sorted(f for pattern in source.split(",") for f in glob.glob(pattern))
    for path in files:
        for raw in tf.data.TFRecordDataset(path).take(1):
            features = tf.train.Example.FromString(raw.numpy()).features.feature
            found = {"max_seq_length": len(features["input_ids"].int64_list.value)
                     if "input_ids" in features else None,
                     "max_predictions_per_seq": len(
                         features["masked_lm_positions"].int64_list.value)
                     if "masked_lm_positions" in features else None}
            for flag, length in found.items():
                if length != getattr(cfg, flag):
                    raise SystemExit(
                        f"--input={source}: {path} holds records of {flag} {length}; the run "
                        f"reads {getattr(cfg, flag)} (--{flag}). Give --{flag}={length}, or "
                        "records with a manifest (their lengths are then read from it).")
