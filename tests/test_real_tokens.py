"""benchmarks/real_tokens.py refuses a bad setting before it writes or runs anything."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "benchmarks", "real_tokens.py")


def test_bad_settings_name_the_setting_and_start_nothing(tmp_path):
    for setting, message in (("16:fast", "'16:fast': unknown option 'fast'"),
                             ("s2", "'s2' does not start with a length_grouping")):
        result = subprocess.run([sys.executable, SCRIPT, f"--settings=16,{setting}",
                                 f"--data_dir={tmp_path / 'data'}"], cwd=ROOT,
                                capture_output=True, text=True, timeout=120)
        assert result.returncode != 0 and message in result.stderr, (setting, result.stderr[-2000:])
        assert not (tmp_path / "data").exists()
