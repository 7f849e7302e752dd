"""`ModelConfig`: what every family's config (a frozen dataclass of its
original keys) shares: `replace`, `to_dict`, the longest sequence it takes
(`max_length`, from the key `MAX_LENGTH_FIELD` names) and the JSON file
round trip (`from_json_file` reads `from_dict`'s keys; `to_json_file` writes
`to_file_dict`, the form the family's released files have)."""

import dataclasses

from keras_bert_impl.base.json_files import read_json_file
from keras_bert_impl.base.json_files import write_json_atomic


class ModelConfig:
    """Mixed into each family's frozen config dataclass."""

    # The key that says the longest sequence the model takes (None: any
    # length fits), for `keras_bert_impl.base.sequence_checks.check_fits_positions`.
    MAX_LENGTH_FIELD = None

    @property
    def max_length(self):
        return getattr(self, self.MAX_LENGTH_FIELD) if self.MAX_LENGTH_FIELD else None

    def replace(self, **changes):
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self):
        return dataclasses.asdict(self)

    def to_file_dict(self):
        """What `to_json_file` writes (the family's released form)."""
        return self.to_dict()

    @classmethod
    def from_json_file(cls, path):
        """Loads the family's JSON config file (`from_dict`'s keys)."""
        return cls.from_dict(read_json_file(path), source=str(path))

    def to_json_file(self, path):
        """Writes `to_file_dict()` atomically (temp file, then rename)."""
        write_json_atomic(path, self.to_file_dict())
