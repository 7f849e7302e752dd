"""Exports for the runtimes deployers serve with (ONNX Runtime, OpenVINO, LiteRT) and their runners."""
