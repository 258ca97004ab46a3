// The pointwise program interpreter (see pointwise_avx2.hpp): blocks of the
// output run through the program one vector loop per instruction, so each
// loop is tight and every intermediate stays in L1. Threads take blocks.
#include <omp.h>

#include <cstring>

#include "targets/cpu/kernels/pointwise/pointwise_avx2.hpp"
#include "targets/cpu/kernels/vector_math_avx2.hpp"

namespace kiln::avx2 {

namespace {

constexpr std::size_t block = pointwise_block;

std::size_t thread_floats(const pw_program& p) {
    return p.slot_count * block;
}

// Reads `count` elements of input `in` starting at output element `start`
// into `dst`, as floats or as lane masks.
void gather(const pw_program& p, const pw_input& in, const void* data, std::size_t start, std::size_t count,
            float* dst) {
    const std::size_t rank = p.rank;
    std::size_t idx[pointwise_max_rank];
    std::size_t offset = 0;
    std::size_t rest = start;
    for (std::size_t d = rank; d-- > 0;) {
        idx[d] = rest % p.lens[d];
        rest /= p.lens[d];
        offset += idx[d] * in.strides[d];
    }
    const std::size_t inner = rank - 1;
    const std::size_t stride = in.strides[inner];
    const float* f = static_cast<const float*>(data);
    const std::uint8_t* b = static_cast<const std::uint8_t*>(data);
    std::uint32_t* mask = reinterpret_cast<std::uint32_t*>(dst);
    std::size_t pos = 0;
    while (pos < count) {
        const std::size_t run = p.lens[inner] - idx[inner] < count - pos ? p.lens[inner] - idx[inner] : count - pos;
        if (in.is_bool) {
            for (std::size_t j = 0; j < run; ++j) mask[pos + j] = b[offset + j * stride] ? ~0u : 0u;
        } else if (stride == 1) {
            std::memcpy(dst + pos, f + offset, run * sizeof(float));
        } else if (stride == 0) {
            const float v = f[offset];
            for (std::size_t j = 0; j < run; ++j) dst[pos + j] = v;
        } else {
            for (std::size_t j = 0; j < run; ++j) dst[pos + j] = f[offset + j * stride];
        }
        pos += run;
        idx[inner] += run;
        offset += run * stride;
        if (idx[inner] < p.lens[inner]) continue;
        offset -= p.lens[inner] * stride;
        idx[inner] = 0;
        for (std::size_t d = inner; d-- > 0;) {
            offset += in.strides[d];
            if (++idx[d] < p.lens[d]) break;
            offset -= p.lens[d] * in.strides[d];
            idx[d] = 0;
        }
    }
}

// gather() for an input with repeated_vector set: a row of L floats (L the
// innermost extent, a multiple of 8) repeated along the next dimension out.
// Blocks start at multiples of 8 and the output has a multiple of 8
// elements, so runs are whole vectors.
void gather_repeated_vector(const pw_program& p, const pw_input& in, const void* data, std::size_t start,
                            std::size_t count, float* dst) {
    const std::size_t outer = p.rank - 2;  // the dimension the row repeats along
    const std::size_t row = p.lens[p.rank - 1];
    std::size_t idx[pointwise_max_rank];
    std::size_t offset = 0;
    std::size_t rest = start / row, lane = start % row;
    for (std::size_t d = outer + 1; d-- > 0;) {
        idx[d] = rest % p.lens[d];
        rest /= p.lens[d];
        offset += idx[d] * in.strides[d];
    }
    const float* f = static_cast<const float*>(data);
    std::size_t pos = 0;
    while (pos < count) {
        if (row == 8) {  // one vector: load it once for the whole repeat run
            const __m256 v = _mm256_loadu_ps(f + offset);
            const std::size_t left = (p.lens[outer] - idx[outer]) * 8;
            const std::size_t run = left < count - pos ? left : count - pos;
            for (std::size_t j = 0; j < run; j += 8) _mm256_storeu_ps(dst + pos + j, v);
            pos += run;
            idx[outer] += run / 8;
        } else {  // the rest of the current row
            const std::size_t n = row - lane < count - pos ? row - lane : count - pos;
            for (std::size_t j = 0; j < n; j += 8) _mm256_storeu_ps(dst + pos + j, _mm256_loadu_ps(f + offset + lane + j));
            pos += n;
            lane += n;
            if (lane < row) break;
            lane = 0;
            ++idx[outer];
        }
        if (idx[outer] < p.lens[outer]) continue;
        idx[outer] = 0;
        for (std::size_t d = outer; d-- > 0;) {
            offset += in.strides[d];
            if (++idx[d] < p.lens[d]) break;
            offset -= p.lens[d] * in.strides[d];
            idx[d] = 0;
        }
    }
}

template <class F>
void unary(float* d, const float* a, std::size_t n, F f) {
    for (std::size_t i = 0; i < n; i += 8) _mm256_storeu_ps(d + i, f(_mm256_loadu_ps(a + i)));
}

template <class F>
void binary(float* d, const float* a, const float* b, std::size_t n, F f) {
    for (std::size_t i = 0; i < n; i += 8) _mm256_storeu_ps(d + i, f(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
}

template <class F>
void ternary(float* d, const float* a, const float* b, const float* c, std::size_t n, F f) {
    for (std::size_t i = 0; i < n; i += 8)
        _mm256_storeu_ps(d + i, f(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), _mm256_loadu_ps(c + i)));
}

__m256 is_nan(__m256 x) {
    return _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
}

// The reference kernels' rules hold bit for bit: max and min give NaN when
// either input is NaN; relu and abs keep -0.0 and NaN as they are.
void execute(const pw_instruction& ins, float* d, const float* a, const float* b, const float* c, std::size_t n) {
    const __m256 zero = _mm256_setzero_ps();
    const __m256 one = splat(1.0f);
    switch (ins.op) {
        case pw_op::copy:
            if (d != a) std::memcpy(d, a, n * sizeof(float));
            return;
        case pw_op::neg:
            return unary(d, a, n, [](__m256 x) { return _mm256_xor_ps(x, splat(-0.0f)); });
        case pw_op::abs:
            return unary(d, a, n, [&](__m256 x) {
                return _mm256_blendv_ps(x, _mm256_sub_ps(zero, x), _mm256_cmp_ps(x, zero, _CMP_LT_OQ));
            });
        case pw_op::exp:
            return unary(d, a, n, exp_ps);
        case pw_op::sqrt:
            return unary(d, a, n, [](__m256 x) { return _mm256_sqrt_ps(x); });
        case pw_op::rsqrt:
            return unary(d, a, n, [&](__m256 x) { return _mm256_div_ps(one, _mm256_sqrt_ps(x)); });
        case pw_op::reciprocal:
            return unary(d, a, n, [&](__m256 x) { return _mm256_div_ps(one, x); });
        case pw_op::tanh:
            return unary(d, a, n, tanh_ps);
        case pw_op::sigmoid:
            return unary(d, a, n, sigmoid_ps);
        case pw_op::relu:
            return unary(d, a, n, [&](__m256 x) { return _mm256_andnot_ps(_mm256_cmp_ps(x, zero, _CMP_LT_OQ), x); });
        case pw_op::erf:
            return unary(d, a, n, erf_ps);
        case pw_op::floor:
            return unary(d, a, n,
                         [](__m256 x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); });
        case pw_op::ceil:
            return unary(d, a, n,
                         [](__m256 x) { return _mm256_round_ps(x, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC); });
        case pw_op::round:
            return unary(d, a, n,
                         [](__m256 x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); });
        case pw_op::sign:
            return unary(d, a, n, [&](__m256 x) {
                return _mm256_sub_ps(_mm256_and_ps(_mm256_cmp_ps(x, zero, _CMP_GT_OQ), one),
                                     _mm256_and_ps(_mm256_cmp_ps(x, zero, _CMP_LT_OQ), one));
            });
        case pw_op::gelu_erf:
            return unary(d, a, n, gelu_erf_ps);
        case pw_op::gelu_tanh:
            return unary(d, a, n, gelu_tanh_ps);
        case pw_op::square:
            return unary(d, a, n, [](__m256 x) { return _mm256_mul_ps(x, x); });
        case pw_op::cube:
            return unary(d, a, n, [](__m256 x) { return _mm256_mul_ps(_mm256_mul_ps(x, x), x); });
        case pw_op::add:
            return binary(d, a, b, n, [](__m256 x, __m256 y) { return _mm256_add_ps(x, y); });
        case pw_op::sub:
            return binary(d, a, b, n, [](__m256 x, __m256 y) { return _mm256_sub_ps(x, y); });
        case pw_op::mul:
            return binary(d, a, b, n, [](__m256 x, __m256 y) { return _mm256_mul_ps(x, y); });
        case pw_op::div:
            return binary(d, a, b, n, [](__m256 x, __m256 y) { return _mm256_div_ps(x, y); });
        case pw_op::max:
            // a < b ? b : a (which of +0 and -0 wins follows the order), NaN if either is.
            return binary(d, a, b, n, [](__m256 x, __m256 y) {
                return _mm256_blendv_ps(_mm256_blendv_ps(x, y, _mm256_cmp_ps(x, y, _CMP_LT_OQ)), y, is_nan(y));
            });
        case pw_op::min:
            return binary(d, a, b, n, [](__m256 x, __m256 y) {
                return _mm256_blendv_ps(_mm256_blendv_ps(x, y, _mm256_cmp_ps(y, x, _CMP_LT_OQ)), y, is_nan(y));
            });
        case pw_op::clip:
            // x < lo -> lo, then hi < x -> hi; a NaN x or bound leaves x as it is.
            return ternary(d, a, b, c, n, [](__m256 x, __m256 lo, __m256 hi) {
                x = _mm256_blendv_ps(x, lo, _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
                return _mm256_blendv_ps(x, hi, _mm256_cmp_ps(hi, x, _CMP_LT_OQ));
            });
        case pw_op::equal:
            return binary(d, a, b, n, [](__m256 x, __m256 y) { return _mm256_cmp_ps(x, y, _CMP_EQ_OQ); });
        case pw_op::less:
            return binary(d, a, b, n, [](__m256 x, __m256 y) { return _mm256_cmp_ps(x, y, _CMP_LT_OQ); });
        case pw_op::greater:
            return binary(d, a, b, n, [](__m256 x, __m256 y) { return _mm256_cmp_ps(x, y, _CMP_GT_OQ); });
        case pw_op::nonzero:
            return unary(d, a, n, [&](__m256 x) { return _mm256_cmp_ps(x, zero, _CMP_NEQ_UQ); });
        case pw_op::logical_not:
            return unary(d, a, n,
                         [](__m256 x) { return _mm256_xor_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(-1))); });
        case pw_op::logical_and:
            return binary(d, a, b, n, [](__m256 x, __m256 y) { return _mm256_and_ps(x, y); });
        case pw_op::logical_or:
            return binary(d, a, b, n, [](__m256 x, __m256 y) { return _mm256_or_ps(x, y); });
        case pw_op::logical_xor:
            return binary(d, a, b, n, [](__m256 x, __m256 y) { return _mm256_xor_ps(x, y); });
        case pw_op::mask_to_float:
            return unary(d, a, n, [&](__m256 x) { return _mm256_and_ps(x, one); });
        case pw_op::where:
            return ternary(d, a, b, c, n, [](__m256 m, __m256 x, __m256 y) { return _mm256_blendv_ps(y, x, m); });
        case pw_op::unary_function:
            for (std::size_t i = 0; i < n; ++i) d[i] = ins.unary_function(a[i]);
            return;
        case pw_op::binary_function:
            for (std::size_t i = 0; i < n; ++i) d[i] = ins.binary_function(a[i], b[i]);
            return;
    }
}

// Runs blocks [first, last) with the slots at `slots`.
void run_blocks(const pw_program& p, const void* const* inputs, void* output, float* slots, std::size_t first,
                std::size_t last) {
    float* slot_ptr[64];
    for (std::size_t b = first; b < last; ++b) {
        const std::size_t start = b * block;
        const std::size_t count = p.elements - start < block ? p.elements - start : block;
        const bool full = count == block;
        const std::size_t padded = (count + 7) & ~std::size_t{7};
        for (std::size_t s = 0; s < p.slot_count; ++s) slot_ptr[s] = slots + s * block;
        for (std::size_t i = 0; i < p.input_count; ++i) {
            const pw_input& in = p.inputs[i];
            if (in.constant) continue;
            if (in.in_place && full)
                slot_ptr[in.slot] = const_cast<float*>(static_cast<const float*>(inputs[i]) + start);
            else if (in.repeated_vector)
                gather_repeated_vector(p, in, inputs[i], start, count, slot_ptr[in.slot]);
            else
                gather(p, in, inputs[i], start, count, slot_ptr[in.slot]);
        }
        float* out = static_cast<float*>(output) + start;
        const bool direct = full && !p.result_is_bool;
        for (std::size_t k = 0; k < p.code_size; ++k) {
            const pw_instruction& ins = p.code[k];
            float* d = (direct && k + 1 == p.code_size) ? out : slot_ptr[ins.dst];
            execute(ins, d, slot_ptr[ins.src[0]], slot_ptr[ins.src[1]], slot_ptr[ins.src[2]], padded);
        }
        if (direct) continue;
        const float* result = slot_ptr[p.result_slot];
        if (p.result_is_bool) {
            const std::uint32_t* m = reinterpret_cast<const std::uint32_t*>(result);
            std::uint8_t* o = static_cast<std::uint8_t*>(output) + start;
            for (std::size_t j = 0; j < count; ++j) o[j] = m[j] ? 1 : 0;
        } else {
            std::memcpy(out, result, count * sizeof(float));
        }
    }
}

// Walks a repeated_vector input (or a constant one) along the output eight
// elements at a time, as gather_repeated_vector does.
class vector_cursor {
public:
    vector_cursor(const pw_program& p, const pw_input& in, const void* data, std::size_t start)
        : p_(p), in_(in), data_(static_cast<const float*>(data)) {
        if (in.constant) {
            value_ = _mm256_set1_ps(*data_);
            return;
        }
        outer_ = p.rank - 2;
        row_ = p.lens[p.rank - 1];
        std::size_t rest = start / row_;
        lane_ = start % row_;
        for (std::size_t d = outer_ + 1; d-- > 0;) {
            idx_[d] = rest % p.lens[d];
            rest /= p.lens[d];
            offset_ += idx_[d] * in.strides[d];
        }
        left_ = p.lens[outer_] - idx_[outer_];
        value_ = _mm256_loadu_ps(data_ + offset_ + lane_);
    }
    __m256 value() const { return value_; }
    void advance() {
        if (in_.constant) return;
        lane_ += 8;
        if (lane_ == row_) {
            lane_ = 0;
            if (--left_ > 0 && row_ == 8) return;  // the same vector again
            if (left_ == 0) {
                for (std::size_t d = outer_; d-- > 0;) {
                    offset_ += in_.strides[d];
                    if (++idx_[d] < p_.lens[d]) break;
                    offset_ -= p_.lens[d] * in_.strides[d];
                    idx_[d] = 0;
                }
                left_ = p_.lens[outer_];
            }
        }
        value_ = _mm256_loadu_ps(data_ + offset_ + lane_);
    }

private:
    const pw_program& p_;
    const pw_input& in_;
    const float* data_;
    std::size_t idx_[pointwise_max_rank] = {};
    std::size_t outer_ = 0, offset_ = 0, left_ = 0, row_ = 8, lane_ = 0;
    __m256 value_;
};

// Output elements [first, last) of an affine program (see pw_program): the
// product and the sum are rounded separately, as the reference rounds them.
void run_affine(const pw_program& p, const void* const* inputs, void* output, std::size_t first, std::size_t last) {
    const float* x = static_cast<const float*>(inputs[p.affine_x]);
    float* y = static_cast<float*>(output);
    vector_cursor scale(p, p.inputs[p.affine_scale], inputs[p.affine_scale], first);
    vector_cursor shift(p, p.inputs[p.affine_shift], inputs[p.affine_shift], first);
    const __m256 zero = _mm256_setzero_ps();
    for (std::size_t i = first; i < last; i += 8) {
        __m256 product = _mm256_mul_ps(_mm256_loadu_ps(x + i), scale.value());
        // An empty asm the product must pass through: the compiler cannot fuse it with the add into an FMA.
        __asm__("" : "+x"(product));
        __m256 r = _mm256_add_ps(product, shift.value());
        if (p.affine_relu) r = _mm256_andnot_ps(_mm256_cmp_ps(r, zero, _CMP_LT_OQ), r);
        _mm256_storeu_ps(y + i, r);
        scale.advance();
        shift.advance();
    }
}

// Inputs with one value (all strides 0) are spread over their slot once.
void fill_constants(const pw_program& p, const void* const* inputs, float* slots) {
    for (std::size_t i = 0; i < p.input_count; ++i) {
        const pw_input& in = p.inputs[i];
        if (!in.constant) continue;
        float value;
        if (in.is_bool) {
            const std::uint32_t bits = *static_cast<const std::uint8_t*>(inputs[i]) ? ~0u : 0u;
            std::memcpy(&value, &bits, sizeof value);
        } else {
            value = *static_cast<const float*>(inputs[i]);
        }
        float* dst = slots + static_cast<std::size_t>(in.slot) * block;
        for (std::size_t j = 0; j < block; ++j) dst[j] = value;
    }
}

}  // namespace

std::size_t pointwise_scratch_bytes(const pw_program& p) {
    return static_cast<std::size_t>(p.threads) * thread_floats(p) * sizeof(float);
}

void run_pointwise(const pw_program& p, const void* const* inputs, void* output, std::byte* scratch) {
    if (p.elements == 0) return;
    const std::size_t blocks = (p.elements + block - 1) / block;
    if (p.affine_x >= 0) {
        if (p.threads <= 1 || p.elements < p.parallel_elements) return run_affine(p, inputs, output, 0, p.elements);
#pragma omp parallel num_threads(p.threads)
        {
            const auto t = static_cast<std::size_t>(omp_get_thread_num());
            const auto nt = static_cast<std::size_t>(omp_get_num_threads());
            const std::size_t first = blocks * t / nt * block, last = blocks * (t + 1) / nt * block;
            run_affine(p, inputs, output, first, last < p.elements ? last : p.elements);
        }
        return;
    }
    float* all_slots = reinterpret_cast<float*>(scratch);
    if (p.threads <= 1 || p.elements < p.parallel_elements) {
        fill_constants(p, inputs, all_slots);
        run_blocks(p, inputs, output, all_slots, 0, blocks);
        return;
    }
#pragma omp parallel num_threads(p.threads)
    {
        const auto t = static_cast<std::size_t>(omp_get_thread_num());
        const auto nt = static_cast<std::size_t>(omp_get_num_threads());
        float* slots = all_slots + t * thread_floats(p);
        fill_constants(p, inputs, slots);
        // Contiguous ranges of blocks: neighbours share cache lines at the edges only.
        const std::size_t first = blocks * t / nt, last = blocks * (t + 1) / nt;
        run_blocks(p, inputs, output, slots, first, last);
    }
}

namespace {
template <class F>
void apply_array(const float* x, float* y, std::size_t n, F f) {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, f(_mm256_loadu_ps(x + i)));
    if (i < n) {
        const __m256i m = tail_mask(n - i);
        _mm256_maskstore_ps(y + i, m, f(_mm256_maskload_ps(x + i, m)));
    }
}
}  // namespace

void exp_array(const float* x, float* y, std::size_t n) {
    apply_array(x, y, n, exp_ps);
}
void tanh_array(const float* x, float* y, std::size_t n) {
    apply_array(x, y, n, tanh_ps);
}
void sigmoid_array(const float* x, float* y, std::size_t n) {
    apply_array(x, y, n, sigmoid_ps);
}
void erf_array(const float* x, float* y, std::size_t n) {
    apply_array(x, y, n, erf_ps);
}
void gelu_erf_array(const float* x, float* y, std::size_t n) {
    apply_array(x, y, n, gelu_erf_ps);
}
void gelu_tanh_array(const float* x, float* y, std::size_t n) {
    apply_array(x, y, n, gelu_tanh_ps);
}

}  // namespace kiln::avx2
