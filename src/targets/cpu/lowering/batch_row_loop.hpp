#pragma once
// A step that a program compiled once for a range of batch sizes runs at a
// smaller batch than it was built for, when its kernel (a oneDNN convolution
// or pooling primitive, a product, a layout reorder) is made for a fixed
// batch: kernels built once more for 1, 2, 4, ... batch entries (each on the
// first run that needs it), from the same constants, run the entries in
// blocks of the largest power of two left, a product's last single row
// after others as two that repeat the one before (an entry is a row of dimension
// 0, or a block of rows where the batch is folded into them, or a row of a
// product's sequence at batch 1). Only ops
// whose result row n is computed from row n of each input that has the
// batch alone qualify (convolutions, poolings, reductions over other axes,
// layout reorders, products over rows): a row loop over any other op would
// be wrong. A smaller kernel reads the full batch's kernel's packed weights
// where it wants the same layout (cpu_executable::batch_row_kernel); else it
// packs its own copy.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/run_time_extents.hpp"
#include "targets/cpu/kernels/cpu_kernel.hpp"

namespace kiln {

// Where a value's rows lie for the loop: the dimension that follows the
// extent (every dimension before it of length 1, so that its rows are
// blocks of memory as rows of dimension 0 are), or nullopt for an input
// that does not vary.
using row_dimension = std::optional<std::size_t>;

// How many rows make one batch entry when the result's rows in each block
// of them depend only on the same block of each input that varies with the
// batch, given how its result (`out`, of shape `out_shape` as built) and
// inputs (`ins`, nullopt for one that does not vary; `in_shapes`) follow
// the extent: the batch is the outermost dimension longer than one of each
// of them, the same number of rows per unit of the extent (1 for a batch;
// seq for [batch * seq, 768]). A product's rows may lie in any dimension
// before its last two ([1, seq, 768] by [768, 768]: a sequence whose batch
// is 1); the other ops' in dimension 0 only. 0 when not so.
std::size_t rows_per_batch_entry(const operation& op, const std::optional<varying_dimension>& out,
                                 const std::vector<std::optional<varying_dimension>>& ins, const shape& out_shape,
                                 const std::vector<shape>& in_shapes);

// The kernel of `op` for fewer batch entries: `input_shapes` and
// `output_shape` as built, with the row dimension of the result
// (`output_rows`) and of each input that has one (`input_rows`) set to
// `rows` (a number of whole entries); `constants` the constant inputs'
// values (empty for the others), with the algorithm a static compile at that
// batch picks.
// `packed` (or null): the packed form offered for each constant input, as
// kernel_request::packed (its `constants` entry keeps its values for kernels
// that take no packed form).
std::shared_ptr<const cpu_kernel> make_batch_row_kernel(
    const operation& op, const std::vector<shape>& input_shapes, const shape& output_shape,
    const std::vector<row_dimension>& input_rows, std::size_t output_rows, std::size_t rows,
    const std::vector<argument>& constants, int threads,
    const std::vector<std::shared_ptr<const packed_constant>>* packed);

// Runs `kernel` (made for `count` rows) on rows [first, first + count) of
// the row dimension of `result` and of each input that has one, the other
// inputs whole.
void run_rows(const cpu_kernel& kernel, const argument& result, const std::vector<argument>& inputs,
              const std::vector<row_dimension>& input_rows, std::size_t output_rows, std::size_t first,
              std::size_t count, std::byte* scratch);

}  // namespace kiln
