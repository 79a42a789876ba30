"""Targets: the cores and their parts, the cross toolchains and QEMU boards, the timing model, CMSIS-NN linking."""
