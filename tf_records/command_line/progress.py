"""Progress lines for the long steps of a run: done/total, rate, ETA.

Vocabulary learning, data creation, training, evaluation and export each
take from seconds to hours; a line every few seconds says how far a step
is, how fast it goes and when it will end, printed with `flush` so a log
file or a pipe shows it as it happens.

The rate (and so the ETA) is measured from the first update on, not from
the start: the first item often pays one-off costs (tracing a function,
starting worker processes) that would make the ETA too long for the rest
of the run. Until a second update there is only the start to measure from.

    progress = Progress("Scoring dev", total=120, unit="batches")
    for i in range(120):
        ...
        progress.update(i + 1, loss=0.31)
    progress.finish()
    # Scoring dev: 60/120 batches (50%)  12.0 batches/s  ETA 0:05  loss 0.31
    # Scoring dev: 120/120 batches in 0:10 (12.0 batches/s)
"""

import math
import time

# Least seconds between two lines of a vocabulary or data step (tests set 0).
STEP_SECONDS = 5.0


def format_duration(seconds):
    """`m:ss` under an hour, `h:mm:ss` from one; "?" when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "?"
    seconds = int(round(max(seconds, 0.0)))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"


def eta_seconds(done, total, rate):
    """Seconds left for `total - done` at `rate` per second (None: unknown)."""
    if total is None or rate is None or rate <= 0:
        return None
    return max(total - done, 0) / rate


def _number(value):
    """Three significant digits at most (`1,234`, `56.8`, `2.38`, `0.0142`)."""
    if isinstance(value, float) and math.isfinite(value):
        size = abs(value)
        if size >= 100:
            return f"{value:,.0f}"
        return f"{value:.{1 if size >= 10 else 2}f}".rstrip("0").rstrip(".") if size >= 1 else (
            f"{value:.3g}")
    return f"{value:,}" if isinstance(value, int) else str(value)


class Progress:
    """Prints a progress line at most every `every_seconds` (and at the end).

    Args:
        what: str. The step, at the start of every line ("Writing train records").
        total: number or None. The `done` count at the end (None: unknown, no ETA).
        unit: str. What `done` counts ("batches", "MB").
        scale: float. `done` and `total` are shown times this (bytes -> MB: 1e-6).
        every_seconds: float. Least time between two lines (0: every update).
        print_fn: callable taking the line and `flush=True`.
        clock: callable returning seconds (tests pass a fake one).
    """

    def __init__(self, what, total=None, unit="items", scale=1.0, every_seconds=10.0,
                 print_fn=print, clock=time.perf_counter):
        self.what = what
        self.total = total
        self.unit = unit
        self.scale = scale
        self.every_seconds = every_seconds
        self.print_fn = print_fn
        self.clock = clock
        self.done = 0
        self._start = (clock(), 0)
        self._first = None  # (time, done) of the first update: where the rate is measured from
        self._printed = None  # time of the last line
        self.printed = False  # whether any progress line was printed

    def rate(self, done=None, now=None):
        """Items per second since the first update (since the start before a second)."""
        done = self.done if done is None else done
        now = self.clock() if now is None else now
        since, base = self._start
        if self._first is not None and done > self._first[1] and now > self._first[0]:
            since, base = self._first
        return (done - base) / max(now - since, 1e-9)

    def _amount(self, done):
        """`12/40 batches` (or `12 batches` with no total), scaled."""
        shown = _number(done * self.scale if self.scale != 1 else done)
        if self.total is None:
            return f"{shown} {self.unit}"
        total = self.total * self.scale if self.scale != 1 else self.total
        return f"{shown}/{_number(total)} {self.unit}"

    def line(self, done, now=None, **fields):
        """The progress line for `done` items at time `now`, with `fields` after."""
        now = self.clock() if now is None else now
        rate = self.rate(done, now)
        amount = self._amount(done)
        if self.total:
            amount += f" ({100.0 * done / self.total:.0f}%)"
        parts = [f"{self.what}: {amount}", f"{_number(rate * self.scale)} {self.unit}/s"]
        if self.total is not None:
            parts.append(f"ETA {format_duration(eta_seconds(done, self.total, rate))}")
        parts += [f"{name} {_number(value)}" for name, value in fields.items()]
        return "  ".join(parts)

    def update(self, done, **fields):
        """Records `done`; prints a line if `every_seconds` passed since the last.

        Returns the line printed, or None.
        """
        now = self.clock()
        self.done = done
        if self._first is None:
            self._first = (now, done)
        if self._printed is not None and now - self._printed < self.every_seconds:
            return None
        if self._printed is None and now - self._start[0] < self.every_seconds:
            return None  # a step that ends within `every_seconds` needs no progress line
        self._printed = now
        self.printed = True
        text = self.line(done, now, **fields)
        self.print_fn(text, flush=True)
        return text

    def advance(self, count=1, **fields):
        """`update(done + count)`."""
        return self.update(self.done + count, **fields)

    def iterate(self, items, size=None):
        """Yields `items`, adding `size(item)` (default 1) to `done` for each."""
        for item in items:
            yield item
            self.advance(1 if size is None else size(item))

    def finish(self, **fields):
        """Prints the closing line: all done, the time taken and the mean rate."""
        elapsed = max(self.clock() - self._start[0], 1e-9)
        rate = _number(self.done * self.scale / elapsed)
        parts = [f"{self.what}: {self._amount(self.done)} in {format_duration(elapsed)} "
                 f"({rate} {self.unit}/s)"]
        parts += [f"{name} {_number(value)}" for name, value in fields.items()]
        text = "  ".join(parts)
        self.print_fn(text, flush=True)
        return text


def batch_progress(what, total=None, every_seconds=10.0, print_fn=print):
    """A Keras callback: `Progress` lines over `evaluate`'s or `predict`'s
    batches (with `evaluate`'s running loss), and a closing line if any
    was printed (a quick pass stays quiet).

    Args:
        what: str. The step ("Held-out evaluation").
        total: int or None. Batches in the pass, if known.
        every_seconds, print_fn: as `Progress`.
    """
    # lazy: command_line imports no Keras or TensorFlow (see tf_records/command_line/__init__.py)
    import keras

    class BatchProgress(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.meter = None

        def _begin(self, logs=None):
            self.meter = Progress(what, total=total, unit="batches",
                                  every_seconds=every_seconds, print_fn=print_fn)

        def _batch_end(self, batch, logs=None):
            loss = (logs or {}).get("loss")
            fields = {} if loss is None else {"loss": round(float(loss), 4)}
            self.meter.update(batch + 1, **fields)

        def _end(self, logs=None):
            if self.meter.printed:
                self.meter.finish()

        on_test_begin = on_predict_begin = _begin
        on_test_batch_end = on_predict_batch_end = _batch_end
        on_test_end = on_predict_end = _end

    return BatchProgress()


class Timed:
    """A line when a step starts and one when it ends, with its seconds.

        with Timed("Exporting the SavedModel"):
            export(...)
        # Exporting the SavedModel ...
        # Exporting the SavedModel: done in 12.3 s
    """

    def __init__(self, what, print_fn=print, clock=time.perf_counter):
        self.what = what
        self.print_fn = print_fn
        self.clock = clock
        self.seconds = None

    def __enter__(self):
        self._start = self.clock()
        self.print_fn(f"{self.what} ...", flush=True)
        return self

    def __exit__(self, kind, value, traceback):
        self.seconds = self.clock() - self._start
        if kind is None:
            self.print_fn(f"{self.what}: done in {self.seconds:.1f} s", flush=True)
        return False


class Reporter:
    """Progress lines for code that takes its reporter as an argument.

    The library (`keras_bert_impl/`) never imports this package, and the data
    writers' functions (`tf_records/`) leave printing to their callers: their
    long steps take a `progress` argument instead, this object or any with
    the same two methods. The writer names each step and counts it; the
    lines are `Progress`'s and `Timed`'s.

        write_lm_data(files, tokenizer, "data/", 512, vocab_files,
                      progress=Reporter("train"))
        # Tokenizing documents (train): 12/40 MB (30%)  2.4 MB/s  ETA 0:12  documents 900 ...
        # Tokenizing documents (train): 40/40 MB in 0:17 (2.35 MB/s)  documents 3,100 ...
        # Writing windows (train): 20,480/63,012 windows (33%)  ...

    Args:
        label: str. Shown after each step's name ("train", "heldout"), or "".
        every_seconds: float or None. Least time between two lines
            (None: `STEP_SECONDS`).
        print_fn: as `Progress`.
    """

    def __init__(self, label="", every_seconds=None, print_fn=print):
        self.label = label
        self.every_seconds = every_seconds
        self.print_fn = print_fn

    def _name(self, what):
        return f"{what} ({self.label})" if self.label else what

    def meter(self, what, total=None, unit="items", scale=1.0):
        """A `Progress` for step `what`: the caller `update`s it and `finish`es it."""
        every = STEP_SECONDS if self.every_seconds is None else self.every_seconds
        return Progress(self._name(what), total=total, unit=unit, scale=scale,
                        every_seconds=every, print_fn=self.print_fn)

    def timed(self, what):
        """A `Timed` for a step with nothing to count (a start and an end line)."""
        return Timed(self._name(what), print_fn=self.print_fn)

