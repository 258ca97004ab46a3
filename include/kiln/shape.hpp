#pragma once
// A tensor's type: element dtype, extent of each dimension (lens) and the
// element step of each dimension (strides). Strides let views such as
// transpose, broadcast and slice share their input's memory.
//
// A dimension is fixed or a range {min, max, optimals}. A shape with a range
// (dynamic()) describes every tensor whose extents lie inside; only a
// program's parameters carry one, and every tensor a program computes on is
// static, so kernels, planning and views never see a range. lens() of a
// dynamic shape are its maximum extents.
#include <cstddef>
#include <iosfwd>
#include <string>
#include <vector>

#include "kiln/dtype.hpp"

namespace kiln {

// One dimension of a dynamic shape: any extent in [min, max]; optimals are the
// extents a program is specialised for ahead of its first run.
struct dynamic_dimension {
    std::size_t min = 0;
    std::size_t max = 0;
    std::vector<std::size_t> optimals;  // sorted, unique, inside [min, max]

    dynamic_dimension() = default;
    explicit dynamic_dimension(std::size_t fixed) : min(fixed), max(fixed) {}
    // Rejects min > max and optimals outside the range; sorts the optimals.
    dynamic_dimension(std::size_t min, std::size_t max, std::vector<std::size_t> optimals = {});

    bool is_fixed() const { return min == max; }
    bool contains(std::size_t n) const { return n >= min && n <= max; }
    friend bool operator==(const dynamic_dimension& a, const dynamic_dimension& b) {
        return a.min == b.min && a.max == b.max && a.optimals == b.optimals;
    }
    friend bool operator!=(const dynamic_dimension& a, const dynamic_dimension& b) { return !(a == b); }
};

// "3", "1..64" or "1..64@{1, 8}"
std::string to_string(const dynamic_dimension& d);

class shape {
public:
    shape() = default;  // a float scalar
    explicit shape(dtype type);
    shape(dtype type, std::vector<std::size_t> lens);
    shape(dtype type, std::vector<std::size_t> lens, std::vector<std::size_t> strides);
    // Standard strides over the maximum extents; all dims fixed gives a static shape.
    static shape from_dyn_dims(dtype type, std::vector<dynamic_dimension> dims);

    // The results of an op with several outputs (control flow: if, loop) as
    // one value. The elements lie one after another in one buffer, each
    // standard-strided at a 64-byte aligned offset, so everything that only
    // sees memory (executors, memory planning) treats a tuple as the uint8
    // vector of its packed bytes; get_tuple_elem takes element i out as a
    // view. Elements are not tuples themselves; a tuple has at least one.
    static shape tuple(const std::vector<shape>& elements);
    bool is_tuple() const { return !sub_shapes_.empty(); }
    // The element shapes of a tuple (empty for a tensor).
    const std::vector<shape>& sub_shapes() const { return sub_shapes_; }
    // Byte offset of element i in a tuple's buffer.
    std::size_t tuple_offset(std::size_t i) const;

    dtype type() const { return type_; }
    const std::vector<std::size_t>& lens() const { return lens_; }
    const std::vector<std::size_t>& strides() const { return strides_; }
    std::size_t ndim() const { return lens_.size(); }

    // Some dimension is a range.
    bool dynamic() const { return !dyn_dims_.empty(); }
    // Every dimension as a range (fixed ones with min == max).
    std::vector<dynamic_dimension> dyn_dims() const;
    std::vector<std::size_t> min_lens() const;
    std::vector<std::size_t> max_lens() const { return lens_; }
    // Same rank and every extent inside its dimension's range.
    bool accepts(const std::vector<std::size_t>& lens) const;
    // The static shape with these extents; fails unless accepts(lens).
    shape specialised(const std::vector<std::size_t>& lens) const;

    std::size_t elements() const;
    // Bytes of memory the shape spans (accounts for strides; 0 for empty tensors).
    std::size_t bytes() const;
    std::size_t element_size() const { return dtype_size(type_); }
    // Number of elements the underlying memory spans: max offset + 1.
    std::size_t element_space() const;

    // Row-major packed: strides are the products of the trailing lens.
    bool standard() const;
    // Packed, but dimensions in a permuted order.
    bool transposed() const;
    // Some dimension of extent > 1 has stride 0.
    bool broadcasted() const;
    // No dimensions, or every stride is 0 (one value repeated).
    bool scalar() const;
    // Every element occupies distinct memory and no gaps: standard or transposed.
    bool packed() const;

    // Memory offset (in elements) of a multi-index.
    std::size_t index(const std::vector<std::size_t>& idx) const;
    // Memory offset of the i-th element in row-major order of lens.
    std::size_t index(std::size_t i) const;
    // The row-major multi-index of the i-th element.
    std::vector<std::size_t> multi(std::size_t i) const;

    shape with_type(dtype t) const;
    shape as_standard() const;  // same type and lens, row-major strides
    static std::vector<std::size_t> standard_strides(const std::vector<std::size_t>& lens);

    friend bool operator==(const shape& a, const shape& b);
    friend bool operator!=(const shape& a, const shape& b) { return !(a == b); }

private:
    dtype type_ = dtype::float_type;
    std::vector<std::size_t> lens_;
    std::vector<std::size_t> strides_;
    std::vector<shape> sub_shapes_;
    std::vector<dynamic_dimension> dyn_dims_;  // empty for a static shape
};

// "float_type, {3, 4}, {4, 1}"; dynamic: "float_type, {1..64@{8}, 4}"; a tuple: "tuple{float_type, {3}, {1}; bool_type, {}, {}}"
std::string to_string(const shape& s);
std::ostream& operator<<(std::ostream& os, const shape& s);
std::string to_string(const std::vector<std::size_t>& v);  // "{3, 4}"

}  // namespace kiln
