#pragma once
// argument: a shape plus the memory holding its elements. Either it owns that
// memory (64-byte aligned, shared between copies of the argument) or it is a
// borrowed view of memory someone else keeps alive.
#include <cstddef>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/shape.hpp"
#include "kiln/value.hpp"

namespace kiln {

inline constexpr std::size_t buffer_alignment = 64;

// Where an argument's memory is: host memory, or a device target's memory
// that the host cannot read (bring it over with the target's copy_from).
enum class memory_location { host, device };

// The machine's physical memory in bytes.
std::size_t physical_memory_bytes();

// Shared owner of a 64-byte aligned, zero-initialised allocation (2 MiB
// aligned, on transparent huge pages where the system grants them, from 2 MiB).
std::shared_ptr<std::byte> allocate_aligned(std::size_t bytes);

class argument {
public:
    argument() = default;
    // Allocates owned, zeroed memory for `s`.
    explicit argument(const shape& s);
    // Borrows `data`; the caller keeps it alive for the argument's lifetime.
    argument(const shape& s, void* data);
    // Shares ownership with `owner`, which keeps `data` alive.
    argument(const shape& s, std::shared_ptr<void> owner, void* data);

    const shape& get_shape() const { return shape_; }
    std::byte* data() const { return data_; }
    template <class T>
    T* data_as() const {
        return reinterpret_cast<T*>(data_);
    }
    bool empty() const { return data_ == nullptr && shape_.elements() != 0; }
    memory_location location() const { return location_; }
    // The same memory, said to be in `where` (a device target tags what it hands out).
    argument at(memory_location where) const {
        argument a = *this;
        a.location_ = where;
        return a;
    }
    bool owns_memory() const { return owner_ != nullptr; }
    const std::shared_ptr<void>& owner() const { return owner_; }

    // Points this argument at other memory holding the same shape and drops
    // any ownership. Executors use it to rebind planned views without allocating.
    void rebind(void* data) {
        owner_.reset();
        data_ = static_cast<std::byte*>(data);
    }
    // A view of the same memory with another shape (same owner).
    argument reshaped(const shape& s, std::size_t byte_offset = 0) const;
    // A new owned argument with standard strides holding the same values.
    argument contiguous() const;
    // Deep copy (standard strides when the source is not packed).
    argument copy() const;

    // Element i in row-major order, converted to double (for tests, printing).
    double value_at(std::size_t i) const;
    template <class T>
    std::vector<T> to_vector() const;

    // Fails with a clear error, naming `use`, when the memory is a device's:
    // every function here that reads or writes the elements on the host checks.
    void require_host(const char* use) const;

private:
    shape shape_;
    std::shared_ptr<void> owner_;
    std::byte* data_ = nullptr;
    memory_location location_ = memory_location::host;
};

// Copies the values of `src` into `dst` (same lens; any strides, same dtype).
void copy_values(const argument& src, const argument& dst);

// Element-wise equality of values (not of strides or memory).
bool values_equal(const argument& a, const argument& b);

// Deterministic pseudo-random data for `s` (floats in [-1, 1), small integers).
argument generate_argument(const shape& s, unsigned long seed = 0);

// "{1, 2, 3, ... (12 values)}"
std::string format_values(const argument& a, std::size_t max_values = 8);

// Float to integer conversions saturate and map NaN to 0: a plain cast of an
// out-of-range value is undefined behaviour, and the values may come from files.
// The storage types convert as the convert op does by default: float8 /
// float4 round to nearest even and saturate; int4 / int2 keep the low bits of
// the integer (a float truncated toward zero first), as ml_dtypes does.
template <class T, class S>
T convert_element(S x) {
    constexpr bool float_source = is_float_like_v<S> || is_small_float_v<S>;
    if constexpr (is_small_float_v<T>) {
        return T::from_double(static_cast<double>(x), true);
    } else if constexpr (is_small_int_v<T>) {
        if constexpr (float_source) {
            const double d = static_cast<double>(x);
            // NaN and magnitudes past int64 have no low bits to keep: 0, as ml_dtypes gives.
            if (!(d > -9.2e18 && d < 9.2e18)) return T(std::int64_t{0});
            return T(static_cast<std::int64_t>(d));
        } else {
            return T(static_cast<std::int64_t>(x));
        }
    } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool> && float_source) {
        const double d = static_cast<double>(x);
        if (d != d) return T{0};
        if (d <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
        if (d >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
        return static_cast<T>(d);
    } else if constexpr (is_small_float_v<S>) {
        return static_cast<T>(static_cast<float>(x));
    } else if constexpr (is_small_int_v<S>) {
        return static_cast<T>(static_cast<int>(x));
    } else {
        return static_cast<T>(x);
    }
}

template <class T>
std::vector<T> argument::to_vector() const {
    require_host("to_vector");
    std::vector<T> out(shape_.elements());
    visit_any_type(shape_.type(), [&](auto tag) {
        using S = typename decltype(tag)::type;
        const S* p = data_as<S>();
        for (std::size_t i = 0; i < out.size(); ++i) out[i] = convert_element<T>(p[shape_.index(i)]);
    });
    return out;
}

// A literal's values in a kernel's own layout (weights packed for a oneDNN
// primitive), kept with the literal so that a saved file stores them packed
// and a kernel loading that file can use them as they are, packing nothing.
struct packed_constant {
    // How the target that made it reads `bytes` (its layout descriptors);
    // only that target interprets it.
    value layout;
    // The packed values (uint8); they may point into a mapped file.
    argument bytes;
    // Whether a kernel may use `bytes` as they are: false when they were
    // packed on another CPU or by another Kiln version, whose kernels may
    // expect another layout (they are restored and packed again then).
    bool adoptable = true;
};

// literal: an immutable constant held by the graph. Always standard-strided.
//
// A compiled program's kernels often keep a literal in a layout of their own
// (convolution weights packed for the primitive). Holding the original bytes
// as well would double the weights' memory, so such a literal can be handed
// over: it keeps its shape and its value but drops its bytes, and restores
// them from the kernel's copy whenever someone asks (saving or printing the
// program, verifying it). Copies of a literal share its bytes, and so share
// the hand-over too.
class literal {
public:
    // Produces the values of a handed-over literal, in a new standard buffer.
    using restore_function = std::function<argument()>;

    literal() = default;
    // Copies the values of `a` (into a standard layout).
    explicit literal(const argument& a);
    // Copies `values` converted to the dtype of `s`.
    template <class T>
    literal(const shape& s, const std::vector<T>& values);
    // Builds the constant in place: `fill` writes every byte of a new
    // standard-strided buffer for `s`, so a large tensor is copied only once.
    literal(const shape& s, const std::function<void(std::byte*)>& fill);
    // Keeps `standard_values` as the literal's bytes without copying them:
    // memory its owner keeps alive and nobody writes (weights mapped from a
    // file). Fails unless its strides are standard and it has an owner.
    static literal sharing(const argument& standard_values);
    // A literal of shape `s` held only in a kernel's layout (a compiled
    // file's pre-packed weights): it has no bytes, and its values are
    // available once the target lowering the program hands over how to
    // restore them (until then get_argument fails).
    static literal packed(const shape& s, std::shared_ptr<const packed_constant> form);

    const shape& get_shape() const { return shape_; }
    // The values, standard-strided. Kernels must not write through them. A
    // handed-over literal restores them into a new buffer on every call.
    argument get_argument() const;
    bool empty() const { return storage_ == nullptr; }
    template <class T>
    std::vector<T> to_vector() const {
        return get_argument().to_vector<T>();
    }

    // Drops the bytes; from now on `restore` produces them, and it must give
    // exactly the values the literal had. The value does not change, so this
    // is const, like evicting a cache entry. A later hand-over replaces it.
    // `form`, when given, is the kernel's packed copy, which saving stores.
    void hand_over(restore_function restore, std::shared_ptr<const packed_constant> form = nullptr) const;
    // False once handed over, and for a packed literal.
    bool holds_bytes() const;
    // The kernel layout the literal was handed over in or loaded as; null when none.
    std::shared_ptr<const packed_constant> packed_form() const;
    // Whether `other` is a copy of this literal (one storage: equal values,
    // known without reading or restoring them).
    bool shares_storage_with(const literal& other) const { return storage_ != nullptr && storage_ == other.storage_; }

private:
    struct storage;
    // Takes `standard_values` as the literal's bytes (no copy).
    void adopt(argument standard_values);

    shape shape_;
    std::shared_ptr<storage> storage_;
};

template <class T>
literal::literal(const shape& s, const std::vector<T>& values) {
    argument data(s.as_standard());
    if (values.size() != s.elements())
        fail("literal: shape " + to_string(s) + " holds " + std::to_string(s.elements()) + " elements but " +
             std::to_string(values.size()) + " values were given");
    visit_any_type(s.type(), [&](auto tag) {
        using D = typename decltype(tag)::type;
        D* p = data.data_as<D>();
        for (std::size_t i = 0; i < values.size(); ++i) {
            if constexpr (std::is_same_v<D, half> || std::is_same_v<D, bfloat16>)
                p[i] = D(static_cast<float>(values[i]));
            else
                p[i] = convert_element<D>(values[i]);
        }
    });
    adopt(std::move(data));
}

}  // namespace kiln
