"""edgec: PyTorch -> int8 C99 for Cortex-M."""
