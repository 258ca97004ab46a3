// fused_concat_pointwise: the result is cut into parts, each a contiguous
// run of the result and of one piece: for each index of the dimensions before
// the concatenation axis, a few consecutive indices along the axis within one
// piece (in the blocked layout, channel blocks of H x W x 8 or 16 floats, as many
// as make about 16K floats). A pointwise program over a part's shape runs on
// every part, its other inputs offset to the part; threads take parts (or
// groups of parts, below). The parts, groups and offsets are worked out when
// the kernel is built. A quantized result: the program writes each part into
// a per-thread buffer (in cache), which is quantized into the result from
// there. A channels-last quantized result (NHWC): a part is a run of one
// image's pixels within one piece, and a group is that run through every
// piece (threads take a few runs of consecutive groups each); the program
// runs over [pixels, the piece's channels] (each piece and operand seen
// through its own strides, so pieces in either layout), and each pixel's row
// of codes goes to its place in the result. There a piece may be int8 /
// uint8 codes (channels contiguous): a part's rows are dequantized into a
// per-thread buffer, which the program reads. A program that is a
// per-channel scale and shift then ReLU (DenseNet's pre-activation batch
// norm) runs without it on a piece with contiguous channels: each pixel's
// row goes from the piece's codes (or floats) to the result's codes in one
// pass (scale_shift_relu_codes_avx2.hpp, or on sixteen lanes _avx512.hpp:
// the concat_pointwise_avx512 algorithm), the same arithmetic. A
// channels-last float32 result (the last batch norm + ReLU, read by the
// global pool) runs the program into the per-thread buffer, whose rows are
// copied to their places.
#include <omp.h>

#include <algorithm>
#include <map>
#include <optional>

#include "ops/fused_concat_pointwise.hpp"
#include "ops/fused_quantized_linalg.hpp"
#include "ops/op_helpers.hpp"
#include "targets/cpu/kernels/cpu_features.hpp"
#include "targets/cpu/kernels/cpu_kernels.hpp"
#include "targets/cpu/kernels/pointwise/scale_shift_relu_codes_avx2.hpp"
#include "targets/cpu/kernels/pointwise/scale_shift_relu_codes_avx512.hpp"
#include "targets/cpu/kernels/quantize/linear_quantize_avx2.hpp"
#include "targets/cpu/kernels/scratch_alignment.hpp"

namespace kiln {

namespace {

// Results below this many elements stay on one thread.
constexpr std::size_t parallel_elements = std::size_t{1} << 15;
// Parts grow to about this many elements (several channel blocks of a small
// image) so that each run of the program has work enough.
constexpr std::size_t part_target_elements = std::size_t{1} << 14;
constexpr std::size_t max_inputs = 64;

struct part {
    std::size_t runner;  // index of the program for the part's shape
    std::size_t piece;
    std::size_t output_offset;
    std::size_t elements;
    // The part's values are `rows` rows of elements / rows, row r at
    // output_offset + r * row_stride in the result (a standard result: one row).
    std::size_t rows = 1;
    std::size_t row_stride = 0;
    // A coded piece: `rows` rows of elements / rows codes, row r at the
    // piece's offset + r * piece_row_stride (elements of the piece).
    std::size_t piece_row_stride = 0;
    std::size_t piece_channel_stride = 1;
    // Run by the scale-shift-ReLU rows rather than the program (when the
    // program is that; a float32 piece whose channels are not contiguous,
    // such as an average pooling's NCHW result, is first transposed into
    // rows in the per-thread buffer).
    bool direct = false;
};

// A program that is x * operand[scale] + operand[shift], then ReLU, with
// both operands one value per channel, contiguous along the channels.
struct scale_shift_relu_program {
    std::size_t scale = 0, shift = 0;  // operand indices (0: the program's value 1)
};

// How a coded piece's codes become the float32 values the program reads:
// dequantize_linear's loops, bit for bit.
struct piece_dequantization {
    dtype type = dtype::float_type;  // float_type: a float32 piece, read in place
    float scale = 1, zero_point = 0;
    void read(const void* codes, float* values, std::size_t n) const {
        if (type == dtype::uint8_type)
            avx2::dequantize_uint8(static_cast<const std::uint8_t*>(codes), values, n, scale, zero_point);
        else
            avx2::dequantize_int8(static_cast<const std::int8_t*>(codes), values, n, scale, zero_point);
    }
};

// Writes n float32 values as codes at `out` (element offset `at`): the
// quantize_linear loops, bit for bit.
struct output_quantization {
    dtype type = dtype::float_type;  // float_type: no quantization
    float scale = 1, zero_point = 0;
    void write(const float* values, void* out, std::size_t at, std::size_t n) const {
        if (type == dtype::uint8_type)
            avx2::quantize_to_uint8(values, static_cast<std::uint8_t*>(out) + at, n, scale, zero_point);
        else
            avx2::quantize_to_int8(values, static_cast<std::int8_t*>(out) + at, n, scale, zero_point);
    }
};

class concat_pointwise_kernel final : public cpu_kernel {
public:
    concat_pointwise_kernel(std::vector<std::shared_ptr<const pointwise_runner>> runners, std::size_t operands,
                            std::vector<part> parts, std::vector<std::size_t> offsets, bool parallel, int threads,
                            output_quantization quantization, std::vector<piece_dequantization> pieces = {},
                            std::optional<scale_shift_relu_program> direct = std::nullopt, bool float_rows = false,
                            std::vector<std::size_t> group_starts = {}, bool avx512_rows = false)
        : runners_(std::move(runners)),
          operands_(operands),
          parts_(std::move(parts)),
          group_starts_(std::move(group_starts)),
          offsets_(std::move(offsets)),
          threads_(parallel ? threads : 1),
          quantization_(quantization),
          pieces_(std::move(pieces)),
          direct_(direct),
          float_rows_(float_rows),
          code_rows_(avx512_rows ? &avx512::scale_shift_relu_code_rows : &avx2::scale_shift_relu_code_rows) {
        for (std::size_t i = 0; i < pieces_.size(); ++i) {
            scale_shift_relu_row row;
            row.input = pieces_[i].type == dtype::uint8_type  ? row_codes::uint8
                        : pieces_[i].type == dtype::int8_type ? row_codes::int8
                                                              : row_codes::float32;
            row.input_scale = pieces_[i].scale;
            row.input_zero_point = pieces_[i].zero_point;
            row.output = quantization_.type == dtype::uint8_type ? row_codes::uint8 : row_codes::int8;
            row.output_scale = quantization_.scale;
            row.output_zero_point = quantization_.zero_point;
            rows_.push_back(row);
        }
        if (group_starts_.empty()) {  // a group per part, taken one at a time (each part is contiguous)
            for (std::size_t p = 0; p < parts_.size(); ++p) group_starts_.push_back(p);
        } else {
            // Threads take a few runs of consecutive groups each, so that each
            // thread reads its pieces' rows as long streams (one group at a
            // time alternated the threads every few KB of each piece).
            chunk_ =
                std::max<int>(1, static_cast<int>(group_starts_.size() / (4 * static_cast<std::size_t>(threads_))));
        }
        group_starts_.push_back(parts_.size());
        for (const auto& r : runners_) runner_bytes_ = std::max(runner_bytes_, r->scratch_bytes());
        runner_bytes_ = scratch_aligned(runner_bytes_);
        if (quantization_.type != dtype::float_type || float_rows_)
            for (const auto& pt : parts_) part_bytes_ = std::max(part_bytes_, scratch_aligned(pt.elements * sizeof(float)));
        for (const auto& pt : parts_)
            if ((coded(pt.piece) && !pt.direct) || (pt.direct && pt.piece_channel_stride != 1)) piece_bytes_ = std::max(piece_bytes_, scratch_aligned(pt.elements * sizeof(float)));
    }

    void run(const argument& result, const std::vector<argument>& inputs, std::byte* scratch) const override {
        const std::size_t pieces = inputs.size() - operands_;
        const auto groups = static_cast<std::ptrdiff_t>(group_starts_.size() - 1);
        const std::size_t stride = operands_ + 1;  // offsets per part: the piece's, then each operand's
        const bool quantized = quantization_.type != dtype::float_type;
#pragma omp parallel num_threads(threads_)
        {
            std::byte* own = scratch + static_cast<std::size_t>(omp_get_thread_num()) * per_thread();
            auto* values = reinterpret_cast<float*>(own + runner_bytes_);
            auto* piece_values = reinterpret_cast<float*>(own + runner_bytes_ + part_bytes_);
            const void* data[max_inputs];
#pragma omp for schedule(dynamic, chunk_)
            for (std::ptrdiff_t g = 0; g < groups; ++g)
                for (std::size_t p = group_starts_[static_cast<std::size_t>(g)];
                     p < group_starts_[static_cast<std::size_t>(g) + 1]; ++p) {
                    const part& pt = parts_[p];
                    const std::size_t* off = offsets_.data() + p * stride;
                    if (pt.direct) {
                        const float* a = inputs[pieces + direct_->scale].data_as<float>() + off[direct_->scale + 1];
                        const float* b = inputs[pieces + direct_->shift].data_as<float>() + off[direct_->shift + 1];
                        const std::size_t row = pt.elements / pt.rows,
                                          bytes = inputs[pt.piece].get_shape().element_size();
                        if (pt.piece_channel_stride != 1) {  // float32 only: rows of channels gathered
                            const float* x = inputs[pt.piece].data_as<float>() + off[0];
                            for (std::size_t c = 0; c < row; ++c)
                                for (std::size_t k = 0; k < pt.rows; ++k)
                                    piece_values[k * row + c] =
                                        x[c * pt.piece_channel_stride + k * pt.piece_row_stride];
                            for (std::size_t k = 0; k < pt.rows; ++k)
                                avx2::scale_shift_relu_codes(rows_[pt.piece], piece_values + k * row, a, b,
                                                             result.data() + pt.output_offset + k * pt.row_stride, row);
                            continue;
                        }
                        code_rows_(rows_[pt.piece], inputs[pt.piece].data() + off[0] * bytes, pt.piece_row_stride, a, b,
                                   result.data() + pt.output_offset, pt.row_stride, row, pt.rows);
                        continue;
                    }
                    if (coded(pt.piece)) {
                        const piece_dequantization& d = pieces_[pt.piece];
                        const std::size_t row = pt.elements / pt.rows, bytes = dtype_size(d.type);
                        for (std::size_t k = 0; k < pt.rows; ++k)
                            d.read(inputs[pt.piece].data() + (off[0] + k * pt.piece_row_stride) * bytes,
                                   piece_values + k * row, row);
                        data[0] = piece_values;
                    } else {
                        data[0] = inputs[pt.piece].data_as<float>() + off[0];
                    }
                    for (std::size_t k = 0; k < operands_; ++k)
                        data[k + 1] = inputs[pieces + k].data_as<float>() + off[k + 1];
                    if (!quantized && !float_rows_) {
                        runners_[pt.runner]->run(data, result.data_as<float>() + pt.output_offset, own);
                        continue;
                    }
                    runners_[pt.runner]->run(data, values, own);
                    const std::size_t row = pt.elements / pt.rows;
                    if (!quantized) {  // each pixel's row of float32 values to its place in the result
                        for (std::size_t k = 0; k < pt.rows; ++k)
                            std::copy(values + k * row, values + (k + 1) * row,
                                      result.data_as<float>() + pt.output_offset + k * pt.row_stride);
                        continue;
                    }
                    for (std::size_t k = 0; k < pt.rows; ++k)
                        quantization_.write(values + k * row, result.data(), pt.output_offset + k * pt.row_stride, row);
                }
        }
    }
    std::size_t scratch_bytes() const override {
        return static_cast<std::size_t>(threads_) * per_thread();
    }

private:
    std::vector<std::shared_ptr<const pointwise_runner>> runners_;
    std::size_t operands_;
    std::vector<part> parts_;
    // Parts [group_starts_[g], group_starts_[g + 1]) run one after the other
    // on one thread.
    std::vector<std::size_t> group_starts_;
    int chunk_ = 1;  // groups per share of the loop over them
    std::vector<std::size_t> offsets_;
    int threads_;
    output_quantization quantization_;
    std::vector<piece_dequantization> pieces_;  // empty: every piece float32
    std::optional<scale_shift_relu_program> direct_;
    std::vector<scale_shift_relu_row> rows_;  // per piece, for direct parts
    bool float_rows_;  // a float32 result with parts of strided rows (channels-last)
    // The direct rows' loop: AVX-512's or AVX2's (the same codes).
    decltype(&avx2::scale_shift_relu_code_rows) code_rows_;
    // Per thread: the program's scratch, a part's values, a coded part's
    // dequantized values.
    std::size_t runner_bytes_ = 0;
    std::size_t part_bytes_ = 0;
    std::size_t piece_bytes_ = 0;
    std::size_t per_thread() const { return runner_bytes_ + part_bytes_ + piece_bytes_; }
    bool coded(std::size_t piece) const { return !pieces_.empty() && pieces_[piece].type != dtype::float_type; }
};

// A channels-last result below this many elements stays on one thread (as
// a standard one). It was 2^18 while the int8 convolutions around DenseNet's
// 14 x 14 and 7 x 7 layers ran on one thread and left the second asleep;
// with those convolutions on both threads (onednn_int8_convolution.cpp),
// DenseNet-121 QDQ at batch 1, 2 threads ran 0.91x to 0.94x the time with
// 2^15 against 2^18 (40 interleaved rounds, load average 1.7 to 1.8; batch 8
// unchanged, 0.995x).
constexpr std::size_t channels_last_parallel_elements = parallel_elements;

// Pixels per part of a channels-last result: about part_target_elements / 4
// values (the buffer stays in L1 while its codes are written).
constexpr std::size_t channels_last_part_elements = std::size_t{1} << 12;

// The [pixels, channels] view of a 4-D tensor's H x W x C with `strides`
// (its own, or broadcast over the result): nothing unless H and W flatten
// into one pixel dimension.
std::optional<std::pair<std::size_t, std::size_t>> pixel_and_channel_strides(const std::vector<std::size_t>& strides,
                                                                              std::size_t width) {
    if (strides[2] != strides[3] * width) return std::nullopt;
    return std::pair{strides[3], strides[1]};
}

// The program as scale-shift-ReLU over channels-last rows: steps mul(value
// 0, operand), add(that, operand), relu(that), the operands per channel.
std::optional<scale_shift_relu_program> scale_shift_relu_of(const std::vector<op::pointwise_step>& steps,
                                                            std::size_t operands,
                                                            const std::vector<std::vector<std::size_t>>& strides) {
    const std::size_t values = operands + 1;  // value 0 and the operands, then the steps' results
    if (steps.size() != 3 || steps[0].op.name() != "mul" || steps[1].op.name() != "add" || steps[2].op.name() != "relu")
        return std::nullopt;
    const auto other = [](const std::vector<std::size_t>& args, std::size_t known) -> std::optional<std::size_t> {
        if (args.size() != 2 || args[0] == args[1]) return std::nullopt;
        if (args[0] == known) return args[1];
        if (args[1] == known) return args[0];
        return std::nullopt;
    };
    const auto scale = other(steps[0].args, 0), shift = other(steps[1].args, values);
    if (!scale || !shift || steps[2].args != std::vector<std::size_t>{values + 1}) return std::nullopt;
    for (const std::size_t v : {*scale, *shift}) {
        if (v < 1 || v >= values) return std::nullopt;
        const auto& st = strides[v - 1];  // [N, C, H, W] strides over the result
        if (st[1] != 1 || st[2] != 0 || st[3] != 0) return std::nullopt;
    }
    return scale_shift_relu_program{*scale - 1, *shift - 1};
}

std::shared_ptr<const cpu_kernel> make_channels_last_kernel(const kernel_request& r,
                                                            const op::fused_concat_pointwise& op,
                                                            output_quantization quantization, bool avx512_rows) {
    const shape& out = r.output_shape;
    const auto pieces = static_cast<std::size_t>(op.pieces);
    const std::size_t operands = r.input_shapes.size() - pieces;
    const auto& lens = out.lens();
    if (lens.size() != 4 || out.strides() != op::channels_last_strides(lens)) return nullptr;
    const std::size_t images = lens[0], channels = lens[1], pixels = lens[2] * lens[3], width = lens[3];
    std::vector<std::vector<std::size_t>> operand_strides;
    for (std::size_t k = 0; k < operands; ++k) {
        operand_strides.push_back(ops::broadcast_strides(r.input_shapes[pieces + k], lens));
        if (!pixel_and_channel_strides(operand_strides.back(), width)) return nullptr;
    }
    std::vector<argument> constants{argument()};
    for (std::size_t k = 0; k < operands; ++k)
        constants.push_back(pieces + k < r.constant_inputs.size() ? r.constant_inputs[pieces + k] : argument());
    op::fused_pointwise program;
    program.steps = op.steps;

    // One program per part shape and piece layout.
    std::map<std::vector<std::size_t>, std::size_t> runner_of;
    std::vector<std::shared_ptr<const pointwise_runner>> runners;
    auto runner_for = [&](std::size_t count, std::size_t piece_channels, std::size_t piece_pixel_stride,
                          std::size_t piece_channel_stride) -> std::optional<std::size_t> {
        const std::vector<std::size_t> key{count, piece_channels, piece_pixel_stride, piece_channel_stride};
        if (auto it = runner_of.find(key); it != runner_of.end()) return it->second;
        const shape part_shape{dtype::float_type, {count, piece_channels}};
        std::vector<shape> program_inputs{
            shape{dtype::float_type, {count, piece_channels}, {piece_pixel_stride, piece_channel_stride}}};
        for (std::size_t k = 0; k < operands; ++k) {
            const auto [pixel_stride, channel_stride] = *pixel_and_channel_strides(operand_strides[k], width);
            program_inputs.push_back(shape{dtype::float_type,
                                           {pixel_stride == 0 ? 1 : count, channel_stride == 0 ? 1 : piece_channels},
                                           {pixel_stride, channel_stride}});
        }
        auto runner = make_pointwise_runner(op.steps, {program, program_inputs, part_shape, constants, 1});
        if (!runner) return std::nullopt;
        runners.push_back(std::move(runner));
        runner_of[key] = runners.size() - 1;
        return runners.size() - 1;
    };

    const auto direct = scale_shift_relu_of(op.steps, operands, operand_strides);
    std::vector<piece_dequantization> dequantization(pieces);
    for (std::size_t i = 0; i < pieces; ++i)
        if (op.coded_piece(r.input_shapes, i))
            dequantization[i] = {r.input_shapes[i].type(), static_cast<float>(op.piece_scales[i]),
                                 static_cast<float>(op.piece_zero_points[i])};
    // A group is a run of one image's pixels through every piece, so that the
    // result's rows are written whole while they are in cache (a piece at a
    // time, a 32-channel piece wrote half of each 64-byte line, and the next
    // piece came back for the other half after the whole image). Its pixels
    // make about channels_last_part_elements values of the widest piece.
    std::size_t widest_piece = 1;
    for (std::size_t i = 0; i < pieces; ++i) widest_piece = std::max(widest_piece, r.input_shapes[i].lens()[1]);
    const std::size_t step = std::max<std::size_t>(1, channels_last_part_elements / widest_piece);
    std::vector<part> parts;
    std::vector<std::size_t> offsets, group_starts;
    for (std::size_t n = 0; n < images; ++n) {
        for (std::size_t p = 0; p < pixels; p += step) {
            const std::size_t count = std::min(step, pixels - p);
            group_starts.push_back(parts.size());
            std::size_t start = 0;  // the piece's first channel in the result
            for (std::size_t i = 0; i < pieces; ++i) {
                const shape& piece = r.input_shapes[i];
                const auto view = pixel_and_channel_strides(piece.strides(), width);
                if (!view) return nullptr;
                const bool coded = dequantization[i].type != dtype::float_type;
                // A coded piece's rows are dequantized one by one: its channels must be contiguous.
                if (coded && view->second != 1) return nullptr;
                const std::size_t piece_channels = piece.lens()[1];
                // The program reads a coded part from the buffer, rows packed.
                const auto runner = coded ? runner_for(count, piece_channels, piece_channels, 1)
                                          : runner_for(count, piece_channels, view->first, view->second);
                if (!runner) return nullptr;
                // The direct rows write codes only.
                const bool direct_part =
                    direct && quantization.type != dtype::float_type && (!coded || view->second == 1);
                parts.push_back({*runner, i, (n * pixels + p) * channels + start, count * piece_channels, count,
                                 channels, view->first, view->second, direct_part});
                offsets.push_back(n * piece.strides()[0] + p * view->first);
                for (std::size_t k = 0; k < operands; ++k) {
                    const auto& st = operand_strides[k];
                    offsets.push_back(n * st[0] + p * st[3] + start * st[1]);
                }
                start += piece_channels;
            }
        }
    }
    // Without direct rows the AVX-512 variant would be the AVX2 kernel under another name.
    if (avx512_rows && std::none_of(parts.begin(), parts.end(), [](const part& pt) { return pt.direct; }))
        return nullptr;
    return std::make_shared<concat_pointwise_kernel>(
        std::move(runners), operands, std::move(parts), std::move(offsets),
        out.elements() >= channels_last_parallel_elements, r.threads, quantization, std::move(dequantization), direct,
        quantization.type == dtype::float_type, std::move(group_starts), avx512_rows);
}

std::shared_ptr<const cpu_kernel> make_kernel(const kernel_request& r, bool avx512_rows) {
    const auto* op = r.op.get_if<op::fused_concat_pointwise>();
    if (op == nullptr) return nullptr;
    const shape& out = r.output_shape;
    output_quantization quantization;
    if (op->quantized()) {
        if (!avx2::supported()) return nullptr;
        quantization = {out.type(), static_cast<float>(op->output_scale), static_cast<float>(op->output_zero_point)};
    } else if (out.type() != dtype::float_type) {
        return nullptr;
    }
    if (out.elements() == 0 || op->pieces < 1) return nullptr;
    const auto pieces = static_cast<std::size_t>(op->pieces);
    if (r.input_shapes.size() > max_inputs || pieces > r.input_shapes.size()) return nullptr;
    // Coded pieces are read by the channels-last kernel only.
    bool any_coded = false;
    for (std::size_t i = 0; i < r.input_shapes.size(); ++i) {
        if (i < pieces && op->coded_piece(r.input_shapes, i)) {
            any_coded = true;
            if (!avx2::supported()) return nullptr;
        } else if (r.input_shapes[i].type() != dtype::float_type) {
            return nullptr;
        }
    }
    if (any_coded && !op->channels_last) return nullptr;
    if (op->channels_last) return make_channels_last_kernel(r, *op, quantization, avx512_rows);
    if (avx512_rows) return nullptr;
    if (!out.standard()) return nullptr;
    const std::size_t operands = r.input_shapes.size() - pieces;
    const std::size_t rank = out.ndim();
    const std::size_t axis = ops::normalize_axis(op->name(), op->axis, rank);
    for (std::size_t i = 0; i < pieces; ++i)
        if (r.input_shapes[i].type() != dtype::float_type || !r.input_shapes[i].standard()) return nullptr;
    for (std::size_t k = 0; k < operands; ++k)
        if (r.input_shapes[pieces + k].type() != dtype::float_type) return nullptr;

    const auto& lens = out.lens();
    std::size_t inner = 1, outer = 1;
    for (std::size_t d = axis + 1; d < rank; ++d) inner *= lens[d];
    for (std::size_t d = 0; d < axis; ++d) outer *= lens[d];
    const std::size_t max_extent = std::max<std::size_t>(1, part_target_elements / std::max<std::size_t>(1, inner));
    std::vector<std::vector<std::size_t>> operand_strides;
    for (std::size_t k = 0; k < operands; ++k)
        operand_strides.push_back(ops::broadcast_strides(r.input_shapes[pieces + k], lens));
    std::vector<argument> constants{argument()};
    for (std::size_t k = 0; k < operands; ++k)
        constants.push_back(pieces + k < r.constant_inputs.size() ? r.constant_inputs[pieces + k] : argument());
    op::fused_pointwise program;
    program.steps = op->steps;

    // One program per extent along the axis that parts have: a part is
    // [1, ..., 1, extent, the result's dimensions after the axis].
    std::map<std::size_t, std::size_t> runner_of_extent;
    std::vector<std::shared_ptr<const pointwise_runner>> runners;
    auto runner_for = [&](std::size_t extent) -> std::optional<std::size_t> {
        if (auto it = runner_of_extent.find(extent); it != runner_of_extent.end()) return it->second;
        std::vector<std::size_t> part_lens = lens;
        for (std::size_t d = 0; d < axis; ++d) part_lens[d] = 1;
        part_lens[axis] = extent;
        const shape part_shape{dtype::float_type, part_lens};
        std::vector<shape> program_inputs{part_shape};
        for (std::size_t k = 0; k < operands; ++k) {
            std::vector<std::size_t> own_lens = part_lens;
            for (std::size_t d = axis; d < rank; ++d)
                if (operand_strides[k][d] == 0) own_lens[d] = 1;
            program_inputs.push_back(shape{dtype::float_type, own_lens, operand_strides[k]});
        }
        auto runner = make_pointwise_runner(op->steps, {program, program_inputs, part_shape, constants, 1});
        if (!runner) return std::nullopt;
        runners.push_back(std::move(runner));
        runner_of_extent[extent] = runners.size() - 1;
        return runners.size() - 1;
    };

    std::vector<part> parts;
    std::vector<std::size_t> offsets;
    std::vector<std::size_t> idx(axis, 0);
    for (std::size_t o = 0; o < outer; ++o) {
        std::size_t rest = o;
        for (std::size_t d = axis; d-- > 0;) {
            idx[d] = rest % lens[d];
            rest /= lens[d];
        }
        std::size_t start = 0;  // along the result's axis
        for (std::size_t i = 0; i < pieces; ++i) {
            const auto& piece_strides = r.input_shapes[i].strides();
            const std::size_t len = r.input_shapes[i].lens()[axis];
            for (std::size_t c = 0; c < len; c += max_extent) {
                const std::size_t extent = std::min(max_extent, len - c);
                const auto runner = runner_for(extent);
                if (!runner) return nullptr;
                std::size_t piece_offset = c * piece_strides[axis],
                            output_offset = (o * lens[axis] + start + c) * inner;
                for (std::size_t d = 0; d < axis; ++d) piece_offset += idx[d] * piece_strides[d];
                parts.push_back({*runner, i, output_offset, extent * inner});
                offsets.push_back(piece_offset);
                for (std::size_t k = 0; k < operands; ++k) {
                    std::size_t off = (start + c) * operand_strides[k][axis];
                    for (std::size_t d = 0; d < axis; ++d) off += idx[d] * operand_strides[k][d];
                    offsets.push_back(off);
                }
            }
            start += len;
        }
    }
    const int threads = r.threads;
    return std::make_shared<concat_pointwise_kernel>(std::move(runners), operands, std::move(parts), std::move(offsets),
                                                     out.elements() >= parallel_elements, threads, quantization);
}

}  // namespace

std::shared_ptr<const cpu_kernel> make_concat_pointwise_kernel(const kernel_request& r) {
    return make_kernel(r, false);
}

std::shared_ptr<const cpu_kernel> make_concat_pointwise_avx512_kernel(const kernel_request& r) {
    return avx512::enabled() ? make_kernel(r, true) : nullptr;
}

}  // namespace kiln
