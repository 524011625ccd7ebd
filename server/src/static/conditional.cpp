#include "conditional.hpp"

#include "ferry/server/http_grammar.hpp"

#include <charconv>
#include <cstring>
#include <string>

namespace ferry::server::detail {
namespace {

std::string_view opaque(std::string_view tag) // W/"x" -> "x"
{
    return tag.starts_with("W/") ? tag.substr(2) : tag;
}

bool parse_u64(std::string_view s, std::uint64_t &out)
{
    if (s.empty())
        return false;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && p == s.data() + s.size();
}

} // namespace

std::optional<std::time_t> parse_http_date(std::string_view s)
{
    std::string text(trim_ows(s));
    for (const char *format :
         {"%a, %d %b %Y %H:%M:%S GMT", "%A, %d-%b-%y %H:%M:%S GMT", "%a %b %e %H:%M:%S %Y"}) {
        std::tm tm{};
        const char *end = ::strptime(text.c_str(), format, &tm);
        if (end != nullptr && *end == '\0')
            return ::timegm(&tm);
    }
    return std::nullopt;
}

bool none_match_hits(std::string_view header, std::string_view etag)
{
    std::string_view want = opaque(etag);
    while (!header.empty()) {
        auto comma = header.find(',');
        std::string_view item = trim_ows(header.substr(0, comma));
        header = comma == std::string_view::npos ? std::string_view() : header.substr(comma + 1);
        if (item == "*" || (!item.empty() && opaque(item) == want))
            return true;
    }
    return false;
}

bool strong_etag_equal(std::string_view a, std::string_view b)
{
    a = trim_ows(a);
    return !a.starts_with("W/") && !b.starts_with("W/") && a == b && !a.empty();
}

ByteRange parse_range(std::string_view range, std::uint64_t size)
{
    ByteRange r;
    range = trim_ows(range);
    if (range.size() < 6 || !iequals(range.substr(0, 6), "bytes="))
        return r;
    range = trim_ows(range.substr(6));
    if (range.find(',') != std::string_view::npos)
        return r; // several ranges: the whole file (RFC 9110 lets a server ignore Range)
    auto dash = range.find('-');
    if (dash == std::string_view::npos)
        return r;
    std::string_view a = trim_ows(range.substr(0, dash)), b = trim_ows(range.substr(dash + 1));
    std::uint64_t first = 0, last = 0;
    if (a.empty()) { // suffix: the last n bytes
        if (!parse_u64(b, last))
            return r;
        if (last == 0 || size == 0) {
            r.kind = ByteRange::Kind::unsatisfiable;
            return r;
        }
        r.kind = ByteRange::Kind::satisfiable;
        r.length = std::min(last, size);
        r.first = size - r.length;
        return r;
    }
    if (!parse_u64(a, first) || (!b.empty() && (!parse_u64(b, last) || last < first)))
        return r; // malformed: ignored
    if (first >= size) {
        r.kind = ByteRange::Kind::unsatisfiable;
        return r;
    }
    if (b.empty() || last >= size)
        last = size - 1;
    r.kind = ByteRange::Kind::satisfiable;
    r.first = first;
    r.length = last - first + 1;
    return r;
}

double accept_encoding_q(std::string_view header, std::string_view coding)
{
    double star = 0, exact = -1;
    while (!header.empty()) {
        auto comma = header.find(',');
        std::string_view item = trim_ows(header.substr(0, comma));
        header = comma == std::string_view::npos ? std::string_view() : header.substr(comma + 1);
        auto semi = item.find(';');
        std::string_view name = trim_ows(item.substr(0, semi));
        double q = 1;
        if (semi != std::string_view::npos) {
            std::string_view param = trim_ows(item.substr(semi + 1));
            if (param.size() >= 2 && (param[0] == 'q' || param[0] == 'Q') && param[1] == '=') {
                std::string v(trim_ows(param.substr(2)));
                char *end = nullptr;
                q = std::strtod(v.c_str(), &end);
                if (end == v.c_str() || q < 0 || q > 1)
                    q = 0;
            }
        }
        if (iequals(name, coding))
            exact = q;
        else if (name == "*")
            star = q;
    }
    return exact >= 0 ? exact : star;
}

} // namespace ferry::server::detail
