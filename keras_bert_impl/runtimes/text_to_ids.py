"""`text_to_ids.py`, written beside each runtime export: text in, the
export's input ids out, with this package's tokenizer of the family (the
runtimes take ids; the tokenizer is Python, not a graph op they hold).

    python text_to_ids.py "a sentence" ["its pair"]   # prints the ids as JSON

    from text_to_ids import inputs
    session.run(None, inputs(["a sentence"]))       # onnxruntime, for one

It imports the family's Python tokenizer from `keras_bert_impl` (the
package loads TensorFlow as it imports) and reads the tokenizer's files
from its own folder.
"""

TEMPLATE = '''"""Text -> the input ids of the export beside this file (serving_info.json
names them), with keras_bert_impl's {family} tokenizer (pip install keras-bert-impl).

    python text_to_ids.py "a sentence" ["its pair"]   # prints the ids as JSON

    from text_to_ids import inputs
    inputs(["a sentence"], ["its pair"])  # {{input name: int32 array (rows, {max_length})}}
"""

import json
import os
import sys

{import_line}

HERE = os.path.dirname(os.path.abspath(__file__))
MAX_LENGTH = {max_length}
TOKENIZER = {constructor}


def inputs(texts, pairs=None):
    """The export's inputs for `texts` (and their `pairs`), every row MAX_LENGTH long."""
    return TOKENIZER(texts, pairs, max_length=MAX_LENGTH)


if __name__ == "__main__":
    found = inputs([sys.argv[1]], [sys.argv[2]] if len(sys.argv) > 2 else None)
    print(json.dumps({{name: ids.tolist() for name, ids in found.items()}}))
'''


def text_to_ids_source(family, import_line, constructor, max_length):
    """`text_to_ids.py`'s text for a family's tokenizer: `import_line`
    imports its class, `constructor` builds it from files named relative to
    `HERE` (the export's folder); rows are `max_length` long."""
    return TEMPLATE.format(family=family, import_line=import_line, constructor=constructor,
                           max_length=max_length)
