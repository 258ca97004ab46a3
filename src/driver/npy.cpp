#include "driver/npy.hpp"

#include <bit>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace kiln::driver {

namespace {

static_assert(std::endian::native == std::endian::little, ".npy support assumes a little-endian host");

constexpr std::string_view npy_magic{"\x93NUMPY", 6};
constexpr std::size_t max_header_size = 1 << 20;
constexpr std::size_t max_dims = 32;

struct descr_entry {
    const char* code;  // without the byte-order character
    dtype type;
};
constexpr descr_entry descr_table[] = {
    {"b1", dtype::bool_type},  {"f2", dtype::half_type},   {"f4", dtype::float_type},  {"f8", dtype::double_type},
    {"i1", dtype::int8_type},  {"i2", dtype::int16_type},  {"i4", dtype::int32_type},  {"i8", dtype::int64_type},
    {"u1", dtype::uint8_type}, {"u2", dtype::uint16_type}, {"u4", dtype::uint32_type}, {"u8", dtype::uint64_type},
};

[[noreturn]] void bad(const std::string& source, const std::string& what) {
    fail(error_kind::parse_error, source + ": " + what);
}

[[noreturn]] void unsupported(const std::string& descr, const std::string& source, const std::string& why) {
    bad(source, "unsupported .npy dtype '" + descr + "'" + why +
                    "; Kiln reads bool, float16/32/64, int8/16/32/64 and uint8/16/32/64");
}

dtype parse_descr(const std::string& descr, const std::string& source) {
    if (descr.size() != 3) unsupported(descr, source, "");
    char order = descr[0];
    for (const auto& e : descr_table) {
        if (descr.compare(1, 2, e.code) != 0) continue;
        bool single_byte = dtype_size(e.type) == 1;
        if (order == '<' || order == '=' || (order == '|' && single_byte) || (order == '>' && single_byte))
            return e.type;
        unsupported(descr, source, order == '>' ? " (big-endian)" : "");
    }
    unsupported(descr, source, "");
}

// The header is a Python dict literal written by numpy; only the three keys
// numpy writes are understood, with string, boolean and integer-tuple values.
class header_parser {
public:
    header_parser(std::string_view text, const std::string& source) : text_(text), source_(source) {}

    void parse(std::string& descr, bool& fortran_order, std::vector<std::size_t>& lens) {
        bool have_descr = false, have_order = false, have_shape = false;
        expect('{');
        while (true) {
            skip_space();
            if (peek() == '}') break;
            std::string key = quoted();
            expect(':');
            if (key == "descr") {
                descr = quoted();
                have_descr = true;
            } else if (key == "fortran_order") {
                fortran_order = boolean();
                have_order = true;
            } else if (key == "shape") {
                lens = tuple();
                have_shape = true;
            } else {
                error("unexpected key '" + key + "' in the header");
            }
            skip_space();
            if (peek() == ',') ++pos_;
        }
        if (!have_descr || !have_order || !have_shape)
            error("the header lacks one of 'descr', 'fortran_order', 'shape'");
    }

private:
    [[noreturn]] void error(const std::string& what) { bad(source_, "malformed .npy header: " + what); }
    void skip_space() {
        while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    }
    char peek() {
        if (pos_ >= text_.size()) error("it ends early");
        return text_[pos_];
    }
    void expect(char c) {
        skip_space();
        if (peek() != c) error(std::string("expected '") + c + "' at character " + std::to_string(pos_));
        ++pos_;
    }
    std::string quoted() {
        skip_space();
        char q = peek();
        if (q != '\'' && q != '"') error("expected a quoted string at character " + std::to_string(pos_));
        auto end = text_.find(q, pos_ + 1);
        if (end == std::string_view::npos) error("unterminated string");
        std::string s(text_.substr(pos_ + 1, end - pos_ - 1));
        pos_ = end + 1;
        return s;
    }
    bool boolean() {
        skip_space();
        for (auto [word, v] : {std::pair{std::string_view("True"), true}, std::pair{std::string_view("False"), false}})
            if (text_.substr(pos_, word.size()) == word) {
                pos_ += word.size();
                return v;
            }
        error("expected True or False at character " + std::to_string(pos_));
    }
    std::vector<std::size_t> tuple() {
        std::vector<std::size_t> out;
        expect('(');
        while (true) {
            skip_space();
            if (peek() == ')') break;
            if (!std::isdigit(static_cast<unsigned char>(peek())))
                error("expected a dimension at character " + std::to_string(pos_));
            std::size_t n = 0;
            while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
                if (n > (std::size_t{1} << 48)) error("a dimension is too large");
                n = n * 10 + static_cast<std::size_t>(text_[pos_++] - '0');
            }
            out.push_back(n);
            if (out.size() > max_dims) error("more than " + std::to_string(max_dims) + " dimensions");
            skip_space();
            if (peek() == ',') ++pos_;
        }
        ++pos_;
        return out;
    }

    std::string_view text_;
    const std::string& source_;
    std::size_t pos_ = 0;
};

std::size_t little_endian(const std::string& bytes, std::size_t at, std::size_t width) {
    std::size_t v = 0;
    for (std::size_t i = width; i-- > 0;) v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
    return v;
}

}  // namespace

argument parse_npy(const std::string& bytes, const std::string& source) {
    if (bytes.size() < npy_magic.size() + 2 || bytes.compare(0, npy_magic.size(), npy_magic) != 0)
        bad(source, "not a .npy file (it does not start with \\x93NUMPY)");
    int major = static_cast<unsigned char>(bytes[6]);
    if (major < 1 || major > 3) bad(source, "unsupported .npy format version " + std::to_string(major));
    std::size_t len_width = major == 1 ? 2 : 4;
    std::size_t header_start = 8 + len_width;
    if (bytes.size() < header_start) bad(source, "truncated .npy header");
    std::size_t header_len = little_endian(bytes, 8, len_width);
    if (header_len > max_header_size || header_len > bytes.size() - header_start)
        bad(source, "truncated or oversized .npy header (" + std::to_string(header_len) + " bytes)");

    std::string descr;
    bool fortran_order = false;
    std::vector<std::size_t> lens;
    header_parser(std::string_view(bytes).substr(header_start, header_len), source).parse(descr, fortran_order, lens);
    dtype type = parse_descr(descr, source);

    std::size_t elements = 1;
    for (auto n : lens)
        if (__builtin_mul_overflow(elements, n, &elements))
            bad(source, "the shape " + to_string(lens) + " is too large");
    std::size_t data_bytes = 0;
    if (__builtin_mul_overflow(elements, dtype_size(type), &data_bytes))
        bad(source, "the shape " + to_string(lens) + " is too large");
    std::size_t data_start = header_start + header_len;
    if (bytes.size() - data_start != data_bytes)
        bad(source, "holds " + std::to_string(bytes.size() - data_start) + " bytes of data but shape " +
                        to_string(lens) + " of " + descr + " needs " + std::to_string(data_bytes));

    // Fortran order is column-major: the same lens with reversed strides.
    std::vector<std::size_t> strides = shape::standard_strides(lens);
    if (fortran_order) {
        std::vector<std::size_t> reversed(lens.rbegin(), lens.rend());
        auto rs = shape::standard_strides(reversed);
        strides.assign(rs.rbegin(), rs.rend());
    }
    shape stored(type, lens, strides);
    argument raw(shape(type, {elements}));
    if (data_bytes > 0) std::memcpy(raw.data(), bytes.data() + data_start, data_bytes);
    if (type == dtype::bool_type)
        for (std::size_t i = 0; i < data_bytes; ++i)
            if (std::to_integer<unsigned>(raw.data()[i]) > 1) bad(source, "a bool element is neither 0 nor 1");
    argument view = raw.reshaped(stored);
    return fortran_order ? view.contiguous() : view;
}

argument read_npy(const std::string& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::exists(path, ec)) fail(error_kind::file_not_found, path + ": no such file");
    if (!fs::is_regular_file(path, ec)) bad(path, "not a regular file");
    std::ifstream f(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (f.bad()) bad(path, "cannot read the file");
    return parse_npy(bytes, path);
}

std::string format_npy(const argument& a) {
    const shape& s = a.get_shape();
    std::string descr;
    for (const auto& e : descr_table)
        if (e.type == s.type()) descr = std::string(dtype_size(e.type) == 1 ? "|" : "<") + e.code;
    if (descr.empty()) fail("cannot write " + to_string(s.type()) + " as .npy: NumPy has no such dtype");

    std::string dims;
    for (std::size_t i = 0; i < s.ndim(); ++i) dims += (i ? ", " : "") + std::to_string(s.lens()[i]);
    if (s.ndim() == 1) dims += ",";  // Python's one-element tuple
    std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
    // Version 1.0; the header is padded with spaces so the data starts 64-byte aligned.
    std::size_t unpadded = npy_magic.size() + 2 + 2 + header.size() + 1;
    header.append((64 - unpadded % 64) % 64, ' ');
    header += '\n';

    std::string out(npy_magic);
    out += '\x01';
    out += '\x00';
    out += static_cast<char>(header.size() & 0xff);
    out += static_cast<char>(header.size() >> 8);
    out += header;
    argument packed = a.get_shape().standard() ? a : a.contiguous();
    if (s.elements() > 0) out.append(reinterpret_cast<const char*>(packed.data()), s.elements() * s.element_size());
    return out;
}

void write_npy(const argument& a, const std::string& path) {
    std::string bytes = format_npy(a);
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    f.close();
    if (!f) fail(error_kind::runtime, "cannot write '" + path + "'");
}

}  // namespace kiln::driver
