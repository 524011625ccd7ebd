#include "path.hpp"

#include "ferry/server/http_grammar.hpp"

#include <algorithm>

namespace ferry::server::detail {
std::string_view target_path(std::string_view target)
{
    if (!target.empty() && target.front() != '/') { // absolute-form: scheme://authority/path
        auto scheme = target.find("://");
        auto slash = scheme == std::string_view::npos ? std::string_view::npos : target.find('/', scheme + 3);
        target = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
    }
    return target.substr(0, target.find_first_of("?#"));
}

std::string extension_of(std::string_view path)
{
    auto slash = path.rfind('/');
    std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
    auto dot = name.rfind('.');
    if (dot == std::string_view::npos || dot == 0)
        return {};
    std::string ext(name.substr(dot));
    for (char &c : ext)
        if (c >= 'A' && c <= 'Z')
            c = static_cast<char>(c - 'A' + 'a');
    return ext;
}

bool extension_denied(const conf::StaticConfig &config, std::string_view path)
{
    const std::string ext = extension_of(path);
    auto listed = [&ext](const std::vector<std::string> &list) {
        return std::find(list.begin(), list.end(), ext) != list.end();
    };
    return listed(config.forbid) || (!config.allow.empty() && !listed(config.allow));
}

bool has_hidden_segment(std::string_view path)
{
    for (std::size_t i = 0; i < path.size(); ++i)
        if (path[i] == '.' && (i == 0 || path[i - 1] == '/'))
            return true;
    return false;
}

namespace {

StaticPath resolve(std::string_view target)
{
    StaticPath out;
    std::string_view raw = target_path(target);
    out.trailing_slash = !raw.empty() && raw.back() == '/';
    std::string segment;
    auto finish_segment = [&]() -> bool {
        if (segment.empty() || segment == ".") {
            segment.clear(); // "//" and "/./" add nothing
            return true;
        }
        if (segment == "..") {
            out.kind = StaticPath::Kind::traversal;
            return false;
        }
        if (segment.front() == '.' && out.kind == StaticPath::Kind::ok)
            out.kind = StaticPath::Kind::hidden; // go on: a later ".." is still a traversal
        if (!out.rel.empty())
            out.rel += '/';
        out.rel += segment;
        segment.clear();
        return true;
    };
    for (std::size_t i = 0; i < raw.size(); ++i) {
        char c = raw[i];
        bool encoded = false;
        if (c == '%') {
            int hi = i + 2 < raw.size() ? hex_value(raw[i + 1]) : -1;
            int lo = i + 2 < raw.size() ? hex_value(raw[i + 2]) : -1;
            if (hi < 0 || lo < 0) {
                out.kind = StaticPath::Kind::traversal; // a malformed escape: nothing sane to look up
                return out;
            }
            c = static_cast<char>(hi * 16 + lo);
            i += 2;
            encoded = true;
        }
        auto u = static_cast<unsigned char>(c);
        if (c == '\\' || u < 0x20 || u == 0x7f || (c == '/' && encoded)) {
            out.kind = StaticPath::Kind::traversal;
            return out;
        }
        if (c == '/') {
            if (!finish_segment())
                return out;
            continue;
        }
        segment += c;
    }
    finish_segment();
    return out;
}

} // namespace

StaticPath resolve_static_path(std::string_view target)
{
    StaticPath out = resolve(target);
    if (out.kind != StaticPath::Kind::ok)
        out.rel.clear(); // nothing to look up
    return out;
}

} // namespace ferry::server::detail
