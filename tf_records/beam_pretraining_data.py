r"""Text files -> sharded pretraining TFRecords + `manifest.json`, on Apache Beam.

The local writer's output (`tf_records.create_pretraining_data`), made by
any Beam runner: with the same files, flags and seed it writes the same
shards, byte for byte, and the same manifest. Run it like the local CLI,
with Beam's pipeline options after the flags (`pip install
'keras_bert_impl[beam]'`):

    python -m tf_records.beam_pretraining_data \
        --input_file='corpus/*.txt' --vocab_file=vocab.txt --output_dir=data/ \
        --runner=DirectRunner --direct_num_workers=2 \
        --direct_running_mode=multi_processing

Other runners take their usual options; every worker must see the input,
the output folder and this package, so paths are on a shared file system
(`gs://`, `hdfs://`, `s3://`, as Beam's file systems read them) and the
package reaches the workers as a wheel (`--extra_packages=dist/<wheel>`)
or in the workers' container (`--sdk_container_image=...`):

    Dataflow:  --runner=DataflowRunner --project=<project> --region=<region>
               --temp_location=gs://<bucket>/tmp --num_workers=<n>
               --max_num_workers=<n>  (needs apache-beam[gcp])
    Flink:     --runner=FlinkRunner --flink_master=<host>:8081
               --environment_type=DOCKER (or PROCESS / EXTERNAL)
    Spark:     --runner=SparkRunner --spark_master_url=spark://<host>:7077
               --environment_type=DOCKER (or PROCESS / EXTERNAL)

`--num_workers` is the local CLI's flag and also Dataflow's; here it is
handed to the runner. The vocabulary is read once when the pipeline is
built and travels inside it (a `vocab.txt` is ~230 KB), so workers need
no access to it.

How the pipeline makes the local writer's blocks. A block is
`documents_per_block` consecutive documents in corpus order (the files
sorted by path, as the local CLI sorts them), and documents are separated
by blank lines, so the order of lines matters; Beam's `ReadFromText` splits
files into byte ranges and yields lines in no order and without line
numbers. So each file is read whole, in order, by one worker, through
Beam's file systems (gzip for `.gz`, as the local reader; errors name file
and line). It yields (file, document number in the file, lines) and the
file's document count. The counts, one per file, become a side input of
prefix sums, which turns each document's (file, number) into its corpus
index and block index = index // documents_per_block. A `GroupByKey` on
the block index gathers each block; sorted by corpus index it is the local
writer's block, and `writer.block_records` turns it into the same records.
Each shard is written under a temporary name and renamed when complete;
one final step writes the manifest, also renamed into place, so a failed
run leaves nothing that looks whole.

Memory and parallelism: a reading worker holds one document at a time; the
corpus's text passes once through the runner's shuffle (the `GroupByKey`,
which runners spill to disk); a block worker holds one block (its text,
instances and records), as the local writer's workers do; the manifest step
holds one small dict per shard. Reading is parallel across files (split one
huge file before running); instance creation, masking and writing, nearly
all of the work, are parallel across blocks.

Beam is imported only here: it is the `[beam]` extra, not a dependency of
the library or the local writer.
"""

import glob
import hashlib
import json
import os
import shutil
import sys
import tempfile
import uuid

import apache_beam as beam
from absl import flags
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from tf_records.bert.chinese_words import check_segmenter
from tf_records.bert.instances import InstanceConfig
from tf_records.bert.writer import WriterConfig
from tf_records.bert.writer import block_records
from tf_records.bert.writer import build_manifest
from tf_records.bert.writer import vocab_file_facts
from tf_records.command_line import console
from tf_records.create_pretraining_data import _configs
from tf_records.create_pretraining_data import define_flags
from tf_records.documents import file_documents
from tf_records.manifest import MANIFEST_FILE
from tf_records.manifest import file_sha256
from tf_records.records_folder import WRITERS
from tf_records.records_folder import RefusedFolder
from tf_records.records_folder import records_transaction
from tf_records.tfrecord_file import write_tfrecord_file

COUNTERS = "pretraining_data"  # the namespace of the pipeline's Beam counters


def expand_input_patterns(patterns):
    """Input globs -> the sorted list of files, as the local CLI sorts them.

    Local patterns are expanded by `glob`, exactly as the local CLI does,
    so both read the same files in the same order; `scheme://` patterns by
    Beam's file systems. `ValueError` names every pattern matching nothing
    (one of several matching nothing is a typo, not an empty corpus).
    """
    files, unmatched = set(), []
    for pattern in patterns:
        if "://" in pattern:
            found = [m.path for m in FileSystems.match([pattern])[0].metadata_list]
        else:
            found = glob.glob(pattern)
        if not found:
            unmatched.append(pattern)
        files.update(found)
    if unmatched:
        raise ValueError(f"no file matches {', '.join(map(repr, unmatched))}.")
    return sorted(files)


def run_pipeline(input_files, vocab_file, output_dir, instance_config=None, writer_config=None,
                 pipeline_options=None, overwrite=False):
    """Runs the pipeline to the end; returns the manifest it wrote.

    Args:
        input_files: list of str. Text files (plain or `.gz`) in corpus
            order; any path Beam's file systems read.
        vocab_file: str. `vocab.txt` of the model.
        output_dir: str. Folder for the shards and `manifest.json`.
        instance_config: `InstanceConfig`. As for the local writer.
        writer_config: `WriterConfig`. As for the local writer; its
            `num_workers` is not used (the runner's options set workers).
        pipeline_options: `PipelineOptions`, or a list of Beam's
            command-line options. Default: DirectRunner in this process.
        overwrite: bool. Replace records of another kind or settings. A
            local `output_dir` is written as the local writer writes it
            (`records_folder.records_transaction`: locked, written beside
            and swapped in whole); a remote one (gs://...) in place, after
            refusing another kind's records.

    Returns:
        dict: the manifest, equal to the local writer's for the same input.
    """
    instance_config = instance_config or InstanceConfig()
    writer_config = writer_config or WriterConfig()
    if not input_files:
        raise ValueError("No input files.")
    for path in input_files:
        if not FileSystems.exists(path):
            raise ValueError(f"Input file {path} does not exist.")
    with FileSystems.open(vocab_file, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        vocab_bytes = f.read()
    if instance_config.chinese_word_segmenter:  # here too (the workers need it), before writing
        check_segmenter(instance_config.chinese_word_segmenter)
    if not isinstance(pipeline_options, PipelineOptions):
        pipeline_options = PipelineOptions(pipeline_options or [])
    if "://" not in output_dir:
        with records_transaction(output_dir, "bert", overwrite) as work:
            return _write(input_files, vocab_bytes, work, instance_config, writer_config,
                          pipeline_options)
    _refuse_another_kind(output_dir, overwrite)
    _clear_output(output_dir)
    return _write(input_files, vocab_bytes, output_dir, instance_config, writer_config,
                  pipeline_options)


def _refuse_another_kind(output_dir, overwrite):
    """A remote folder holding another kind's records is refused unless `overwrite`."""
    path = FileSystems.join(output_dir, MANIFEST_FILE)
    if overwrite or not FileSystems.exists(path):
        return
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        kind = json.loads(f.read().decode("utf-8")).get("schema", {}).get("kind", "bert")
    if kind != "bert":
        raise RefusedFolder(f"{output_dir} holds {WRITERS.get(kind, kind)}; this pipeline "
                            f"writes {WRITERS['bert']}. Give --overwrite to replace them.")


def _write(input_files, vocab_bytes, output_dir, instance_config, writer_config,
           pipeline_options):
    with beam.Pipeline(options=pipeline_options) as pipeline:
        shards = _build(pipeline, input_files, vocab_bytes, output_dir, instance_config,
                        writer_config)
        _ = (shards
             | "AllShards" >> beam.combiners.ToList()
             | "WriteManifest" >> beam.Map(
                 _write_manifest, output_dir, instance_config, writer_config, vocab_bytes))
    return _read_manifest(output_dir)


def _build(pipeline, input_files, vocab_bytes, output_dir, instance_config, writer_config):
    """The pipeline up to the shards: a PCollection of one dict per shard."""
    read = (
        pipeline
        | "Files" >> beam.Create(list(enumerate(input_files)))
        # Without it the runner fuses Create and the reads into one worker.
        | "SpreadFiles" >> beam.Reshuffle()
        | "ReadDocuments" >> beam.FlatMap(_read_documents).with_outputs("counts", main="documents"))
    offsets = (
        read.counts
        | "Counts" >> beam.combiners.ToList()
        | "PrefixSums" >> beam.Map(_prefix_sums))
    return (
        read.documents
        | "KeyByBlock" >> beam.Map(
            _key_by_block, beam.pvalue.AsSingleton(offsets), writer_config.documents_per_block)
        | "GatherBlocks" >> beam.GroupByKey()
        | "WriteShards" >> beam.Map(
            _write_shard, vocab_bytes, output_dir, instance_config, writer_config))


def _read_documents(element):
    """(file index, path) -> its documents as (file index, number, lines),
    in order, then its document count on the "counts" output."""
    file_index, path = element
    compression = CompressionTypes.GZIP if path.endswith(".gz") else CompressionTypes.UNCOMPRESSED
    documents = beam.metrics.Metrics.counter(COUNTERS, "documents")
    count = 0
    f = FileSystems.open(path, compression_type=compression)
    try:
        for document in file_documents(iter(f.readline, b""), path):
            yield file_index, count, document
            count += 1
            documents.inc()
    finally:
        f.close()
    yield beam.pvalue.TaggedOutput("counts", (file_index, count))


def _prefix_sums(counts):
    """[(file index, documents), ...] -> {file index: corpus index of its first document}."""
    offsets, total = {}, 0
    for file_index, count in sorted(counts):
        offsets[file_index] = total
        total += count
    return offsets


def _key_by_block(document, offsets, documents_per_block):
    file_index, number, lines = document
    index = offsets[file_index] + number
    return index // documents_per_block, (index, lines)


def _write_shard(keyed_block, vocab_bytes, output_dir, instance_config, writer_config):
    """(block index, [(corpus index, lines), ...]) -> its shard; returns the
    manifest's entry for it."""
    index, documents = keyed_block
    documents = sorted(documents, key=lambda d: d[0])
    block = [lines for _, lines in documents]
    long_lines = []
    records, vocab_facts = block_records(index, block, _local_vocab(vocab_bytes), instance_config,
                                         writer_config, long_lines=long_lines)
    beam.metrics.Metrics.counter(COUNTERS, "instances").inc(len(records))
    name = f"shard-{index:05d}.tfrecord"
    # The shard is written on local disk first (`tfrecord_file` frames the
    # records into a local file), then copied to the output through Beam's file systems.
    with tempfile.TemporaryDirectory() as local:
        path = os.path.join(local, name)
        write_tfrecord_file(path, records)
        sha256 = file_sha256(path)
        # A unique temporary name: a runner may run a block twice at once
        # (a retry, a speculative copy); both write the same bytes.
        tmp = FileSystems.join(output_dir, f".tmp-{uuid.uuid4().hex}-{name}")
        with open(path, "rb") as src:
            dst = FileSystems.create(tmp, compression_type=CompressionTypes.UNCOMPRESSED)
            try:
                shutil.copyfileobj(src, dst)
            finally:
                dst.close()
    FileSystems.rename([tmp], [FileSystems.join(output_dir, name)])
    # Lines too long for any instance, by the corpus's document number (a
    # worker knows no file and line): warned by _write_manifest.
    return {"index": index, "file": name, "records": len(records), "sha256": sha256,
            "vocab": vocab_facts, "long_line_count": len(long_lines),
            "long_lines": [(documents[d][0], k, chars, tokens)
                           for d, k, chars, tokens in long_lines[:LongLinesWarning.SHOWN]]}


class LongLinesWarning:
    """The local writer's warning of lines too long for any instance
    (`writer.LongLines`), from the shards' counts: the count and the first
    few by document number of the corpus and line in it."""

    SHOWN = 3

    @classmethod
    def report(cls, shards, max_seq_length):
        count = sum(s.get("long_line_count", 0) for s in shards)
        if not count:
            return
        first = [line for s in shards for line in s.get("long_lines", ())][:cls.SHOWN]
        print(f"Warning: {count:,} line(s) hold more tokens than fit one instance of "
              f"{max_seq_length} (one sentence per line is the format):", file=sys.stderr)
        for document, line, chars, tokens in first:
            print(f"  document {document + 1}, line {line + 1}: a {chars:,}-character line "
                  f"({tokens:,} tokens) becomes one instance of {max_seq_length} tokens; the "
                  "rest is dropped (as the original does).", file=sys.stderr)
        if count > len(first):
            print(f"  ... and {count - len(first):,} more.", file=sys.stderr)
        sys.stderr.flush()


def _write_manifest(shards, output_dir, instance_config, writer_config, vocab_bytes):
    shards = sorted(shards, key=lambda s: s["index"])
    LongLinesWarning.report(shards, instance_config.max_seq_length)
    # The block workers read the vocabulary: the launcher imports no TensorFlow but for no shards.
    vocab_facts = shards[0]["vocab"] if shards else vocab_file_facts(_local_vocab(vocab_bytes))
    manifest = build_manifest(instance_config, writer_config, _sha256(vocab_bytes), vocab_facts,
                              shards)
    tmp = FileSystems.join(output_dir, f".tmp-{uuid.uuid4().hex}-{MANIFEST_FILE}")
    f = FileSystems.create(tmp, compression_type=CompressionTypes.UNCOMPRESSED)
    try:
        f.write(json.dumps(manifest, indent=2).encode("utf-8"))
    finally:
        f.close()
    FileSystems.rename([tmp], [FileSystems.join(output_dir, MANIFEST_FILE)])


def _read_manifest(output_dir):
    path = FileSystems.join(output_dir, MANIFEST_FILE)
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        return json.loads(f.read().decode("utf-8"))


def _clear_output(output_dir):
    """A remote `output_dir` (no local swap there): made if missing; an old
    manifest (it no longer describes the folder), the shards of an earlier
    run and the temporary files of an interrupted one deleted."""
    if not FileSystems.exists(output_dir):
        FileSystems.mkdirs(output_dir)
    stale = [m.path for pattern in (".tmp-*", MANIFEST_FILE, "shard-*.tfrecord")
             for m in FileSystems.match([FileSystems.join(output_dir, pattern)])[0].metadata_list]
    if stale:
        FileSystems.delete(stale)


def _sha256(data):
    return hashlib.sha256(data).hexdigest()


def _local_vocab(vocab_bytes):
    """The vocabulary as a local file (the tokenizer reads a path), written
    once per machine under a name of its hash; the same path each call keeps
    the writer's per-process tokenizer cache warm."""
    path = os.path.join(tempfile.gettempdir(), f"keras_bert_impl-vocab-{_sha256(vocab_bytes)}.txt")
    if not os.path.exists(path):
        tmp = f"{path}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "wb") as f:
            f.write(vocab_bytes)
        os.replace(tmp, path)  # processes racing here write the same bytes
    return path


def main(argv):
    flags_values = flags.FLAGS
    beam_args = list(argv[1:])  # what absl did not know: Beam's pipeline options
    if flags_values["num_workers"].present:  # also Dataflow's option: handed on
        beam_args.append(f"--num_workers={flags_values.num_workers}")
    try:  # globs and flag values are checked before anything is written
        files = expand_input_patterns(flags_values.input_file)
    except ValueError as e:
        raise SystemExit(f"--input_file: {e}") from None
    try:
        instance_config, writer_config = _configs(flags_values)
    except ValueError as e:
        raise SystemExit(f"Bad flag value: {e}") from None
    options = PipelineOptions(beam_args)
    print(f"{len(files)} input files, runner {options.get_all_options()['runner'] or 'DirectRunner'}, "
          f"{instance_config}, {writer_config}")
    try:
        manifest = run_pipeline(files, flags_values.vocab_file, flags_values.output_dir,
                                instance_config, writer_config, options,
                                overwrite=flags_values.overwrite)
    except ValueError as e:  # RefusedFolder: the folder named, nothing written
        raise SystemExit(f"Bad input: {e}") from None
    records = sum(s["records"] for s in manifest["shards"])
    print(f"Wrote {records} instances in {len(manifest['shards'])} shards to "
          f"{flags_values.output_dir}")


def _parse_flags(argv):
    """absl parses the flags it knows (the local CLI's); the rest go to Beam."""
    return flags.FLAGS(argv, known_only=True)


def cli():
    """`python -m tf_records.beam_pretraining_data`: `main` on a quiet console."""
    define_flags()  # the local CLI's flags
    console.run(main, __name__, flags_parser=_parse_flags, swapped=True)


if __name__ == "__main__":
    cli()
