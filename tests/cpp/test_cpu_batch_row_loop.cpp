// rows_per_batch_entry: only ops whose result row n is computed from row n
// of each input that has the batch may run a smaller batch entry by entry on
// a batch-1 kernel, an entry being the rows of dimension 0 one unit of the
// extent adds (one, or seq where the batch is folded into the rows); any
// other op, a batch that is not dimension 0, or inputs with other rows per
// entry than the result's, are refused (0: the program then compiles per batch).
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "pass_test_helpers.hpp"
#include "targets/cpu/lowering/batch_row_loop.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

const std::optional<varying_dimension> batch{varying_dimension{0, 1, 0}};
const std::optional<varying_dimension> fixed{};

// Shapes as built: [8, 16, 4, 4] values (any rank-2-or-more shape whose
// dimension 0 is longer than one: the row dimension is 0).
std::size_t rows_of(const operation& op, const std::optional<varying_dimension>& out,
                    const std::vector<std::optional<varying_dimension>>& ins) {
    const shape s{dtype::float_type, {8, 16, 4, 4}};
    return rows_per_batch_entry(op, out, ins, s, std::vector<shape>(ins.size(), s));
}

}  // namespace

TEST(CpuBatchRowLoop, ConvolutionPoolingReductionAndReordersRunByRows) {
    EXPECT_EQ(1u, rows_of(make_op("convolution"), batch, {batch, fixed}));
    EXPECT_EQ(1u, rows_of(make_op("pooling"), batch, {batch}));
    EXPECT_EQ(1u, rows_of(make_op("reduce_mean", value_map{{"axes", ints({2, 3})}}), batch, {batch}));
}

TEST(CpuBatchRowLoop, ProductsRunByRowsOfTheirFirstInputOnly) {
    EXPECT_EQ(1u, rows_of(make_op("dot"), batch, {batch, fixed}));
    EXPECT_EQ(1u, rows_of(make_op("dot"), batch, {batch, batch}));  // a batch of matrices
    EXPECT_EQ(0u, rows_of(make_op("dot"), batch, {fixed, batch}));
}

TEST(CpuBatchRowLoop, OpsThatMixRowsAreRefused) {
    EXPECT_EQ(0u, rows_of(make_op("transpose", value_map{{"permutation", ints({1, 0})}}), batch, {batch}));
    EXPECT_EQ(0u, rows_of(make_op("softmax", value_map{{"axis", 0}}), batch, {batch}));
    EXPECT_EQ(0u, rows_of(make_op("concat", value_map{{"axis", 0}}), batch, {batch, fixed}));
}

TEST(CpuBatchRowLoop, ABatchFoldedIntoTheRowsRunsByBlocksOfItsRows) {
    // [batch * 16, 768] by [768, 768]: 16 rows per batch entry.
    const std::optional<varying_dimension> folded{varying_dimension{0, 16, 0}};
    EXPECT_EQ(16u, rows_of(make_op("dot"), folded, {folded, fixed}));
    EXPECT_EQ(16u, rows_of(make_op("pooling"), folded, {folded}));
    // Weights that vary as the rows of one matrix, or inputs with other rows per entry, are not blocks of entries.
    EXPECT_EQ(0u, rows_of(make_op("dot"), folded, {folded, folded}));
    EXPECT_EQ(0u, rows_of(make_op("dot"), folded, {batch, fixed}));
    EXPECT_EQ(0u, rows_of(make_op("convolution"), batch, {folded, fixed}));
}

TEST(CpuBatchRowLoop, ABatchThatIsNotDimensionZeroOrIsShiftedIsRefused) {
    const std::optional<varying_dimension> second{varying_dimension{1, 1, 0}};
    const std::optional<varying_dimension> shifted{varying_dimension{0, 1, 1}};
    EXPECT_EQ(0u, rows_of(make_op("pooling"), second, {second}));
    EXPECT_EQ(0u, rows_of(make_op("convolution"), batch, {shifted, fixed}));
    EXPECT_EQ(0u, rows_of(make_op("convolution"), fixed, {batch, fixed}));
}

TEST(CpuBatchRowLoop, AProductsSequenceAtBatchOneRunsByRowsOfItsSecondDimension) {
    // [1, seq, 768] by [768, 3072]: the rows are dimension 1, dimension 0 has length 1.
    const std::optional<varying_dimension> seq{varying_dimension{1, 1, 0}};
    const shape rows{dtype::float_type, {1, 512, 768}};
    const shape weights{dtype::float_type, {768, 3072}};
    const shape out{dtype::float_type, {1, 512, 3072}};
    EXPECT_EQ(1u, rows_per_batch_entry(make_op("dot"), seq, {seq, fixed}, out, {rows, weights}));
    // Not where dimension 0 is longer than one (rows of a sequence are not blocks of memory then) ...
    const shape batch_of_4{dtype::float_type, {4, 512, 768}};
    const shape out_of_4{dtype::float_type, {4, 512, 3072}};
    EXPECT_EQ(0u, rows_per_batch_entry(make_op("dot"), seq, {seq, fixed}, out_of_4, {batch_of_4, weights}));
    // ... nor a product's columns, nor another op's second dimension.
    const std::optional<varying_dimension> columns{varying_dimension{1, 1, 0}};
    const shape one_row{dtype::float_type, {1, 768}};
    const shape wide{dtype::float_type, {1, 3072}};
    EXPECT_EQ(0u, rows_per_batch_entry(make_op("dot"), columns, {fixed, columns}, wide, {one_row, weights}));
    const shape image{dtype::float_type, {1, 3, 32, 32}};
    const std::optional<varying_dimension> channels{varying_dimension{1, 1, 0}};
    EXPECT_EQ(0u, rows_per_batch_entry(make_op("pooling"), channels, {channels}, image, {image}));
}
