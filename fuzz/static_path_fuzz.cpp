// resolve_static_path: whatever the target, a path it accepts stays under the root (no "..", no ".", no
// empty segment, no leading "/"), has no control byte or backslash and no hidden segment; a refused one
// names nothing.
#include "fuzz_util.hpp"

#include "static/path.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size)
{
    using ferry::server::detail::StaticPath;
    std::string_view target(reinterpret_cast<const char *>(data), size);
    std::string_view path = ferry::server::detail::target_path(target);
    FUZZ_CHECK(path.find_first_of("?#") == std::string_view::npos);
    StaticPath p = ferry::server::detail::resolve_static_path(target);
    if (p.kind != StaticPath::Kind::ok) { // refused: nothing to look up
        FUZZ_CHECK(p.rel.empty());
        return 0;
    }
    const std::string &rel = p.rel;
    for (unsigned char c : rel)
        FUZZ_CHECK(c >= 0x20 && c != 0x7f && c != '\\');
    FUZZ_CHECK(rel.empty() || (rel.front() != '/' && rel.back() != '/'));
    std::size_t start = 0;
    while (start <= rel.size() && !rel.empty()) {
        std::size_t end = rel.find('/', start);
        if (end == std::string::npos)
            end = rel.size();
        std::string_view seg = std::string_view(rel).substr(start, end - start);
        FUZZ_CHECK(!seg.empty() && seg != "." && seg != "..");
        FUZZ_CHECK(seg.front() != '.'); // a hidden segment is refused
        start = end + 1;
    }
    // Resolving is idempotent: the relative path, as a target, names itself.
    if (rel.find_first_of("%?#") == std::string::npos) {
        StaticPath again = ferry::server::detail::resolve_static_path("/" + rel);
        FUZZ_CHECK(again.kind == StaticPath::Kind::ok && again.rel == rel);
    }
    return 0;
}
