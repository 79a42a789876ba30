"""edgec: PyTorch -> int8 C99 for Arm Cortex-M."""

__version__ = "0.1.0"
