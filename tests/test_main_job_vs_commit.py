"""benchmarks/main_job_vs_commit.py refuses bad flags before it checks
anything out or runs anything."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "benchmarks", "main_job_vs_commit.py")


def _worktrees():
    return subprocess.run(["git", "worktree", "list"], cwd=ROOT, capture_output=True,
                          text=True).stdout


def test_bad_flags_name_the_flag_and_start_nothing():
    before = _worktrees()
    for flag, message in (("--baseline=no-such-revision",
                           "--baseline='no-such-revision' names no commit of"),
                          ("--rounds=0", "flag --rounds=0: 0 is not a positive integer")):
        result = subprocess.run([sys.executable, SCRIPT, flag], cwd=ROOT, capture_output=True,
                                text=True, timeout=120)
        assert result.returncode != 0 and message in result.stderr, (flag, result.stderr[-2000:])
        assert "round 1" not in result.stdout
    assert _worktrees() == before
