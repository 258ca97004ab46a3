// The CUDA pointwise interpreter: one thread per output element (grid-stride
// loop), which loads every input at its broadcast offset (the output index
// itself, 0, or the index modulo a bias's size when every input is of those
// forms; else a walk over the dims), runs the program's
// steps in registers and stores the last one. Formulas follow the reference
// compute in src/ops/pointwise_functions.hpp, rounded to each step's type
// (see pointwise_program.hpp). The reference computes in double; a program
// with no float64 value computes in float instead (F = float): its values are
// float32 / 16-bit numbers, so +, -, *, / and sqrt round exactly as the
// reference's double-then-round does, and the library functions (exp, tanh,
// erf, ...) stay within a few float32 ulps of it. float64 programs keep double.
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "targets/gpu/cuda/cuda_check.hpp"
#include "targets/gpu/cuda/pointwise_program.hpp"
#include "targets/gpu/cuda/repeat_period.hpp"

namespace kiln::pointwise {

namespace {

// F: the floating compute type (double, or float when no value is float64).
template <class F>
union reg {
    F f;
    long long i;
};

using u64 = unsigned long long;

// The integer value of `x` wrapped to the width and signedness of `t`.
__device__ long long wrap(long long x, value_type t) {
    switch (t) {
    case value_type::i8: return static_cast<signed char>(static_cast<unsigned char>(x & 0xff));
    case value_type::i16: return static_cast<short>(static_cast<unsigned short>(x & 0xffff));
    case value_type::i32: return static_cast<int>(static_cast<unsigned int>(x & 0xffffffffll));
    case value_type::u8: return x & 0xff;
    case value_type::u16: return x & 0xffff;
    case value_type::u32: return x & 0xffffffffll;
    case value_type::boolean: return x != 0 ? 1 : 0;
    default: return x;  // i64
    }
}

// A value rounded to `t` as the reference stores it (half and bfloat16 through float).
template <class F>
__device__ F round_to(F x, value_type t) {
    switch (t) {
    case value_type::f32: return static_cast<F>(static_cast<float>(x));
    case value_type::f16: return static_cast<F>(__half2float(__float2half_rn(static_cast<float>(x))));
    case value_type::bf16: return static_cast<F>(__bfloat162float(__float2bfloat16_rn(static_cast<float>(x))));
    default: return x;  // f64 (only in double programs)
    }
}

template <class F>
__device__ F quiet_nan();
template <>
__device__ double quiet_nan<double>() {
    return __longlong_as_double(0x7ff8000000000000ll);
}
template <>
__device__ float quiet_nan<float>() {
    return __int_as_float(0x7fc00000);
}

template <class F>
__device__ reg<F> load(const void* data, std::uint64_t offset, value_type t) {
    reg<F> r;
    switch (t) {
    case value_type::f32: r.f = static_cast<const float*>(data)[offset]; break;
    case value_type::f16: r.f = __half2float(static_cast<const __half*>(data)[offset]); break;
    case value_type::bf16: r.f = __bfloat162float(static_cast<const __nv_bfloat16*>(data)[offset]); break;
    case value_type::f64: r.f = static_cast<F>(static_cast<const double*>(data)[offset]); break;
    case value_type::i8: r.i = static_cast<const signed char*>(data)[offset]; break;
    case value_type::i16: r.i = static_cast<const short*>(data)[offset]; break;
    case value_type::i32: r.i = static_cast<const int*>(data)[offset]; break;
    case value_type::i64: r.i = static_cast<const long long*>(data)[offset]; break;
    case value_type::u8: r.i = static_cast<const unsigned char*>(data)[offset]; break;
    case value_type::u16: r.i = static_cast<const unsigned short*>(data)[offset]; break;
    case value_type::u32: r.i = static_cast<const unsigned int*>(data)[offset]; break;
    case value_type::boolean: r.i = static_cast<const unsigned char*>(data)[offset] != 0 ? 1 : 0; break;
    }
    return r;
}

template <class F>
__device__ void store(void* data, std::uint64_t index, value_type t, reg<F> r) {
    switch (t) {
    case value_type::f32: static_cast<float*>(data)[index] = static_cast<float>(r.f); break;
    case value_type::f16: static_cast<__half*>(data)[index] = __float2half_rn(static_cast<float>(r.f)); break;
    case value_type::bf16:
        static_cast<__nv_bfloat16*>(data)[index] = __float2bfloat16_rn(static_cast<float>(r.f));
        break;
    case value_type::f64: static_cast<double*>(data)[index] = static_cast<double>(r.f); break;
    case value_type::i8: static_cast<signed char*>(data)[index] = static_cast<signed char>(r.i); break;
    case value_type::i16: static_cast<short*>(data)[index] = static_cast<short>(r.i); break;
    case value_type::i32: static_cast<int*>(data)[index] = static_cast<int>(r.i); break;
    case value_type::i64: static_cast<long long*>(data)[index] = r.i; break;
    case value_type::u8: static_cast<unsigned char*>(data)[index] = static_cast<unsigned char>(r.i); break;
    case value_type::u16: static_cast<unsigned short*>(data)[index] = static_cast<unsigned short>(r.i); break;
    case value_type::u32: static_cast<unsigned int*>(data)[index] = static_cast<unsigned int>(r.i); break;
    case value_type::boolean: static_cast<unsigned char*>(data)[index] = r.i != 0 ? 1 : 0; break;
    }
}

// float -> integer convert: NaN -> 0, saturated to the target's range, else truncated.
__device__ long long saturating_float_to_int(double d, value_type t) {
    if (d != d) return 0;
    double lo = 0, hi = 0;
    switch (t) {
    case value_type::i8: lo = -128.0; hi = 127.0; break;
    case value_type::i16: lo = -32768.0; hi = 32767.0; break;
    case value_type::i32: lo = -2147483648.0; hi = 2147483647.0; break;
    case value_type::i64: lo = -9223372036854775808.0; hi = 9223372036854775807.0; break;  // hi rounds to 2^63
    case value_type::u8: hi = 255.0; break;
    case value_type::u16: hi = 65535.0; break;
    case value_type::u32: hi = 4294967295.0; break;
    default: return 0;
    }
    if (d <= lo) return t == value_type::i64 ? static_cast<long long>(0x8000000000000000ull) : static_cast<long long>(lo);
    if (d >= hi) return t == value_type::i64 ? 0x7fffffffffffffffll : static_cast<long long>(hi);
    return static_cast<long long>(d);
}

// Reports integer division by zero; the result is then unspecified (0).
__device__ void report(const buffers& bufs) {
    if (bufs.status != nullptr) *bufs.status = bufs.status_code;
}

// Integer pow as the reference computes it: std::pow in double, converted back. An out-of-range
// conversion is undefined in C++; on x86-64 (where the reference runs) it gives the "integer
// indefinite" value of the 32-bit conversion (types narrower than 32 bits, int32, uint8 / uint16)
// or of the 64-bit one (int64, uint32), which the step's type then wraps.
__device__ long long integer_pow(long long a, long long b, value_type t) {
    const double p = pow(static_cast<double>(a), static_cast<double>(b));
    if (t == value_type::i64 || t == value_type::u32) {
        if (!(p >= -9223372036854775808.0 && p < 9223372036854775808.0))
            return static_cast<long long>(0x8000000000000000ull);
        return static_cast<long long>(p);
    }
    if (!(p >= -2147483648.0 && p < 2147483648.0)) return -2147483648ll;
    return static_cast<long long>(p);
}

// The math below calls the CUDA overloads for F (expf for float, exp for
// double); every constant is an F so that a float program never widens.
template <class F>
__device__ reg<F> execute(const instruction& s, const reg<F>* r, const buffers& bufs) {
    const F x = r[s.a].f, y = r[s.b].f, z = r[s.c].f;
    const long long p = r[s.a].i, q = r[s.b].i, w = r[s.c].i;
    const F zero = 0, one = 1, one_half = 0.5;
    reg<F> o;
    o.i = 0;
    switch (s.op) {
    case opcode::f_abs: o.f = x < zero ? -x : x; break;
    case opcode::f_neg: o.f = -x; break;
    case opcode::f_sign: o.f = static_cast<F>((zero < x) - (x < zero)); break;
    case opcode::f_relu: o.f = x < zero ? zero : x; break;
    case opcode::f_exp: o.f = exp(x); break;
    case opcode::f_log: o.f = log(x); break;
    case opcode::f_sqrt: o.f = sqrt(x); break;
    case opcode::f_rsqrt: o.f = one / sqrt(x); break;
    case opcode::f_reciprocal: o.f = one / x; break;
    case opcode::f_sin: o.f = sin(x); break;
    case opcode::f_cos: o.f = cos(x); break;
    case opcode::f_tan: o.f = tan(x); break;
    case opcode::f_tanh: o.f = tanh(x); break;
    case opcode::f_sigmoid: o.f = one / (one + exp(-x)); break;
    case opcode::f_erf: o.f = erf(x); break;
    case opcode::f_floor: o.f = floor(x); break;
    case opcode::f_ceil: o.f = ceil(x); break;
    case opcode::f_round: o.f = rint(x); break;  // ties to even
    case opcode::f_asin: o.f = asin(x); break;
    case opcode::f_acos: o.f = acos(x); break;
    case opcode::f_atan: o.f = atan(x); break;
    case opcode::f_sinh: o.f = sinh(x); break;
    case opcode::f_cosh: o.f = cosh(x); break;
    case opcode::f_asinh: o.f = asinh(x); break;
    case opcode::f_acosh: o.f = acosh(x); break;
    case opcode::f_atanh: o.f = atanh(x); break;
    // 1 + erf(v) = erfc(-v) and 1 + tanh(u) = 2 / (1 + e^-2u), as the reference.
    case opcode::f_gelu_erf: o.f = one_half * x * erfc(-x * static_cast<F>(0.7071067811865476)); break;
    case opcode::f_gelu_tanh:
        o.f = x / (one + exp(static_cast<F>(-2 * 0.7978845608028654) * (x + static_cast<F>(0.044715) * x * x * x)));
        break;

    case opcode::f_add: o.f = x + y; break;
    case opcode::f_sub: o.f = x - y; break;
    case opcode::f_mul: o.f = x * y; break;
    case opcode::f_div: o.f = x / y; break;
    case opcode::f_pow: o.f = pow(x, y); break;
    case opcode::f_max: o.f = (x != x || y != y) ? quiet_nan<F>() : (x < y ? y : x); break;
    case opcode::f_min: o.f = (x != x || y != y) ? quiet_nan<F>() : (y < x ? y : x); break;
    case opcode::f_fmod: o.f = fmod(x, y); break;
    case opcode::f_mod: {
        F m = fmod(x, y);
        if (m != zero && ((m < zero) != (y < zero))) m += y;  // the sign of the divisor
        o.f = m;
        break;
    }
    case opcode::f_equal: o.i = x == y; break;
    case opcode::f_less: o.i = x < y; break;
    case opcode::f_greater: o.i = y < x; break;
    case opcode::f_clip: {
        F v = x;
        if (v < y) v = y;
        if (z < v) v = z;
        o.f = v;
        break;
    }
    case opcode::f_where: o.f = p != 0 ? y : z; break;

    case opcode::i_abs: o.i = p < 0 ? static_cast<long long>(0ull - static_cast<u64>(p)) : p; break;
    case opcode::i_neg: o.i = static_cast<long long>(0ull - static_cast<u64>(p)); break;
    case opcode::i_sign: o.i = (0 < p) - (p < 0); break;
    case opcode::i_relu: o.i = p < 0 ? 0 : p; break;
    case opcode::i_bitwise_not: o.i = ~p; break;
    case opcode::b_not: o.i = p == 0 ? 1 : 0; break;

    // In unsigned 64-bit arithmetic so that overflow wraps (the step's type then wraps it to its width).
    case opcode::i_add: o.i = static_cast<long long>(static_cast<u64>(p) + static_cast<u64>(q)); break;
    case opcode::i_sub: o.i = static_cast<long long>(static_cast<u64>(p) - static_cast<u64>(q)); break;
    case opcode::i_mul: o.i = static_cast<long long>(static_cast<u64>(p) * static_cast<u64>(q)); break;
    case opcode::i_div:
        if (q == 0) report(bufs);
        else if (q == -1) o.i = static_cast<long long>(0ull - static_cast<u64>(p));  // the lowest value wraps
        else o.i = p / q;
        break;
    case opcode::i_mod:
    case opcode::i_fmod:
        if (q == 0) {
            report(bufs);
        } else if (q != -1) {  // x mod -1 is 0 (and the lowest value % -1 would trap)
            long long m = p % q;
            if (s.op == opcode::i_mod && m != 0 && ((m < 0) != (q < 0))) m += q;
            o.i = m;
        }
        break;
    case opcode::i_pow: o.i = integer_pow(p, q, s.type); break;
    case opcode::i_max: o.i = p < q ? q : p; break;
    case opcode::i_min: o.i = q < p ? q : p; break;
    case opcode::i_equal: o.i = p == q; break;
    case opcode::i_less: o.i = p < q; break;
    case opcode::i_greater: o.i = q < p; break;
    case opcode::i_and: o.i = p & q; break;
    case opcode::i_or: o.i = p | q; break;
    case opcode::i_xor: o.i = p ^ q; break;
    case opcode::i_shift_left:
        if (q < 0 || q >= s.aux) o.i = 0;
        else o.i = static_cast<long long>(static_cast<u64>(p) << q);
        break;
    case opcode::i_shift_right:
        if (q < 0 || q >= s.aux) o.i = p >= 0 ? 0 : -1;
        else o.i = p >> q;  // arithmetic: p is sign-extended from its type
        break;
    case opcode::i_clip: {
        long long v = p;
        if (v < q) v = q;
        if (w < v) v = w;
        o.i = v;
        break;
    }
    case opcode::i_where: o.i = p != 0 ? q : w; break;

    case opcode::f_to_f: o.f = x; break;
    case opcode::f_to_i: o.i = saturating_float_to_int(static_cast<double>(x), static_cast<value_type>(s.aux)); break;
    case opcode::f_to_b: o.i = x != zero ? 1 : 0; break;  // NaN is true
    case opcode::i_to_f:
        // aux 1 (to float64) only occurs in double programs.
        o.f = s.aux == 1 ? static_cast<F>(static_cast<double>(p)) : static_cast<F>(static_cast<float>(p));
        break;
    case opcode::i_to_i: o.i = p; break;
    case opcode::i_to_b: o.i = p != 0 ? 1 : 0; break;
    }
    // Stored as the reference stores the step's result.
    if (is_floating(s.type)) o.f = round_to(o.f, s.type);
    else o.i = wrap(o.i, s.type);
    return o;
}

// Inputs whose element offset is the output index modulo a period: the
// same layout as the output (period = elements), a scalar (period 1), or a
// broadcast over leading dims of a standard trailing block (a bias: period =
// the block's size). period 0: the input needs the general walk.
struct input_periods {
    std::uint64_t period[max_inputs] = {};
};

// Each input's element offset for output element `index`.
template <bool Periodic>
__device__ void input_offsets(const program& prog, const input_periods& periods, std::uint64_t index,
                              std::uint64_t (&offsets)[max_inputs]) {
    if constexpr (Periodic) {
        // The same branch in every thread; 32-bit remainders where the sizes allow (most tensors).
        const bool narrow = prog.elements <= 0xffffffffull;
        for (int k = 0; k < prog.num_inputs; ++k) {
            const std::uint64_t period = periods.period[k];
            if (period == prog.elements)
                offsets[k] = index;
            else if (period == 1)
                offsets[k] = 0;
            else if (narrow)
                offsets[k] = static_cast<std::uint32_t>(index) % static_cast<std::uint32_t>(period);
            else
                offsets[k] = index % period;
        }
    } else {
        for (int k = 0; k < prog.num_inputs; ++k) offsets[k] = 0;
        if (prog.elements <= 0xffffffffull) {
            // 32-bit division where the sizes allow: 64-bit is emulated in many instructions.
            auto rest = static_cast<std::uint32_t>(index);
            for (int d = prog.rank - 1; d >= 0; --d) {
                const auto len = static_cast<std::uint32_t>(prog.out_lens[d]);
                const std::uint64_t coordinate = rest % len;
                rest /= len;
                for (int k = 0; k < prog.num_inputs; ++k) offsets[k] += coordinate * prog.in_strides[k][d];
            }
            return;
        }
        std::uint64_t rest = index;
        for (int d = prog.rank - 1; d >= 0; --d) {
            const std::uint64_t coordinate = rest % prog.out_lens[d];
            rest /= prog.out_lens[d];
            for (int k = 0; k < prog.num_inputs; ++k) offsets[k] += coordinate * prog.in_strides[k][d];
        }
    }
}

template <class F, bool Periodic>
__global__ void run_program(const program prog, const buffers bufs, const input_periods periods) {
    reg<F> r[max_values];
    const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
    for (std::uint64_t index = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
         index < prog.elements; index += stride) {
        std::uint64_t offsets[max_inputs];
        input_offsets<Periodic>(prog, periods, index, offsets);
        for (int k = 0; k < prog.num_inputs; ++k) r[k] = load<F>(bufs.inputs[k], offsets[k], prog.in_types[k]);
        for (int s = 0; s < prog.num_steps; ++s) r[prog.steps[s].dst] = execute<F>(prog.steps[s], r, bufs);
        store<F>(bufs.output, index, prog.output_type, r[prog.steps[prog.num_steps - 1].dst]);
    }
}

// Input k's period (see input_periods), or 0.
std::uint64_t period_of(const program& prog, int k) {
    return repeat_period(prog.out_lens, prog.in_strides[k], prog.rank);
}

// Whether any value of the program is float64 (an input, a step or the
// output, or a convert to float64): then it computes in double.
bool has_float64(const program& prog) {
    if (prog.output_type == value_type::f64) return true;
    for (int k = 0; k < prog.num_inputs; ++k)
        if (prog.in_types[k] == value_type::f64) return true;
    for (int s = 0; s < prog.num_steps; ++s) {
        const instruction& step = prog.steps[s];
        if (step.type == value_type::f64 || (step.op == opcode::i_to_f && step.aux == 1)) return true;
    }
    return false;
}

template <class F>
void launch_typed(const program& prog, const buffers& bufs, unsigned blocks, unsigned threads, cudaStream_t stream) {
    input_periods periods;
    bool periodic = true;
    for (int k = 0; k < prog.num_inputs; ++k) {
        periods.period[k] = period_of(prog, k);
        periodic = periodic && periods.period[k] != 0;
    }
    if (periodic)
        run_program<F, true><<<blocks, threads, 0, stream>>>(prog, bufs, periods);
    else
        run_program<F, false><<<blocks, threads, 0, stream>>>(prog, bufs, periods);
}

}  // namespace

void launch(const program& prog, const buffers& bufs, void* stream) {
    if (prog.elements == 0 || prog.num_steps == 0) return;
    constexpr unsigned threads = 256;
    const std::uint64_t wanted = (prog.elements + threads - 1) / threads;
    // Enough blocks to fill the GPU many times; the grid-stride loop covers the rest.
    const unsigned blocks = static_cast<unsigned>(wanted < 65536 ? wanted : 65536);
    const auto cuda_stream = static_cast<cudaStream_t>(stream);
    if (has_float64(prog))
        launch_typed<double>(prog, bufs, blocks, threads, cuda_stream);
    else
        launch_typed<float>(prog, bufs, blocks, threads, cuda_stream);
    KILN_CUDA(cudaGetLastError());
}

}  // namespace kiln::pointwise
