#include "targets/cpu/kernels/own_packed_layout.hpp"

#include "kiln/errors.hpp"

namespace kiln::own_layout {

namespace {

// The value's "kind": a layout of another meaning (a later Kiln's) is refused by name.
constexpr const char* layout_kind = "kiln_own_1";

[[noreturn]] void bad_layout(const std::string& what) {
    fail(error_kind::parse_error, "packed weights: " + what);
}

const value* find(const packed_constant& form, const std::string& name) {
    return form.layout.is_map() ? form.layout.find(name) : nullptr;
}

}  // namespace

std::shared_ptr<const packed_constant> export_form(std::string_view algorithm, const geometry& g, argument bytes,
                                                   value_map extra) {
    value_map entries;
    for (const auto& [name, n] : g) entries.emplace_back(name, n);
    value_map layout{{"kind", layout_kind}, {"kernel", std::string(algorithm)}, {"geometry", std::move(entries)}};
    for (auto& m : extra) layout.push_back(std::move(m));
    auto form = std::make_shared<packed_constant>();
    form->layout = std::move(layout);
    form->bytes = std::move(bytes);
    return form;
}

bool is_own(const packed_constant& form) {
    const value* kind = find(form, "kind");
    return kind != nullptr && kind->is_string() && kind->as_string() == layout_kind;
}

std::string algorithm_of(const packed_constant& form) {
    const value* a = find(form, "kernel");
    if (!is_own(form) || a == nullptr || !a->is_string()) bad_layout("the layout names no Kiln kernel algorithm");
    return a->as_string();
}

std::int64_t entry(const packed_constant& form, const std::string& name, std::int64_t low, std::int64_t high) {
    const value* g = find(form, "geometry");
    const value* e = g != nullptr && g->is_map() ? g->find(name) : nullptr;
    if (e == nullptr || !e->is_int())
        bad_layout("the " + algorithm_of(form) + " layout has no integer '" + name + "'");
    if (e->as_int() < low || e->as_int() > high)
        bad_layout("the " + algorithm_of(form) + " layout's '" + name + "' is " + std::to_string(e->as_int()) +
                   ", outside [" + std::to_string(low) + ", " + std::to_string(high) + "]");
    return e->as_int();
}

const value& member(const packed_constant& form, const std::string& name) {
    const value* m = find(form, name);
    if (m == nullptr) bad_layout("the " + algorithm_of(form) + " layout has no '" + name + "'");
    return *m;
}

bool same_layout(const packed_constant& form, std::string_view algorithm, const geometry& g) {
    if (!is_own(form)) return false;
    const value* a = find(form, "kernel");
    const value* stored = find(form, "geometry");
    if (a == nullptr || !a->is_string() || a->as_string() != algorithm || stored == nullptr || !stored->is_map() ||
        stored->as_map().size() != g.size())
        return false;
    for (const auto& [name, n] : g) {
        const value* e = stored->find(name);
        if (e == nullptr || !e->is_int() || e->as_int() != n) return false;
    }
    return true;
}

void require_bytes(const packed_constant& form, std::size_t bytes) {
    if (form.bytes.get_shape().bytes() != bytes || (bytes > 0 && form.bytes.data() == nullptr))
        bad_layout("the " + algorithm_of(form) + " layout needs " + std::to_string(bytes) + " bytes but " +
                   std::to_string(form.bytes.get_shape().bytes()) + " are stored");
}

const packed_constant* adoptable(const kernel_request& r, std::size_t index, std::string_view algorithm,
                                 const geometry& g, std::size_t bytes) {
    const packed_constant* form = r.packed_input(index);
    if (form == nullptr || !form->adoptable || !same_layout(*form, algorithm, g)) return nullptr;
    require_bytes(*form, bytes);
    return form;
}

std::shared_ptr<const packed_constant> part_of(const packed_constant& form, value layout, std::size_t offset,
                                               std::size_t size) {
    const std::size_t whole = form.bytes.get_shape().bytes();
    if (offset > whole || size > whole - offset)
        bad_layout("the " + algorithm_of(form) + " layout's part [" + std::to_string(offset) + ", " +
                   std::to_string(offset + size) + ") lies beyond its " + std::to_string(whole) + " bytes");
    auto part = std::make_shared<packed_constant>();
    part->layout = std::move(layout);
    part->bytes = form.bytes.reshaped(shape(dtype::uint8_type, {size}), offset);
    part->adoptable = form.adoptable;
    return part;
}

}  // namespace kiln::own_layout
