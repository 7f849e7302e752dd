"""A vocabulary given beside a checkpoint must be the checkpoint's own: the
check that `training.finetune` and every family's fine-tuning make before
they read any data."""

import os

from tf_records.manifest import file_sha256


def check_vocab_of_checkpoint(checkpoint, given, name, flag="vocab_file", unused_ok=False):
    """A vocabulary `given` for `checkpoint` must be the one beside it (its
    file `name`), if it has one: else `SystemExit` naming both files and
    their sha256 (the ids would mean other tokens). `unused_ok`: BERT's
    vocab.txt may differ in lines the checkpoint's holds as `[unusedN]` (the
    original README's way to add domain words), said in a line."""
    if not checkpoint or not given:
        return
    folder = checkpoint if os.path.isdir(checkpoint) else os.path.dirname(checkpoint)
    own = os.path.join(folder, name)
    if not os.path.isfile(own) or not os.path.isfile(given) or (
            os.path.abspath(own) == os.path.abspath(given)):
        return
    if file_sha256(own) == file_sha256(given):
        return
    if unused_ok:
        with open(own, encoding="utf-8") as f:
            theirs = f.read().splitlines()
        with open(given, encoding="utf-8") as f:
            mine = f.read().splitlines()
        changed = [i for i, (a, b) in enumerate(zip(theirs, mine)) if a != b]
        if len(mine) == len(theirs) and all(theirs[i].startswith("[unused") for i in changed):
            print(f"--{flag}={given}: {len(changed)} of {own}'s [unusedN] slots hold new "
                  "tokens; every other id is the checkpoint's.", flush=True)
            return
    raise SystemExit(
        f"--{flag}={given} (sha256 {file_sha256(given)[:12]}) is not the {name} of "
        f"--init_checkpoint={checkpoint} ({own}, sha256 {file_sha256(own)[:12]}): its ids "
        f"would mean other tokens. Leave --{flag} out to use the checkpoint's"
        + (" (new tokens may take its [unusedN] lines)." if unused_ok else "."))
