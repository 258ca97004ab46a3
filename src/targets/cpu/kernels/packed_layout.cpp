#include "targets/cpu/kernels/packed_layout.hpp"

#include <cstring>
#include <string>

#include "kiln/errors.hpp"
#include "targets/cpu/kernels/dnnl_support.hpp"

namespace kiln::dnnl_support {

namespace {

// The value's "kind": a file from a build whose layouts mean something else is refused.
constexpr const char* layout_kind = "onednn2_blocked";

[[noreturn]] void bad_layout(const std::string& what) {
    fail(error_kind::parse_error, "packed weights: " + what);
}

value dims_value(const dnnl_dim_t* dims, int n) {
    value_list out;
    for (int i = 0; i < n; ++i) out.emplace_back(static_cast<std::int64_t>(dims[i]));
    return out;
}

value desc_value(const dnnl_memory_desc_t& d) {
    const auto& b = d.format_desc.blocking;
    return value_map{
        {"data_type", static_cast<std::int64_t>(d.data_type)},
        {"dims", dims_value(d.dims, d.ndims)},
        {"padded_dims", dims_value(d.padded_dims, d.ndims)},
        {"padded_offsets", dims_value(d.padded_offsets, d.ndims)},
        {"offset0", static_cast<std::int64_t>(d.offset0)},
        {"strides", dims_value(b.strides, d.ndims)},
        {"inner_blks", dims_value(b.inner_blks, b.inner_nblks)},
        {"inner_idxs", dims_value(b.inner_idxs, b.inner_nblks)},
        {"extra_flags", static_cast<std::int64_t>(d.extra.flags)},
        {"compensation_mask", static_cast<std::int64_t>(d.extra.compensation_mask)},
        {"scale_adjust", static_cast<double>(d.extra.scale_adjust)},
        {"asymm_compensation_mask", static_cast<std::int64_t>(d.extra.asymm_compensation_mask)},
    };
}

const value& member(const value& v, const std::string& name) {
    const value* m = v.is_map() ? v.find(name) : nullptr;
    if (m == nullptr) bad_layout("the layout has no '" + name + "'");
    return *m;
}

std::int64_t integer(const value& v, const std::string& name) {
    const value& m = member(v, name);
    if (!m.is_int()) bad_layout("the layout's '" + name + "' is not an integer");
    return m.as_int();
}

// Fills `out[0, n)` from the list `name`, which must have n entries in [low, high].
void read_dims(const value& v, const std::string& name, std::size_t n, dnnl_dim_t* out, std::int64_t low,
               std::int64_t high) {
    const value& m = member(v, name);
    if (!m.is_list() || m.as_list().size() != n)
        bad_layout("the layout's '" + name + "' is not a list of " + std::to_string(n) + " integers");
    for (std::size_t i = 0; i < n; ++i) {
        const value& e = m.as_list()[i];
        if (!e.is_int() || e.as_int() < low || e.as_int() > high)
            bad_layout("the layout's '" + name + "' holds a value outside [" + std::to_string(low) + ", " +
                       std::to_string(high) + "]");
        out[i] = e.as_int();
    }
}

std::size_t element_bytes(dnnl_data_type_t t) {
    switch (t) {
    case dnnl_f32:
    case dnnl_s32: return 4;
    case dnnl_f16:
    case dnnl_bf16: return 2;
    case dnnl_s8:
    case dnnl_u8: return 1;
    default: bad_layout("the layout's data type " + std::to_string(static_cast<int>(t)) + " is not one Kiln packs");
    }
}

// A blocked descriptor from its value; every field checked so that the
// elements it addresses lie in [0, addressed elements).
dnnl_memory_desc_t desc_from_value(const value& v) {
    constexpr std::int64_t big = std::int64_t{1} << 40;
    dnnl_memory_desc_t d;
    std::memset(&d, 0, sizeof d);  // unset fields (reserved ones too) compare equal
    d.format_kind = dnnl_blocked;
    const value& dims = member(v, "dims");
    if (!dims.is_list() || dims.as_list().empty() || dims.as_list().size() > DNNL_MAX_NDIMS)
        bad_layout("the layout's 'dims' is not a list of 1 to " + std::to_string(DNNL_MAX_NDIMS) + " integers");
    d.ndims = static_cast<int>(dims.as_list().size());
    const auto n = static_cast<std::size_t>(d.ndims);
    d.data_type = static_cast<dnnl_data_type_t>(integer(v, "data_type"));
    element_bytes(d.data_type);
    read_dims(v, "dims", n, d.dims, 1, big);
    read_dims(v, "padded_dims", n, d.padded_dims, 1, big);
    read_dims(v, "padded_offsets", n, d.padded_offsets, 0, 0);
    d.offset0 = integer(v, "offset0");
    if (d.offset0 != 0) bad_layout("the layout's 'offset0' is not 0");
    auto& b = d.format_desc.blocking;
    read_dims(v, "strides", n, b.strides, 0, big);
    const value& blks = member(v, "inner_blks");
    if (!blks.is_list() || blks.as_list().size() > DNNL_MAX_NDIMS) bad_layout("the layout's 'inner_blks' is not a list");
    b.inner_nblks = static_cast<int>(blks.as_list().size());
    read_dims(v, "inner_blks", blks.as_list().size(), b.inner_blks, 1, 1024);
    read_dims(v, "inner_idxs", blks.as_list().size(), b.inner_idxs, 0, d.ndims - 1);
    d.extra.flags = static_cast<std::uint64_t>(integer(v, "extra_flags"));
    d.extra.compensation_mask = static_cast<int>(integer(v, "compensation_mask"));
    const value& scale = member(v, "scale_adjust");
    if (!scale.is_number()) bad_layout("the layout's 'scale_adjust' is not a number");
    d.extra.scale_adjust = static_cast<float>(scale.as_float());
    d.extra.asymm_compensation_mask = static_cast<int>(integer(v, "asymm_compensation_mask"));

    // Every dimension padded to whole blocks, and the farthest element inside the size oneDNN computes.
    dnnl_dims_t block;
    for (auto& x : block) x = 1;
    std::int64_t inner = 1;
    for (int k = 0; k < b.inner_nblks; ++k) {
        block[b.inner_idxs[k]] *= b.inner_blks[k];
        inner *= b.inner_blks[k];
    }
    std::int64_t farthest = inner - 1;
    for (int i = 0; i < d.ndims; ++i) {
        if (d.padded_dims[i] < d.dims[i] || d.padded_dims[i] % block[i] != 0)
            bad_layout("the layout's padded dimension " + std::to_string(i) + " does not hold whole blocks");
        farthest += (d.padded_dims[i] / block[i] - 1) * b.strides[i];
        if (farthest > big) bad_layout("the layout addresses too many elements");
    }
    const std::size_t size = dnnl_memory_desc_get_size(&d);
    if (static_cast<std::size_t>(farthest + 1) * element_bytes(d.data_type) > size)
        bad_layout("the layout addresses elements beyond its own size");
    return d;
}

}  // namespace

std::shared_ptr<const packed_constant> export_packed(const dnnl::memory& copy, const dnnl::memory::desc& plain,
                                                     std::shared_ptr<void> owner) {
    const dnnl::memory::desc packed = copy.get_desc();
    if (packed.data.format_kind != dnnl_blocked || plain.data.format_kind != dnnl_blocked) return nullptr;
    const std::size_t bytes = packed.get_size();
    auto form = std::make_shared<packed_constant>();
    form->layout = value_map{{"kind", layout_kind}, {"packed", desc_value(packed.data)}, {"plain", desc_value(plain.data)}};
    form->bytes = argument(shape{dtype::uint8_type, {bytes}}, std::move(owner), copy.get_data_handle());
    return form;
}

packed_descs read_packed_layout(const packed_constant& form, const shape& whole) {
    const value& kind = member(form.layout, "kind");
    if (!kind.is_string() || kind.as_string() != layout_kind)
        bad_layout("the layout is not a oneDNN 2 blocked layout this build reads");
    packed_descs out{dnnl::memory::desc(desc_from_value(member(form.layout, "packed"))),
                     dnnl::memory::desc(desc_from_value(member(form.layout, "plain")))};
    const auto& p = out.packed.data;
    const auto& q = out.plain.data;
    if (out.packed.get_size() != form.bytes.get_shape().bytes())
        bad_layout("the layout addresses " + std::to_string(out.packed.get_size()) + " bytes but " +
                   std::to_string(form.bytes.get_shape().bytes()) + " are stored");
    if (p.ndims != q.ndims || !std::equal(p.dims, p.dims + p.ndims, q.dims) || p.data_type != q.data_type)
        bad_layout("the packed and plain layouts describe different tensors");
    if (q.format_desc.blocking.inner_nblks != 0 || q.extra.flags != 0)
        bad_layout("the plain layout is blocked");
    if (out.plain.get_size() > whole.bytes() || element_bytes(q.data_type) != whole.element_size())
        bad_layout("the plain layout does not fit the " + to_string(whole) + " literal");
    return out;
}

argument restore_packed(const packed_constant& form, const shape& whole) {
    const packed_descs descs = read_packed_layout(form, whole);
    argument values(whole);  // zero-filled: elements no view reaches stay 0
    const auto& engine = cpu_engine();
    dnnl::memory from(descs.packed, engine, form.bytes.data());
    dnnl::memory to(descs.plain, engine, values.data());
    dnnl::stream stream(engine);
    dnnl::reorder(from, to).execute(stream, from, to);
    stream.wait();
    return values;
}

}  // namespace kiln::dnnl_support
