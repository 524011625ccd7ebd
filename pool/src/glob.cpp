#include "glob.hpp"

#include <fnmatch.h>

namespace ferry::pool::detail {

namespace {

bool has_glob_char(std::string_view s)
{
    return s.find_first_of("*?[{") != std::string_view::npos;
}

// The '/'-separated segments of `path`; empty ones ("a//b", a leading or trailing '/') are dropped.
std::vector<std::string_view> split(std::string_view path)
{
    std::vector<std::string_view> out;
    std::size_t start = 0;
    while (start <= path.size()) {
        std::size_t slash = path.find('/', start);
        if (slash == std::string_view::npos)
            slash = path.size();
        if (slash > start)
            out.push_back(path.substr(start, slash - start));
        start = slash + 1;
    }
    return out;
}

// Does `segs[si..]` match `pat[pi..]`? "**" takes any number of segments.
bool match_from(const std::vector<std::string> &pat, std::size_t pi,
                const std::vector<std::string_view> &segs, std::size_t si)
{
    while (pi < pat.size()) {
        if (pat[pi] == "**") {
            if (pi + 1 == pat.size())
                return true;
            for (std::size_t k = si; k <= segs.size(); ++k)
                if (match_from(pat, pi + 1, segs, k))
                    return true;
            return false;
        }
        if (si == segs.size())
            return false;
        const std::string seg(segs[si]);
        if (::fnmatch(pat[pi].c_str(), seg.c_str(), 0) != 0)
            return false;
        ++pi;
        ++si;
    }
    return si == segs.size();
}

} // namespace

std::vector<std::string> expand_braces(std::string_view pattern)
{
    // The first '{' with its matching '}' that has a ',' at its own depth.
    int depth = 0;
    std::size_t open = std::string_view::npos;
    for (std::size_t i = 0; i < pattern.size(); ++i) {
        char c = pattern[i];
        if (c == '\\') {
            ++i;
            continue;
        }
        if (c == '{') {
            if (depth++ == 0)
                open = i;
        } else if (c == '}' && depth > 0 && --depth == 0) {
            std::vector<std::string> parts;
            std::size_t start = open + 1;
            int d = 0;
            for (std::size_t j = open + 1; j < i; ++j) {
                if (pattern[j] == '\\') {
                    ++j;
                } else if (pattern[j] == '{') {
                    ++d;
                } else if (pattern[j] == '}') {
                    --d;
                } else if (pattern[j] == ',' && d == 0) {
                    parts.emplace_back(pattern.substr(start, j - start));
                    start = j + 1;
                }
            }
            parts.emplace_back(pattern.substr(start, i - start));
            if (parts.size() < 2) { // "{x}" is not an alternative: keep it, look further
                open = std::string_view::npos;
                continue;
            }
            std::vector<std::string> out;
            const std::string_view head = pattern.substr(0, open), tail = pattern.substr(i + 1);
            for (const auto &p : parts)
                for (auto &rest : expand_braces(std::string(head) + p + std::string(tail)))
                    out.push_back(std::move(rest));
            return out;
        }
    }
    return {std::string(pattern)};
}

Glob::Glob(std::string_view pattern) : pattern_(pattern)
{
    std::string p(pattern);
    if (!p.empty() && p.front() == '.' && !has_glob_char(p) && p.find('/') == std::string::npos)
        p = "*" + p; // RoadRunner 2.x: a suffix
    while (p.rfind("./", 0) == 0)
        p.erase(0, 2);
    anywhere_ = p.find('/') == std::string::npos;
    for (const auto &alt : expand_braces(p)) {
        auto segs = split(alt);
        alternatives_.emplace_back(segs.begin(), segs.end());
    }
}

bool Glob::match(std::string_view path) const
{
    std::vector<std::string_view> segs = split(path);
    if (segs.empty())
        return false;
    if (anywhere_)
        segs.erase(segs.begin(), segs.end() - 1);
    for (const auto &alt : alternatives_)
        if (match_from(alt, 0, segs, 0))
            return true;
    return false;
}

} // namespace ferry::pool::detail
