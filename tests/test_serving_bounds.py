"""benchmarks/serving_bounds.py refuses bad flags before it builds anything."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "benchmarks", "serving_bounds.py")


def test_bad_flags_name_the_flag_and_start_nothing():
    for flag, message in (("--seq_lengths=32,x", "--seq_lengths: positive integers"),
                          ("--seq_lengths=0", "--seq_lengths: positive integers"),
                          ("--calls=0", "flag --calls=0: 0 is not a positive integer")):
        result = subprocess.run([sys.executable, SCRIPT, flag], cwd=ROOT, capture_output=True,
                                text=True, timeout=120)
        assert result.returncode != 0 and message in result.stderr, (flag, result.stderr[-2000:])
        assert "floor," not in result.stdout
