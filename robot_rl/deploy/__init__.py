"""Deploying trained policies without the training stack: export (ONNX, TorchScript) and a numpy/onnxruntime runner."""
