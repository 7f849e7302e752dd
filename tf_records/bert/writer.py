"""Text files -> BERT's sharded pretraining TFRecords + `manifest.json`.

Streaming and parallel, deterministic for a seed whatever the number of
workers: documents are grouped, in file order, into blocks of
`documents_per_block`; each block is one shard, made by the original
algorithm (shuffle documents, `dupe_factor` passes, shuffle instances) with
random generators seeded by (seed, block index). Masking is vectorized over
the whole block (`masking.py`); with `InstanceConfig(original_rng=True)` it
uses the original's per-token draws instead and block 0 is seeded by the
seed alone, as the original, so a corpus that fits one block gives the
original script's exact records. Memory is bounded by the blocks in flight,
not the corpus. The one difference from the original script, which holds
the whole corpus: a "random next" segment is drawn from the same block
(thousands of documents), not from the whole corpus.

Every shard is written under a temporary name and renamed when complete; the
manifest is written last, also atomically, so a crash leaves no shard or
manifest that looks whole.
"""

import dataclasses
import importlib.util
import itertools
import json
import multiprocessing
import os
import random
import sys
import time

import numpy as np

from tf_records.bert.chinese_words import check_segmenter
from tf_records.bert.chinese_words import load_segmenter
from tf_records.bert.chinese_words import mark_line
from tf_records.bert.chinese_words import segmenter_version
from tf_records.bert.chinese_words import split_marks
from tf_records.bert.instances import SEGMENT_PAIR
from tf_records.bert.instances import InstanceConfig
from tf_records.bert.instances import VocabInfo
from tf_records.bert.instances import create_instances
from tf_records.bert.masking import mask_block
from tf_records.bert.masking import pack_instances
from tf_records.bert.masking import pack_predictions
from tf_records.bert.schema import RecordSchema
from tf_records.bert.schema import encode_examples
from tf_records.bert.sentence_packing import create_packed_instances
from tf_records.documents import documents_with_origin
from tf_records.input_files import check_input_files
from tf_records.input_files import line_bytes
from tf_records.manifest import MANIFEST_FILE
from tf_records.manifest import MANIFEST_VERSION
from tf_records.manifest import file_sha256
from tf_records.records_folder import transactional
from tf_records.records_folder import write_shard


@dataclasses.dataclass(frozen=True)
class WriterConfig:
    """Corpus-level settings: the original flags plus blocking and workers."""

    dupe_factor: int = 10
    random_seed: int = 12345
    do_lower_case: bool = True
    documents_per_block: int = 2000
    num_workers: int = 1

    def __post_init__(self):
        for name in ("dupe_factor", "documents_per_block", "num_workers"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"`{name}` must be an integer >= 1. Received: {name}={value!r}.")


def _blocks(paths, documents_per_block):
    """Blocks of documents, each with the (file, line) each document starts at."""
    block, origins = [], []
    for path, line_number, document in documents_with_origin(paths):
        block.append(document)
        origins.append((path, line_number))
        if len(block) == documents_per_block:
            yield block, origins
            block, origins = [], []
    if block:
        yield block, origins


def _write_block(job):
    """Worker: one block's records (`block_records`) -> its shard."""
    index, (block, origins), vocab_file, output_dir, instance_config, writer_config = job
    long_lines = []
    records, vocab_facts = block_records(index, block, vocab_file, instance_config, writer_config,
                                         long_lines=long_lines)
    shard = write_shard(output_dir, index, records)
    size = sum(line_bytes(line) for document in block for line in document)
    return {**shard, "documents": len(block), "bytes": size, "vocab": vocab_facts,
            "long_lines": [(origins[d][0], origins[d][1] + k, chars, tokens)
                           for d, k, chars, tokens in long_lines]}


def block_records(index, block, vocab_file, instance_config, writer_config, long_lines=None):
    """Block `index` (its documents, in corpus order) -> (its serialized
    examples in shard order, the vocabulary's manifest facts).

    A function of (seed, index, documents) alone: the local writer and the
    Beam pipeline (`beam_pretraining_data.py`) both call it, so the same
    blocks give the same shards byte for byte.

    `long_lines`: optional list; with segment pairs, each line too long for
    any instance (more than `max_seq_length - 3` tokens: all but that many
    are dropped, as the original drops them) is appended to it as
    `(document index in the block, line index in the document, characters,
    tokens)`.
    """
    tokenizer, vocab_info, vocab_facts = _tokenizer_state(vocab_file, writer_config.do_lower_case)
    ids = _line_ids(block, tokenizer, vocab_info, instance_config.chinese_word_segmenter)
    documents = _documents_of_ids(block, ids, instance_config, long_lines)
    # Block 0 is seeded exactly as the original seeds its one generator, so a
    # corpus that fits one block gives the original script's instances.
    seed = writer_config.random_seed if index == 0 else f"{writer_config.random_seed}-{index}"
    rng = random.Random(seed)
    make = create_instances if instance_config.input_format == SEGMENT_PAIR else (
        create_packed_instances)
    instances = make(documents, instance_config, vocab_info, writer_config.dupe_factor, rng)
    records = _encode_instances(instances, instance_config, vocab_info,
                                np.random.default_rng([writer_config.random_seed, index]))
    return records, vocab_facts


def _tokenizer_state(vocab_file, do_lower_case):
    """(BertTokenizer, VocabInfo, manifest facts) of the vocabulary, made
    once per worker process, not per block."""
    key = (vocab_file, do_lower_case)
    if key not in _WORKER_STATE:
        # The module, not the `keras_bert_impl.tokenizers` package.
        # lazy: a worker process imports no TensorFlow (see `_tensorflow_free_worker`)
        from keras_bert_impl.bert.bert_tokenizer import BertTokenizer

        tokenizer = BertTokenizer(vocab_file, do_lower_case=do_lower_case)
        _WORKER_STATE[key] = (tokenizer, VocabInfo.from_vocab(tokenizer.vocab),
                              _vocab_facts(tokenizer.vocab))
    return _WORKER_STATE[key]


def _line_ids(block, tokenizer, vocab_info, segmenter):
    """The token ids of every line of the block, in order; with a segmenter,
    the words' later characters as marked ids (chinese_words.py), to the masking."""
    lines = [line for document in block for line in document]
    if segmenter:
        segment = load_segmenter(segmenter)
        return [mark_line(tokenizer, line, segment, vocab_info.vocab_size) for line in lines]
    # The Python tokenizer: its ids are the graph tokenizer's (tests/test_graph_tokenizer.py)
    # and it needs no TensorFlow.
    return [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line)) for line in lines]


def _documents_of_ids(block, ids, instance_config, long_lines):
    """The block's documents as lists of their non-empty lines' ids; lines too
    long for any instance appended to `long_lines` (see `block_records`)."""
    documents, cursor = [], 0
    longest = instance_config.max_seq_length - 3  # [CLS] A [SEP] B [SEP]
    for d, document in enumerate(block):
        line_ids = ids[cursor:cursor + len(document)]
        if long_lines is not None and instance_config.input_format == SEGMENT_PAIR:
            long_lines += [(d, k, len(document[k]), len(s)) for k, s in enumerate(line_ids)
                           if len(s) > longest]
        segments = [s for s in line_ids if s]
        cursor += len(document)
        documents.append(segments)
    return documents


def _encode_instances(instances, instance_config, vocab_info, mask_rng):
    """The instances padded, masked (unless written unmasked or masked by the
    original's draws already) and serialized, in order."""
    input_ids, input_mask, segment_ids, next_labels = pack_instances(
        instances, instance_config.max_seq_length)
    word_continues = None
    if instance_config.chinese_word_segmenter:  # no marked id reaches a record
        input_ids, word_continues = split_marks(input_ids, vocab_info.vocab_size)
    if instance_config.unmasked or instance_config.original_rng:
        positions, label_ids, weights = pack_predictions(
            instances, instance_config.max_predictions_per_seq)
    else:
        input_ids, positions, label_ids, weights = mask_block(
            input_ids, input_mask, instance_config, vocab_info, mask_rng, word_continues)
    return list(encode_examples(input_ids, input_mask, segment_ids, positions,
                                label_ids, weights, next_labels))


class LongLines:
    """Lines too long for any instance, counted over the blocks; `report`
    prints their count and the first few (file:line), as one warning."""

    SHOWN = 3

    def __init__(self, max_seq_length):
        self.max_seq_length = max_seq_length
        self.count = 0
        self.first = []

    def add(self, found):
        self.count += len(found)
        self.first += found[:self.SHOWN - len(self.first)]

    def report(self, out=None):
        if not self.count:
            return
        out = out or sys.stderr
        print(f"Warning: {self.count:,} line(s) hold more tokens than fit one instance of "
              f"{self.max_seq_length} (one sentence per line is the format):", file=out)
        for path, line, chars, tokens in self.first:
            print(f"  {path}:{line}: a {chars:,}-character line ({tokens:,} tokens) becomes one "
                  f"instance of {self.max_seq_length} tokens; the rest is dropped (as the "
                  "original does).", file=out)
        if self.count > len(self.first):
            print(f"  ... and {self.count - len(self.first):,} more.", file=out)
        out.flush()


def check_vocab_file(vocab_file):
    """Raises `ValueError` naming `vocab_file` unless it is a readable
    vocab.txt with BERT's special tokens (read without TensorFlow, as
    `load_vocab` reads it: one token per line)."""
    if not vocab_file or not os.path.isfile(vocab_file):
        raise ValueError(f"Vocabulary file {vocab_file!r} does not exist.")
    try:
        with open(vocab_file, encoding="utf-8") as f:
            tokens = {line.strip() for line in f}
    except UnicodeDecodeError as e:
        raise ValueError(f"Vocabulary file {vocab_file} is not UTF-8 text ({e.reason}): "
                         "not a vocab.txt.") from None
    missing = [t for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]") if t not in tokens]
    if missing:
        raise ValueError(f"Vocabulary file {vocab_file} lacks {', '.join(missing)}: not a BERT "
                         "vocab.txt (one token per line, the special tokens included).")


def _vocab_facts(vocab):
    """What the manifest says of the vocabulary."""
    return {"vocab_size": max(vocab.values()) + 1,
            "special_ids": {name: vocab[f"[{name.upper()}]"] for name in ("pad", "cls", "sep", "mask")}}


def vocab_file_facts(vocab_file):
    """What the manifest says of the vocabulary in `vocab_file`: for a corpus
    of no shards. Otherwise the shards' workers read it, and the writing
    process never imports keras_bert_impl."""
    # lazy: keras_bert_impl's `__init__` imports TensorFlow, which the writing process needs only here
    from keras_bert_impl.bert.wordpiece import load_vocab

    return _vocab_facts(load_vocab(vocab_file))


_WORKER_STATE = {}


@transactional("bert")
def write_pretraining_data(input_files, vocab_file, output_dir, instance_config=None,
                           writer_config=None, progress=True):
    """Writes shards and `manifest.json` into `output_dir`; returns the manifest.

    `progress`: True prints counts to stderr as blocks complete; a callable
    is called instead after each block, in order, with
    `(documents, instances, text_bytes)` written so far (`text_bytes`: the
    UTF-8 lines read, what the corpus's size measures, for an ETA).
    """
    instance_config = instance_config or InstanceConfig()
    writer_config = writer_config or WriterConfig()
    # Everything is checked before the output folder is touched.
    _check_inputs(input_files, vocab_file, instance_config)
    blocks = _blocks(list(input_files), writer_config.documents_per_block)
    # Reads up to the first block: a file that cannot be read from its start
    # (a broken .gz, bytes that are not UTF-8) is named before the folder is
    # touched. No documents at all give a manifest of no shards (as Beam's).
    first = next(blocks, None)
    jobs = (
        (index, block, vocab_file, output_dir, instance_config, writer_config)
        for index, block in enumerate(itertools.chain([first] if first else [], blocks))
    )
    shards = _written_shards(jobs, writer_config.num_workers, progress,
                             instance_config.max_seq_length)
    vocab_facts = shards[0]["vocab"] if shards else vocab_file_facts(vocab_file)
    manifest = build_manifest(instance_config, writer_config, file_sha256(vocab_file),
                              vocab_facts, shards)
    manifest_path = os.path.join(output_dir, MANIFEST_FILE)
    tmp = os.path.join(output_dir, f".tmp-{MANIFEST_FILE}")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2)
    os.replace(tmp, manifest_path)
    return manifest


def _check_inputs(input_files, vocab_file, instance_config):
    """`ValueError` (`ImportError` for a missing segmenter) naming the first
    input at fault, before the output folder is touched."""
    check_input_files(input_files)
    check_vocab_file(vocab_file)
    if instance_config.chinese_word_segmenter:  # a missing jieba is named before any writing
        check_segmenter(instance_config.chinese_word_segmenter)


def _written_shards(jobs, num_workers, progress, max_seq_length):
    """Runs the jobs (`_run`), reporting progress after each shard and the
    lines too long for any instance at the end; returns the shards' entries."""
    shards = []
    long_lines = LongLines(max_seq_length)
    start = time.time()
    for shard in _run(jobs, num_workers):
        long_lines.add(shard.pop("long_lines"))
        shards.append(shard)
        if callable(progress):
            progress(sum(s["documents"] for s in shards), sum(s["records"] for s in shards),
                     sum(s["bytes"] for s in shards))
        elif progress:
            elapsed = max(time.time() - start, 1e-9)
            documents = sum(s["documents"] for s in shards)
            records = sum(s["records"] for s in shards)
            megabytes = sum(s["bytes"] for s in shards) / 1e6
            print(f"\r{len(shards)} shards, {documents} documents, {records} instances, "
                  f"{megabytes / elapsed:.2f} MB/s", end="", file=sys.stderr, flush=True)
    if progress and not callable(progress):
        print(file=sys.stderr)
    long_lines.report()
    return shards


def build_manifest(instance_config, writer_config, vocab_sha256, vocab_facts, shards):
    """The manifest of `shards` (dicts with file, records, sha256; in order),
    as both the local writer and the Beam pipeline write it."""
    segmenter = instance_config.chinese_word_segmenter
    return {
        "version": MANIFEST_VERSION,
        "schema": dataclasses.asdict(RecordSchema(
            instance_config.max_seq_length, instance_config.max_predictions_per_seq)),
        "vocab_sha256": vocab_sha256,
        **vocab_facts,
        "do_lower_case": writer_config.do_lower_case,
        "instance_config": dataclasses.asdict(instance_config),
        # Another segmenter version (its dictionary) may find other words.
        **({"chinese_word_segmenter_version": segmenter_version(segmenter)} if segmenter else {}),
        # The number of workers changes no record: it is not part of what the data is.
        "writer_config": {k: v for k, v in dataclasses.asdict(writer_config).items()
                          if k != "num_workers"},
        "shards": [{k: s[k] for k in ("file", "records", "sha256")} for s in shards],
    }


def _tensorflow_free_worker():
    """Pool initializer: the worker imports the pure-Python modules of
    `keras_bert_impl.bert` (`BertTokenizer`, WordPiece) and
    `keras_bert_impl.tokenizers` without running the package `__init__`s,
    which import Keras and TensorFlow (about 4.6 s of CPU and 1 GB of memory
    per worker, for nothing a worker runs). Each package is registered as
    found but not executed, so its submodules import as usual."""
    for name in ("keras_bert_impl", "keras_bert_impl.bert", "keras_bert_impl.tokenizers"):
        if name not in sys.modules:
            sys.modules[name] = importlib.util.module_from_spec(importlib.util.find_spec(name))


def _run(jobs, num_workers):
    """Runs `_write_block` over jobs in order, at most 2 per worker in flight.

    A corpus of one block is written in this process: a pool's start-up
    would buy nothing, and a block's records do not depend on where it is
    written.
    """
    jobs = iter(jobs)
    head = list(itertools.islice(jobs, 2))
    jobs = itertools.chain(head, jobs)
    if num_workers <= 1 or len(head) < 2:
        for job in jobs:
            yield _write_block(job)
        return
    context = multiprocessing.get_context("spawn")  # the parent may hold TF, which is not fork-safe
    with context.Pool(num_workers, initializer=_tensorflow_free_worker) as pool:
        pending = []
        for job in jobs:
            pending.append(pool.apply_async(_write_block, (job,)))
            if len(pending) >= 2 * num_workers:
                yield pending.pop(0).get()
        for result in pending:
            yield result.get()
