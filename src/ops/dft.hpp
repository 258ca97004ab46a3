#pragma once
// dft: discrete Fourier transform along one axis (ONNX DFT). The last dim
// holds 1 (real) or 2 (real, imaginary) values per element.
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/operation.hpp"

namespace kiln::op {

// The signal along `axis` is cut or zero-padded to `length` points.
// Forward: y[k] = sum_n x[n] exp(-2 pi i k n / length), complex out; onesided
// keeps k <= length / 2. Inverse: the same with exp(+...) and 1 / length;
// inverse + onesided reads bins 0 .. length / 2 of a Hermitian spectrum and
// returns the real signal (numpy's irfft).
struct dft : op_base {
    std::int64_t axis = 1;
    std::int64_t length = 0;
    bool inverse = false;
    bool onesided = false;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.axis, "axis");
        f(self.length, "length");
        f(self.inverse, "inverse");
        f(self.onesided, "onesided");
    }
    std::string name() const { return "dft"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

}  // namespace kiln::op
