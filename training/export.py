"""Export a fine-tuned run again, in the formats a deployer's runtime reads.

    python -m training.export --run_dir=news_output --export_formats=onnx,openvino,litert

Reads the run's settings (`<run_dir>/summary.json`) and its fine-tuned
model (`<run_dir>/export/model.keras`), and writes each format into its
folder of `<run_dir>/export/`, as `training.finetune --export_formats`
would have (`training.finetuning.exports`): `saved_model`, `onnx`,
`openvino`, `litert`; `--quantize=int8` adds each runtime's int8 export.
A folder written before is replaced whole; the others are left as they are.
"""

import dataclasses
import sys

from tf_records.command_line import console
from training.run.config_flags import define_flags
from training.run.config_flags import from_flags

__all__ = ["ExportConfig", "cli", "main", "run"]


@dataclasses.dataclass(frozen=True)
class ExportConfig:
    run_dir: str = ""
    export_formats: str = "onnx,openvino,litert"
    quantize: str = "none"


HELP = {
    "run_dir": "A training.finetune run folder (its --output_dir): summary.json and "
               "export/model.keras.",
    "export_formats": "Comma-separated: saved_model, onnx, openvino, litert (the last three "
                      "need the [export] extra).",
    "quantize": "none, or int8: each runtime format also in int8 by its runtime's own tool, "
                "into <format>_int8/, its dev scores and size beside the fp32 model's in "
                "export/quantization.csv (the run's data files are read again).",
}


def main(argv):
    del argv
    run(from_flags(ExportConfig))


def run(cfg):
    """Writes the formats; returns their folders (`training.finetuning.export_run`)."""
    # lazy: TensorFlow loads only after the console starts (tf_records/command_line/console.py)
    from training.finetuning import export_run

    return export_run.run(cfg.run_dir, cfg.export_formats, cfg.quantize)


def cli():
    """`kbi-export` and `python -m training.export`: flags, then `main` on a quiet console."""
    define_flags(ExportConfig, HELP)
    try:
        # its output is the run folder, not a new one: the console's log stays out of it
        console.run(main, __name__, output_flag=None)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    cli()
