import ctypes

import pytest

from tests.device_support import pytest_configure, pytest_runtest_setup  # noqa: F401 (needs_toolchain's hooks)
from tests.kernel_lib import build_shared_library


@pytest.fixture(scope="session")
def kernel_lib(tmp_path_factory):
    """The runtime_c kernels as a UBSan-instrumented shared library, loaded with ctypes."""
    path = build_shared_library(tmp_path_factory.mktemp("kernels"))
    return ctypes.CDLL(str(path))
