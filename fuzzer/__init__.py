"""affuzz: a differential consistency fuzzer for torch.func transforms and custom autograd.Functions.

Importing this package is cheap and torch-free; the modules that run torch are imported on use.
"""

__version__ = "0.1.0"
