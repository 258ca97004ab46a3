#include "kiln/argument.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>

namespace kiln {

namespace {
// Allocations from this size on are mapped directly (see allocate_aligned).
constexpr std::size_t mapped_allocation_bytes = std::size_t{1} << 20;
// And from this size on they start on a transparent huge page (x86-64's 2 MiB).
constexpr std::size_t huge_page_bytes = std::size_t{2} << 20;

// `bytes` of zeroed, resident memory starting on a 2 MiB boundary, advised
// to be backed by huge pages; null where the kernel refuses the mapping.
// Where the system leaves transparent huge pages to madvise (the default
// of many distributions), weights in 4 KiB pages cost a TLB miss every 4 KiB
// and, in a virtual machine, a two-level page walk each: a 487 MB read-only
// stream on a 2-core Zen 4 VM (2 threads, interleaved in one process) ran at
// 36-37 GB/s over 4 KiB pages and 58-60 GB/s over 2 MiB ones, and a Llama
// decode step's products 1.04-1.95x faster. Without huge pages (THP off,
// none free) the advice is void and the memory is as before.
std::shared_ptr<std::byte> map_on_huge_pages(std::size_t bytes) {
    const auto page = static_cast<std::size_t>(sysconf(_SC_PAGE_SIZE));
    const std::size_t length = (bytes + page - 1) / page * page;
    const std::size_t span = length + huge_page_bytes;  // room to slide to a 2 MiB boundary
    void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return nullptr;
    auto* base = static_cast<std::byte*>(raw);
    const std::size_t head =
        (huge_page_bytes - reinterpret_cast<std::uintptr_t>(base) % huge_page_bytes) % huge_page_bytes;
    std::byte* start = base + head;
    if (head > 0) munmap(base, head);
    munmap(start + length, span - head - length);
    madvise(start, length, MADV_HUGEPAGE);  // advice: refused, the pages are 4 KiB ones
    // Resident now, as MAP_POPULATE makes the other mappings: the faults
    // happen here, one per huge page, not in the first run.
    if (madvise(start, length, MADV_POPULATE_WRITE) != 0)
        for (std::size_t at = 0; at < length; at += page) start[at] = std::byte{0};
    return {start, [length](std::byte* q) { munmap(q, length); }};
}

}  // namespace

std::size_t physical_memory_bytes() {
    static const std::size_t bytes = static_cast<std::size_t>(sysconf(_SC_PHYS_PAGES)) *
                                     static_cast<std::size_t>(sysconf(_SC_PAGE_SIZE));
    return bytes;
}

std::shared_ptr<std::byte> allocate_aligned(std::size_t bytes) {
    // A request beyond physical memory can only come from a bad shape; refuse
    // it clearly rather than let the kernel kill the process later.
    if (bytes > physical_memory_bytes())
        fail(error_kind::invalid_argument, "cannot allocate " + std::to_string(bytes) +
                                               " bytes: more than this machine's " +
                                               std::to_string(physical_memory_bytes()) + " bytes of memory");
    if (bytes >= huge_page_bytes)
        if (auto buffer = map_on_huge_pages(bytes)) return buffer;
    if (bytes >= mapped_allocation_bytes) {
        // Large buffers come straight from the kernel: already zero, page
        // aligned, and populated in one call, which costs less than a page
        // fault per 4 KiB followed by a memset (weights of big models). Freeing
        // one returns its memory to the system at once, where malloc would keep
        // freed heap pages resident: weights dropped while compiling leave.
        void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        if (p != MAP_FAILED) return {static_cast<std::byte*>(p), [bytes](std::byte* q) { munmap(q, bytes); }};
    }
    std::size_t rounded = (std::max<std::size_t>(bytes, 1) + buffer_alignment - 1) / buffer_alignment * buffer_alignment;
    void* p = std::aligned_alloc(buffer_alignment, rounded);
    if (p == nullptr)
        fail(error_kind::runtime, "out of memory allocating " + std::to_string(bytes) + " bytes");
    std::memset(p, 0, rounded);
    return {static_cast<std::byte*>(p), [](std::byte* q) { std::free(q); }};
}

argument::argument(const shape& s) : shape_(s) {
    auto buffer = allocate_aligned(s.bytes());
    data_ = buffer.get();
    owner_ = std::move(buffer);
}

argument::argument(const shape& s, void* data) : shape_(s), data_(static_cast<std::byte*>(data)) {}

argument::argument(const shape& s, std::shared_ptr<void> owner, void* data)
    : shape_(s), owner_(std::move(owner)), data_(static_cast<std::byte*>(data)) {}

argument argument::reshaped(const shape& s, std::size_t byte_offset) const {
    return argument(s, owner_, data_ + byte_offset).at(location_);
}

void argument::require_host(const char* use) const {
    if (location_ == memory_location::device)
        fail(std::string(use) + ": the " + to_string(shape_) +
             " argument is in a device's memory, which the host cannot read; copy it to the host first (the "
             "target's copy_from)");
}

argument argument::contiguous() const {
    require_host("contiguous");
    argument out(shape_.as_standard());
    copy_values(*this, out);
    return out;
}

argument argument::copy() const {
    require_host("copy");
    if (!shape_.packed()) return contiguous();
    argument out(shape_);
    std::memcpy(out.data(), data_, shape_.bytes());
    return out;
}

double argument::value_at(std::size_t i) const {
    require_host("value_at");
    return visit_any_type(shape_.type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        return convert_element<double>(data_as<T>()[shape_.index(i)]);
    });
}

void copy_values(const argument& src, const argument& dst) {
    src.require_host("copy_values");
    dst.require_host("copy_values");
    const shape& s = src.get_shape();
    const shape& d = dst.get_shape();
    if (s.lens() != d.lens() || s.type() != d.type())
        fail(error_kind::runtime, "copy_values: " + to_string(s) + " does not match " + to_string(d));
    if (s.standard() && d.standard()) {
        std::memcpy(dst.data(), src.data(), s.bytes());
        return;
    }
    const std::size_t n = s.elements();
    const std::size_t size = s.element_size();
    if (n == 0) return;
    if (s.ndim() == 0) {
        std::memcpy(dst.data(), src.data(), size);
        return;
    }
    // Row-major over the lengths, offsets carried from one row of the
    // innermost dimension to the next (a transposed 768 x 3072 weight: a
    // division per element and dimension took seconds per model).
    const std::size_t rank = s.ndim();
    const auto& lens = s.lens();
    const std::size_t inner = lens[rank - 1];
    const std::size_t src_step = s.strides()[rank - 1] * size;
    const std::size_t dst_step = d.strides()[rank - 1] * size;
    std::vector<std::size_t> position(rank, 0);
    std::size_t src_offset = 0, dst_offset = 0;  // bytes, of the current row's first element
    for (std::size_t done = 0; done < n; done += inner) {
        const std::byte* from = src.data() + src_offset;
        std::byte* to = dst.data() + dst_offset;
        if (size == 4) {
            for (std::size_t j = 0; j < inner; ++j) std::memcpy(to + j * dst_step, from + j * src_step, 4);
        } else {
            for (std::size_t j = 0; j < inner; ++j) std::memcpy(to + j * dst_step, from + j * src_step, size);
        }
        for (std::size_t k = rank - 1; k-- > 0;) {
            src_offset += s.strides()[k] * size;
            dst_offset += d.strides()[k] * size;
            if (++position[k] < lens[k]) break;
            src_offset -= s.strides()[k] * size * lens[k];
            dst_offset -= d.strides()[k] * size * lens[k];
            position[k] = 0;
        }
    }
}

bool values_equal(const argument& a, const argument& b) {
    a.require_host("values_equal");
    b.require_host("values_equal");
    const shape& s = a.get_shape();
    if (s.lens() != b.get_shape().lens() || s.type() != b.get_shape().type()) return false;
    std::size_t size = s.element_size();
    for (std::size_t i = 0; i < s.elements(); ++i)
        if (std::memcmp(a.data() + s.index(i) * size, b.data() + b.get_shape().index(i) * size, size) != 0)
            return false;
    return true;
}

argument generate_argument(const shape& s, unsigned long seed) {
    argument out(s.as_standard());
    std::mt19937_64 rng(seed);
    visit_any_type(s.type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* p = out.data_as<T>();
        for (std::size_t i = 0; i < s.elements(); ++i) {
            if constexpr (std::is_same_v<T, bool>)
                p[i] = (rng() & 1) != 0;
            else if constexpr (std::is_same_v<T, float8_e8m0fnu>)  // powers of two from 1/8 to 8
                p[i] = T::from_bits(static_cast<std::uint8_t>(124 + rng() % 7));
            else if constexpr (is_small_int_v<T>)  // every value of the type
                p[i] = T(static_cast<std::int64_t>(T::min + static_cast<int>(rng() % (T::max - T::min + 1))));
            else if constexpr (is_float_like_v<T> || is_small_float_v<T>)
                p[i] = T(static_cast<float>(std::uniform_real_distribution<double>(-1.0, 1.0)(rng)));
            else if constexpr (std::is_signed_v<T>)
                p[i] = static_cast<T>(static_cast<int>(rng() % 21) - 10);
            else
                p[i] = static_cast<T>(rng() % 21);
        }
    });
    return out;
}

std::string format_values(const argument& a, std::size_t max_values) {
    if (a.location() == memory_location::device) return "{in device memory}";
    std::ostringstream os;
    os.precision(6);
    std::size_t n = a.get_shape().elements();
    os << "{";
    for (std::size_t i = 0; i < n && i < max_values; ++i) os << (i ? ", " : "") << a.value_at(i);
    if (n > max_values) os << ", ... (" << n << " values)";
    os << "}";
    return os.str();
}

}  // namespace kiln
