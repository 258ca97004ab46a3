#include "kiln/shape.hpp"

#include <algorithm>
#include <numeric>
#include <ostream>
#include <sstream>

namespace kiln {

shape::shape(dtype type) : type_(type) {}

shape::shape(dtype type, std::vector<std::size_t> lens)
    : type_(type), lens_(std::move(lens)), strides_(standard_strides(lens_)) {}

shape::shape(dtype type, std::vector<std::size_t> lens, std::vector<std::size_t> strides)
    : type_(type), lens_(std::move(lens)), strides_(std::move(strides)) {
    if (lens_.size() != strides_.size())
        fail("shape: " + std::to_string(lens_.size()) + " lens but " + std::to_string(strides_.size()) +
             " strides");
}

dynamic_dimension::dynamic_dimension(std::size_t lo, std::size_t hi, std::vector<std::size_t> opts)
    : min(lo), max(hi), optimals(std::move(opts)) {
    if (min > max)
        fail("dynamic dimension: min " + std::to_string(min) + " is greater than max " + std::to_string(max));
    std::sort(optimals.begin(), optimals.end());
    optimals.erase(std::unique(optimals.begin(), optimals.end()), optimals.end());
    for (auto o : optimals)
        if (!contains(o))
            fail("dynamic dimension: optimal " + std::to_string(o) + " is outside [" + std::to_string(min) + ", " +
                 std::to_string(max) + "]");
    if (is_fixed()) optimals.clear();
}

std::string to_string(const dynamic_dimension& d) {
    if (d.is_fixed()) return std::to_string(d.min);
    std::string out = std::to_string(d.min) + ".." + std::to_string(d.max);
    if (!d.optimals.empty()) out += "@" + to_string(d.optimals);
    return out;
}

namespace {
std::vector<std::size_t> max_extents(const std::vector<dynamic_dimension>& dims) {
    std::vector<std::size_t> lens;
    for (const auto& d : dims) lens.push_back(d.max);
    return lens;
}
}  // namespace

shape shape::from_dyn_dims(dtype type, std::vector<dynamic_dimension> dims) {
    shape s(type, max_extents(dims));
    if (std::any_of(dims.begin(), dims.end(), [](const auto& d) { return !d.is_fixed(); })) s.dyn_dims_ = std::move(dims);
    return s;
}

std::vector<dynamic_dimension> shape::dyn_dims() const {
    if (dynamic()) return dyn_dims_;
    std::vector<dynamic_dimension> dims;
    for (auto n : lens_) dims.emplace_back(n);
    return dims;
}

std::vector<std::size_t> shape::min_lens() const {
    if (!dynamic()) return lens_;
    std::vector<std::size_t> lens;
    for (const auto& d : dyn_dims_) lens.push_back(d.min);
    return lens;
}

bool shape::accepts(const std::vector<std::size_t>& lens) const {
    if (lens.size() != lens_.size()) return false;
    if (!dynamic()) return lens == lens_;
    for (std::size_t i = 0; i < lens.size(); ++i)
        if (!dyn_dims_[i].contains(lens[i])) return false;
    return true;
}

shape shape::specialised(const std::vector<std::size_t>& lens) const {
    if (!accepts(lens)) fail("shape " + to_string(*this) + " does not accept extents " + to_string(lens));
    return {type_, lens};
}

namespace {
// Tuple elements start at offsets aligned like owned buffers (argument.hpp).
constexpr std::size_t tuple_alignment = 64;

std::size_t align_up(std::size_t n) {
    return (n + tuple_alignment - 1) / tuple_alignment * tuple_alignment;
}

// Offset of each element and, last, the total size.
std::vector<std::size_t> tuple_layout(const std::vector<shape>& elements) {
    std::vector<std::size_t> offsets;
    std::size_t end = 0;
    for (const auto& e : elements) {
        offsets.push_back(offsets.empty() ? 0 : align_up(end));
        end = offsets.back() + e.bytes();
    }
    offsets.push_back(end);
    return offsets;
}
}  // namespace

shape shape::tuple(const std::vector<shape>& elements) {
    if (elements.empty()) fail("shape::tuple: a tuple needs at least one element");
    std::vector<shape> standard;
    for (const auto& e : elements) {
        if (e.is_tuple()) fail("shape::tuple: an element of a tuple cannot be a tuple");
        standard.push_back(e.as_standard());
    }
    shape s(dtype::uint8_type, {tuple_layout(standard).back()});
    s.sub_shapes_ = std::move(standard);
    return s;
}

std::size_t shape::tuple_offset(std::size_t i) const {
    if (i >= sub_shapes_.size())
        fail("tuple_offset: element " + std::to_string(i) + " of a tuple of " + std::to_string(sub_shapes_.size()));
    return tuple_layout(sub_shapes_)[i];
}

std::vector<std::size_t> shape::standard_strides(const std::vector<std::size_t>& lens) {
    std::vector<std::size_t> strides(lens.size());
    std::size_t step = 1;
    for (std::size_t i = lens.size(); i-- > 0;) {
        strides[i] = step;
        step *= std::max<std::size_t>(lens[i], 1);
    }
    return strides;
}

std::size_t shape::elements() const {
    return std::accumulate(lens_.begin(), lens_.end(), std::size_t{1}, std::multiplies<>());
}

std::size_t shape::element_space() const {
    if (elements() == 0) return 0;
    std::size_t last = 0;
    for (std::size_t i = 0; i < lens_.size(); ++i) last += (lens_[i] - 1) * strides_[i];
    return last + 1;
}

std::size_t shape::bytes() const { return element_space() * element_size(); }

bool shape::standard() const { return strides_ == standard_strides(lens_) || elements() <= 1; }

bool shape::packed() const {
    // Sorting dimensions by stride must give standard strides for the sorted lens.
    std::vector<std::size_t> order(lens_.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return strides_[a] > strides_[b]; });
    std::size_t step = 1;
    for (std::size_t k = order.size(); k-- > 0;) {
        std::size_t d = order[k];
        if (lens_[d] != 1 && strides_[d] != step) return false;
        step *= lens_[d];
    }
    return true;
}

bool shape::transposed() const { return !standard() && packed(); }

bool shape::broadcasted() const {
    for (std::size_t i = 0; i < lens_.size(); ++i)
        if (lens_[i] > 1 && strides_[i] == 0) return true;
    return false;
}

bool shape::scalar() const {
    return std::all_of(strides_.begin(), strides_.end(), [](auto s) { return s == 0; });
}

std::size_t shape::index(const std::vector<std::size_t>& idx) const {
    std::size_t offset = 0;
    for (std::size_t i = 0; i < idx.size(); ++i) offset += idx[i] * strides_[i];
    return offset;
}

std::size_t shape::index(std::size_t i) const {
    if (standard()) return i;
    std::size_t offset = 0;
    for (std::size_t d = lens_.size(); d-- > 0;) {
        std::size_t len = lens_[d];
        offset += (i % len) * strides_[d];
        i /= len;
    }
    return offset;
}

std::vector<std::size_t> shape::multi(std::size_t i) const {
    std::vector<std::size_t> idx(lens_.size());
    for (std::size_t d = lens_.size(); d-- > 0;) {
        idx[d] = i % lens_[d];
        i /= lens_[d];
    }
    return idx;
}

shape shape::with_type(dtype t) const {
    if (dynamic()) return from_dyn_dims(t, dyn_dims_);
    return {t, lens_, strides_};
}

shape shape::as_standard() const {
    if (is_tuple() || dynamic()) return *this;  // already packed
    return {type_, lens_};
}

bool operator==(const shape& a, const shape& b) {
    return a.type_ == b.type_ && a.lens_ == b.lens_ && a.strides_ == b.strides_ && a.sub_shapes_ == b.sub_shapes_ &&
           a.dyn_dims_ == b.dyn_dims_;
}

std::string to_string(const std::vector<std::size_t>& v) {
    std::string out = "{";
    for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
    return out + "}";
}

std::string to_string(const shape& s) {
    if (s.is_tuple()) {
        std::string out = "tuple{";
        for (std::size_t i = 0; i < s.sub_shapes().size(); ++i) out += (i ? "; " : "") + to_string(s.sub_shapes()[i]);
        return out + "}";
    }
    if (s.dynamic()) {
        std::string out = to_string(s.type()) + ", {";
        auto dims = s.dyn_dims();
        for (std::size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + to_string(dims[i]);
        return out + "}";
    }
    return to_string(s.type()) + ", " + to_string(s.lens()) + ", " + to_string(s.strides());
}

std::ostream& operator<<(std::ostream& os, const shape& s) { return os << to_string(s); }

}  // namespace kiln
