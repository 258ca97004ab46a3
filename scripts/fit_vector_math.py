"""Derives the polynomial coefficients of Kiln's vectorized float32 math
(src/targets/cpu/kernels/vector_math_avx2.hpp): weighted least squares at Chebyshev
nodes (close to minimax for these smooth functions), computed in high
precision with mpmath, printed as float32 literals.

    .venv/bin/python scripts/fit_vector_math.py

Each fit keeps the exact leading terms fixed (exp: 1 + r, tanh: x, erf: the
2/sqrt(pi) x slope) so that small arguments come out exact, and reports the
largest relative error of the fitted function in float64 arithmetic.
"""
import mpmath
import numpy as np

mpmath.mp.dps = 40


def fit(f, lo, hi, degree, variable, fixed, nodes=3000):
    """Coefficients c[0..degree] of sum c_k t^k ~ (f(x) - base(x)) / scale(x), t = variable(x), (base, scale) = fixed(x)."""
    k = np.arange(nodes)
    xs = [mpmath.mpf(lo + hi) / 2 + mpmath.mpf(hi - lo) / 2 * mpmath.cos(mpmath.pi * (i + 0.5) / nodes) for i in k]
    rows, rhs, weights = [], [], []
    for x in xs:
        target, base, scale = f(x), fixed(x)[0], fixed(x)[1]
        t = variable(x)
        rows.append([float(t**j) for j in range(degree + 1)])
        rhs.append(float((target - base) / scale))
        weights.append(float(abs(scale / target)))
    a = np.array(rows) * np.array(weights)[:, None]
    b = np.array(rhs) * np.array(weights)
    # Round one coefficient to float32 at a time, lowest order first, and
    # refit the others around it so they absorb its rounding error.
    coeffs = []
    for j in range(degree + 1):
        rest = np.linalg.lstsq(a[:, j:], b - a[:, :j] @ np.array(coeffs, dtype=np.float64), rcond=None)[0]
        coeffs.append(float(np.float32(rest[0])))
    coeffs = np.array(coeffs, dtype=np.float32)
    worst = 0.0
    for x in np.linspace(lo, hi, 5001)[1:]:
        xm = mpmath.mpf(float(x))
        base, scale = fixed(xm)
        t = float(variable(xm))
        value = float(base) + float(scale) * sum(float(c) * t**j for j, c in enumerate(coeffs))
        worst = max(worst, abs(value / float(f(xm)) - 1))
    return coeffs, worst


def show(name, coeffs, worst):
    print(f"// {name}: max relative error {worst:.2e}")
    print("{" + ", ".join(f"{float(c):.9e}f" for c in coeffs) + "}")


ln2 = float(mpmath.log(2))
# e^r = 1 + r + r^2 q(r) on |r| <= ln2/2 (after taking out 2^n).
show("exp", *fit(mpmath.exp, -ln2 / 2 - 1e-3, ln2 / 2 + 1e-3, 5, lambda r: r, lambda r: (1 + r, r * r)))
# tanh(x) = x + x^3 q(x^2) on |x| < 0.625.
show("tanh", *fit(mpmath.tanh, 1e-4, 0.625, 4, lambda x: x * x, lambda x: (x, x**3)))
# erf(x) = 2/sqrt(pi) x + x^3 q(x^2) on |x| < 0.921875; the slope is applied
# as a float32 pair (hi + lo) since its rounding alone would cost an ulp.
two_over_sqrt_pi = 2 / mpmath.sqrt(mpmath.pi)
hi = np.float32(float(two_over_sqrt_pi))
print(f"// 2/sqrt(pi) = {float(hi):.9e}f + {float(two_over_sqrt_pi - mpmath.mpf(float(hi))):.9e}f")
show("erf", *fit(mpmath.erf, 1e-4, 0.921875, 4, lambda x: x * x, lambda x: (two_over_sqrt_pi * x, x**3)))
# erfc(x) = exp(-x^2) q(1/x) on 0.921875 <= x <= 9.5: erf rounds to 1 from
# 3.92 on, and gelu's negative tail needs erfc until e^-x^2 leaves the
# normal float range.
show("erfc", *fit(mpmath.erfc, 0.921875, 9.5, 10, lambda x: 1 / x, lambda x: (0, mpmath.exp(-x * x))))
