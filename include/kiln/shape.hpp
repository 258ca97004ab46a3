#pragma once
// A tensor's type: element dtype, extent of each dimension (lens) and the
// element step of each dimension (strides). Strides let views such as
// transpose, broadcast and slice share their input's memory.
//
// Dimensions are static today. A dynamic dimension would become a
// {min, max, optimal} range per entry of lens; code that needs concrete
// extents already goes through lens(), so that change stays local.
#include <cstddef>
#include <iosfwd>
#include <string>
#include <vector>

#include "kiln/dtype.hpp"

namespace kiln {

class shape {
public:
    shape() = default;  // a float scalar
    explicit shape(dtype type);
    shape(dtype type, std::vector<std::size_t> lens);
    shape(dtype type, std::vector<std::size_t> lens, std::vector<std::size_t> strides);

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
};

// "float_type, {3, 4}, {4, 1}"; a tuple: "tuple{float_type, {3}, {1}; bool_type, {}, {}}"
std::string to_string(const shape& s);
std::ostream& operator<<(std::ostream& os, const shape& s);
std::string to_string(const std::vector<std::size_t>& v);  // "{3, 4}"

}  // namespace kiln
