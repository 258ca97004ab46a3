#include "driver/npz.hpp"

#include <zip.h>

#include <filesystem>
#include <memory>

#include "driver/npy.hpp"

namespace kiln::driver {

namespace {

[[noreturn]] void bad(const std::string& path, const std::string& what) {
    fail(error_kind::parse_error, path + ": " + what);
}

struct archive_closer {
    void operator()(zip_t* z) const { zip_discard(z); }
};
struct member_closer {
    void operator()(zip_file_t* f) const { zip_fclose(f); }
};

std::string open_error(int code) {
    zip_error_t e;
    zip_error_init_with_code(&e, code);
    std::string text = zip_error_strerror(&e);
    zip_error_fini(&e);
    return text;
}

std::string read_member(zip_t* z, zip_uint64_t index, const std::string& where) {
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(z, index, 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE))
        bad(where, std::string("cannot read the member's size: ") + zip_strerror(z));
    std::unique_ptr<zip_file_t, member_closer> member(zip_fopen_index(z, index, 0));
    if (!member) bad(where, std::string("cannot open the member: ") + zip_strerror(z));
    std::string bytes(st.size, '\0');
    zip_uint64_t done = 0;
    while (done < st.size) {
        const zip_int64_t got = zip_fread(member.get(), bytes.data() + done, st.size - done);
        if (got <= 0) bad(where, std::string("truncated or corrupt member: ") + zip_file_strerror(member.get()));
        done += static_cast<zip_uint64_t>(got);
    }
    return bytes;
}

}  // namespace

std::map<std::string, argument> read_npz(const std::string& path) {
    if (!std::filesystem::exists(path)) fail(error_kind::file_not_found, path + ": no such file");
    int code = 0;
    std::unique_ptr<zip_t, archive_closer> z(zip_open(path.c_str(), ZIP_RDONLY, &code));
    if (!z) bad(path, "not a readable .npz (zip) file: " + open_error(code));
    std::map<std::string, argument> arrays;
    const zip_int64_t count = zip_get_num_entries(z.get(), 0);
    for (zip_int64_t i = 0; i < count; ++i) {
        const auto index = static_cast<zip_uint64_t>(i);
        const char* raw_name = zip_get_name(z.get(), index, 0);
        if (raw_name == nullptr) bad(path, "member " + std::to_string(i) + " has no name");
        std::string name = raw_name;
        if (!name.empty() && name.back() == '/') continue;  // a folder entry
        const std::string where = path + " member '" + name + "'";
        std::string key = name.size() > 4 && name.ends_with(".npy") ? name.substr(0, name.size() - 4) : name;
        if (!arrays.emplace(key, parse_npy(read_member(z.get(), index, where), where)).second)
            bad(path, "the key '" + key + "' appears twice");
    }
    return arrays;
}

}  // namespace kiln::driver
