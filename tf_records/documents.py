"""Text files -> documents: the one parser of the pretraining text format.

One sentence per line, blank lines between documents, plain or gzip text,
as the original `create_pretraining_data.py` reads it. The writers and the
training commands read a corpus with `read_documents` (BERT's writer with
`documents_with_origin`, which also gives the file and line each document
starts at, for its warnings); the Beam pipeline (`beam_pretraining_data.py`),
which opens files through Beam's file systems, parses their lines with
`file_documents`.
"""

import gzip
import zlib


def read_documents(paths):
    """Yields documents (lists of non-empty lines) from plain or gzip text.

    One sentence per line, blank lines between documents, as the original.
    A file that is not UTF-8 raises `ValueError` naming file and line.
    """
    for _, _, document in documents_with_origin(paths):
        yield document


def documents_with_origin(paths):
    """`(path, line of its first line, document)` for every document of the
    files, in order. A broken `.gz` or an unreadable file raises
    `ValueError` naming the file."""
    for path in paths:
        opener = gzip.open if path.endswith(".gz") else open
        try:
            with opener(path, "rb") as f:
                for line_number, document in numbered_file_documents(f, path):
                    yield path, line_number, document
        except (OSError, EOFError, zlib.error) as e:  # gzip's errors name no file
            raise ValueError(f"Cannot read input file {path}: {e}") from None


def file_documents(raw_lines, path):
    """Yields the documents of one file, from its raw lines (`bytes`) in order.

    The one parser of the text format, shared with the Beam pipeline
    (`beam_pretraining_data.py`), which opens files through Beam's file
    systems: `path` only names the file in errors.
    """
    for _, document in numbered_file_documents(raw_lines, path):
        yield document


def numbered_file_documents(raw_lines, path):
    """`file_documents` with the line number of each document's first line
    (its lines are consecutive: a blank line ends a document)."""
    document, first = [], 0
    for line_number, raw in enumerate(raw_lines, start=1):
        try:
            line = raw.decode("utf-8").strip()
        except UnicodeDecodeError as e:
            raise ValueError(f"{path}:{line_number}: not UTF-8 ({e.reason}).") from None
        if line:
            if not document:
                first = line_number
            document.append(line)
        elif document:
            yield first, document
            document = []
    if document:  # a file end also ends a document
        yield first, document
