// runs_by_batch_rows: only ops whose result row n is computed from row n of
// each input that has the batch may run a smaller batch row by row on a
// batch-1 kernel; any other op, or a batch that is not dimension 0 with one
// row per unit of the extent, is refused (the program then compiles per batch).
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

}  // namespace

TEST(CpuBatchRowLoop, ConvolutionPoolingReductionAndReordersRunByRows) {
    EXPECT_TRUE(runs_by_batch_rows(make_op("convolution"), batch, {batch, fixed}));
    EXPECT_TRUE(runs_by_batch_rows(make_op("pooling"), batch, {batch}));
    EXPECT_TRUE(runs_by_batch_rows(make_op("reduce_mean", value_map{{"axes", ints({2, 3})}}), batch, {batch}));
}

TEST(CpuBatchRowLoop, ProductsRunByRowsOfTheirFirstInputOnly) {
    EXPECT_TRUE(runs_by_batch_rows(make_op("dot"), batch, {batch, fixed}));
    EXPECT_TRUE(runs_by_batch_rows(make_op("dot"), batch, {batch, batch}));  // a batch of matrices
    EXPECT_FALSE(runs_by_batch_rows(make_op("dot"), batch, {fixed, batch}));
}

TEST(CpuBatchRowLoop, OpsThatMixRowsAreRefused) {
    EXPECT_FALSE(runs_by_batch_rows(make_op("transpose", value_map{{"permutation", ints({1, 0})}}), batch, {batch}));
    EXPECT_FALSE(runs_by_batch_rows(make_op("softmax", value_map{{"axis", 0}}), batch, {batch}));
    EXPECT_FALSE(runs_by_batch_rows(make_op("concat", value_map{{"axis", 0}}), batch, {batch, fixed}));
}

TEST(CpuBatchRowLoop, ABatchThatIsNotOneRowPerUnitOfDimensionZeroIsRefused) {
    const std::optional<varying_dimension> second{varying_dimension{1, 1, 0}};
    const std::optional<varying_dimension> doubled{varying_dimension{0, 2, 0}};
    const std::optional<varying_dimension> shifted{varying_dimension{0, 1, 1}};
    EXPECT_FALSE(runs_by_batch_rows(make_op("pooling"), second, {second}));
    EXPECT_FALSE(runs_by_batch_rows(make_op("pooling"), doubled, {doubled}));
    EXPECT_FALSE(runs_by_batch_rows(make_op("convolution"), batch, {shifted, fixed}));
    EXPECT_FALSE(runs_by_batch_rows(make_op("convolution"), fixed, {batch, fixed}));
}
