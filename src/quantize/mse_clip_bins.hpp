#pragma once
// The MSE calibration method's search: the int8 range whose quantize ->
// dequantize round trip loses the least, in squared error, over a
// calibration histogram (the criterion of PyTorch's HistogramObserver,
// which X86InductorQuantizer's int8 uses), estimated in closed form per
// candidate so that every pair of clipping points can be tried.
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace kiln {

// `negative` and `positive` count |x| per bin of unit width for x < 0 and
// x > 0 (exact zeros left out: they round trip exactly). A candidate keeps
// the first a negative and b positive bins, range [-a, b] in bin widths,
// cut into `steps` equal steps with 0 on the grid. Its error: a value beyond
// an end clips to it, (|x| - end)^2; a value within half a step of 0 rounds
// to 0, x^2; any other rounds with the uniform error step^2 / 12 (values at
// bin centres, plus the bin's own spread of 1/12 where it rounds to 0).
// Returns the (a, b) of least error, the wider on ties; (0, 0) only when
// both histograms are empty.
std::pair<std::size_t, std::size_t> mse_clip_bins(const std::vector<std::uint64_t>& negative,
                                                  const std::vector<std::uint64_t>& positive, std::size_t steps = 255);

}  // namespace kiln
