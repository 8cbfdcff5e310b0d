"""The host emulator of cuzk's CUDA kernels, for `CUZK_TEST_KERNEL_MODULE` (tests/gpu/conftest.py); it
lives in the package (`cuzk.backends.cuda.emulated.kernels`), where the emulated device uses it too."""

from cuzk.backends.cuda.emulated.kernels import EmuModule

__all__ = ["EmuModule"]
