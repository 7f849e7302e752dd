"""`BadRowError`: a row, line or answer a reader cannot use, and the reader
argument that would skip it.

The readers are a Python API: their hint names their own argument
(`skip_bad_rows=True`). A command line that calls them names its own flag
instead (`with_flag("--skip_bad_input")`), so the user is told what to
type where they are.
"""


class BadRowError(ValueError):
    """A bad row (line, answer); `str()` ends with the Python argument's hint.

    Args:
        detail: str. What is wrong and where (file, line, value).
        skip_argument: str. The reader's argument that skips such rows.
        what: str. What is skipped ("rows", "lines", "questions").
    """

    def __init__(self, detail, skip_argument, what="rows"):
        self.detail = detail
        self.skip_argument = skip_argument
        self.what = what
        super().__init__(f"{detail} Pass {skip_argument}=True to skip such {what}.")

    def with_flag(self, flag):
        """The message with a command line's `flag` as the hint."""
        return f"{self.detail} Pass {flag} to skip and count such {self.what}."
