"""GPU checks of the cupy functions whose kernels live in the wheel's own fatbins (cub,
thrust, the random generator): each result is compared with numpy. Run with the cupy under
test first on sys.path; ``bench/h200/thin_cupy.sh`` does."""

from __future__ import annotations

import numpy
import pytest

import cupy  # noqa: E402  (a failed import must fail the run, not skip it)


def test_sort_thrust():
    a = numpy.random.default_rng(0).standard_normal(100_000).astype(numpy.float32)
    assert numpy.array_equal(cupy.sort(cupy.asarray(a)).get(), numpy.sort(a))


def test_argsort_thrust():
    a = numpy.random.default_rng(1).integers(0, 1000, 50_000)
    got = cupy.argsort(cupy.asarray(a), kind="stable").get()
    assert numpy.array_equal(a[got], numpy.sort(a, kind="stable"))


def test_lexsort_thrust():
    k = numpy.random.default_rng(2).integers(0, 10, (2, 1000))
    assert numpy.array_equal(cupy.lexsort(cupy.asarray(k)).get(), numpy.lexsort(k))


@pytest.mark.parametrize("op", ["sum", "prod", "min", "max", "cumsum"])
def test_cub_reductions(op):
    from cupy._core import _accelerator

    routine, reduction = _accelerator.get_routine_accelerators(), _accelerator.get_reduction_accelerators()
    _accelerator.set_routine_accelerators(["cub"])
    _accelerator.set_reduction_accelerators(["cub"])
    try:
        a = numpy.random.default_rng(3).random(10_000)
        got = getattr(cupy, op)(cupy.asarray(a))
        assert numpy.allclose(cupy.asnumpy(got), getattr(numpy, op)(a), rtol=1e-6)
    finally:
        _accelerator.set_routine_accelerators(routine)
        _accelerator.set_reduction_accelerators(reduction)


def test_random_generator_api():
    g = cupy.random.default_rng(5)
    x = g.random(1_000_000).get()
    assert 0 <= x.min() and x.max() < 1 and abs(x.mean() - 0.5) < 0.01
    n = g.standard_normal(1_000_000).get()
    assert abs(n.mean()) < 0.01 and abs(n.std() - 1) < 0.01


def test_elementwise_jit():
    # compiled at run time by NVRTC, not from the wheel: must work for every variant
    a = cupy.arange(10, dtype=cupy.float32)
    assert float((a * 2 + 1).sum()) == 100.0  # 2 * (0 + ... + 9) + 10
