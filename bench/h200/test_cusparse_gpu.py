"""cuSPARSE kernels on the GPU, each result compared with the CPU. Run with the libcusparse
under test preloaded and named: ``LD_PRELOAD=$LIB CUSPARSE_UNDER_TEST=$LIB python -m pytest``
(``bench/h200/thin_installed.sh`` does); torch and cupy then use that file, whatever their own
search paths say, and the first test proves it from /proc/self/maps."""

from __future__ import annotations

import os

import numpy
import pytest
import torch

UNDER_TEST = os.path.realpath(os.environ["CUSPARSE_UNDER_TEST"])


def _random_csr(rows: int, cols: int, density: float, dtype: torch.dtype, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    dense = torch.rand(rows, cols, generator=g, dtype=torch.float64)
    dense[torch.rand(rows, cols, generator=g) > density] = 0
    return dense.to(dtype).to_sparse_csr()


def _mapped_cusparse() -> set[str]:
    with open("/proc/self/maps") as fh:
        return {line.split()[-1] for line in fh if "libcusparse.so" in line}


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-4), (torch.float64, 1e-10)])
def test_spmm_csr(dtype, tol):
    a = _random_csr(1500, 900, 0.01, dtype, 1)
    b = torch.rand(900, 64, generator=torch.Generator().manual_seed(2), dtype=torch.float64).to(dtype)
    got = (a.cuda() @ b.cuda()).cpu()
    want = a.to_dense() @ b
    assert torch.allclose(got, want, rtol=tol, atol=tol)


def test_spmv_csr():
    a = _random_csr(4000, 3000, 0.002, torch.float32, 3)
    x = torch.rand(3000, generator=torch.Generator().manual_seed(4))
    got = torch.mv(a.cuda(), x.cuda()).cpu()
    assert torch.allclose(got, a.to_dense() @ x, rtol=1e-4, atol=1e-4)


def test_sparse_coo_mm():
    a = _random_csr(700, 500, 0.02, torch.float32, 5).to_sparse_coo()
    b = torch.rand(500, 33, generator=torch.Generator().manual_seed(6))
    got = torch.sparse.mm(a.cuda(), b.cuda()).cpu()
    assert torch.allclose(got, a.to_dense() @ b, rtol=1e-4, atol=1e-4)


def test_cupyx_spmv():
    cupy = pytest.importorskip("cupy")
    sparse = pytest.importorskip("cupyx.scipy.sparse")
    rng = numpy.random.default_rng(7)
    dense = rng.random((2000, 1000)) * (rng.random((2000, 1000)) < 0.005)
    x = rng.random(1000)
    got = (sparse.csr_matrix(cupy.asarray(dense)) @ cupy.asarray(x)).get()
    assert numpy.allclose(got, dense @ x, rtol=1e-10)


def test_the_library_under_test_ran():
    """Every cuSPARSE mapped into this process is the file under test (the tests above ran)."""
    torch.cuda.synchronize()
    assert _mapped_cusparse() == {UNDER_TEST}
