import ctypes

import pytest

# needs_toolchain's hooks, and the fixtures every test module may ask for
from tests.device_support import edgec_cache, pytest_configure, pytest_runtest_setup, small_digits_calib  # noqa: F401
from tests.kernel_lib import build_shared_library


@pytest.fixture(scope="session")
def kernel_lib(tmp_path_factory):
    """The runtime_c kernels as a UBSan-instrumented shared library, loaded with ctypes."""
    path = build_shared_library(tmp_path_factory.mktemp("kernels"))
    return ctypes.CDLL(str(path))
