#include "ferry/server/http_grammar.hpp"

#include <arpa/inet.h>

#include <string>
#include <unordered_set>

namespace ferry::server {
namespace {

bool is_hex(char c)
{
    return hex_value(c) >= 0;
}

// unreserved / sub-delims: the bytes a reg-name may hold besides pct-encoded triplets.
constexpr detail::AlnumPlus reg_name_bytes{"-._~!$&'()*+,;="};

// reg-name = *( unreserved / pct-encoded / sub-delims ); IPv4address is a subset.
bool valid_reg_name(std::string_view s)
{
    for (std::size_t i = 0; i < s.size(); ++i) {
        auto c = static_cast<unsigned char>(s[i]);
        if (reg_name_bytes.is[c])
            continue;
        if (c == '%' && i + 2 < s.size() && is_hex(s[i + 1]) && is_hex(s[i + 2])) {
            i += 2;
            continue;
        }
        return false;
    }
    return true;
}

bool valid_port(std::string_view p)
{
    if (p.size() > 5)
        return false;
    unsigned v = 0;
    for (char c : p) {
        if (c < '0' || c > '9')
            return false;
        v = v * 10 + static_cast<unsigned>(c - '0');
    }
    return v <= 65535;
}

bool iprefix(std::string_view s, std::string_view p)
{
    if (s.size() < p.size())
        return false;
    for (std::size_t i = 0; i < p.size(); ++i) {
        char a = s[i];
        if (a >= 'A' && a <= 'Z')
            a = static_cast<char>(a - 'A' + 'a');
        if (a != p[i])
            return false;
    }
    return true;
}

} // namespace

std::string_view trim_ows(std::string_view s)
{
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
        s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
        s.remove_suffix(1);
    return s;
}

namespace {

// %XX decoded; '+' and malformed escapes kept as they are.
std::string url_decode(std::string_view s)
{
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%' && i + 2 < s.size()) {
            const int hi = hex_value(s[i + 1]);
            const int lo = hex_value(s[i + 2]);
            if (hi >= 0 && lo >= 0) {
                out += static_cast<char>(hi * 16 + lo);
                i += 2;
                continue;
            }
        }
        // '+' is a space, as RoadRunner (url.QueryUnescape) and PHP-FPM decode it: setcookie("a", "x y")
        // sends x+y.
        out += s[i] == '+' ? ' ' : s[i];
    }
    return out;
}

} // namespace

std::vector<std::string> query_values(std::string_view target, std::string_view name)
{
    std::vector<std::string> out;
    auto q = target.find('?');
    if (q == std::string_view::npos)
        return out;
    std::string_view rest = target.substr(q + 1);
    while (!rest.empty()) {
        auto amp = rest.find('&');
        std::string_view pair = rest.substr(0, amp);
        rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
        auto eq = pair.find('=');
        if (eq == std::string_view::npos || pair.substr(0, eq) != name)
            continue;
        if (std::string v = url_decode(pair.substr(eq + 1)); !v.empty())
            out.push_back(std::move(v));
    }
    return out;
}

bool valid_host(std::string_view host)
{
    if (!host.empty() && host.front() == '[') {
        auto close = host.find(']');
        if (close == std::string_view::npos)
            return false;
        std::string inside(host.substr(1, close - 1));
        in6_addr a6;
        if (inside.empty() || ::inet_pton(AF_INET6, inside.c_str(), &a6) != 1)
            return false;
        std::string_view rest = host.substr(close + 1);
        if (rest.empty())
            return true;
        return rest.front() == ':' && valid_port(rest.substr(1));
    }
    auto colon = host.find(':');
    if (colon == std::string_view::npos)
        return valid_reg_name(host);
    // ":80": a port without a host, which PHP would see as "http://:80/"; an empty Host has no ":".
    return colon > 0 && valid_reg_name(host.substr(0, colon)) && valid_port(host.substr(colon + 1));
}

Target classify_target(std::string_view t)
{
    Target out;
    if (t.empty() || t.find('#') != std::string_view::npos)
        return out;
    if (t.front() == '/') {
        out.form = TargetForm::origin;
        out.path = t;
        return out;
    }
    if (t == "*") {
        out.form = TargetForm::asterisk;
        return out;
    }
    std::size_t skip = iprefix(t, "http://") ? 7 : iprefix(t, "https://") ? 8 : 0;
    if (skip == 0) {
        // authority-form (CONNECT only; the caller decides) — a valid host:port and nothing else.
        if (valid_host(t) && t.find(':') != std::string_view::npos) {
            out.form = TargetForm::authority;
            out.authority = t;
        }
        return out;
    }
    std::string_view rest = t.substr(skip);
    std::size_t end = rest.find_first_of("/?");
    std::string_view authority = rest.substr(0, end);
    if (authority.empty() || !valid_host(authority))
        return out;
    out.form = TargetForm::absolute;
    out.authority = authority;
    out.path = end == std::string_view::npos ? std::string_view() : rest.substr(end);
    return out;
}

void canonical_header_name(std::string_view name, std::string &out)
{
    out.assign(name);
    for (char c : name)
        if (!is_tchar(static_cast<unsigned char>(c)))
            return;
    bool upper = true;
    for (char &c : out) {
        if (upper && c >= 'a' && c <= 'z')
            c = static_cast<char>(c - 'a' + 'A');
        else if (!upper && c >= 'A' && c <= 'Z')
            c = static_cast<char>(c - 'A' + 'a');
        upper = c == '-';
    }
}

std::string canonical_header_name(std::string_view name)
{
    std::string out;
    canonical_header_name(name, out);
    return out;
}

void parse_cookies(std::string_view header, std::vector<std::pair<std::string, std::string>> &out)
{
    // First occurrence of a name wins (as PHP's $_COOKIE). A hash set only when there are many names, so
    // a header of thousands of tiny cookies cannot make this quadratic.
    // (The set owns copies: views into `out` would dangle when it reallocates and moves short strings.)
    std::unordered_set<std::string> seen;
    auto exists = [&](std::string_view name) {
        if (seen.empty() && out.size() < 16) {
            for (const auto &c : out)
                if (c.first == name)
                    return true;
            return false;
        }
        if (seen.empty())
            for (const auto &c : out)
                seen.insert(c.first);
        return seen.contains(std::string(name));
    };

    std::size_t pos = 0;
    while (pos <= header.size()) {
        std::size_t semi = header.find(';', pos);
        if (semi == std::string_view::npos)
            semi = header.size();
        std::string_view part = trim_ows(header.substr(pos, semi - pos));
        pos = semi + 1;
        if (part.empty())
            continue;
        std::string_view name = part;
        std::string_view value;
        if (std::size_t eq = part.find('='); eq != std::string_view::npos) {
            name = trim_ows(part.substr(0, eq));
            value = trim_ows(part.substr(eq + 1));
        }
        if (name.empty() || exists(name))
            continue;
        if (value.size() >= 2 && value.front() == '"' && value.back() == '"')
            value = value.substr(1, value.size() - 2); // Go strips the quotes of a quoted value
        out.emplace_back(std::string(name), url_decode(value));
        if (!seen.empty())
            seen.insert(out.back().first);
    }
}

bool is_token(std::string_view s)
{
    if (s.empty())
        return false;
    for (char c : s)
        if (!is_tchar(static_cast<unsigned char>(c)))
            return false;
    return true;
}

bool list_has(std::string_view list, std::string_view item)
{
    while (!list.empty()) {
        const auto comma = list.find(',');
        if (iequals(trim_ows(list.substr(0, comma)), item))
            return true;
        list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    }
    return false;
}

std::string ascii_lower(std::string_view s)
{
    std::string out(s);
    for (char &c : out)
        if (c >= 'A' && c <= 'Z')
            c = static_cast<char>(c - 'A' + 'a');
    return out;
}

bool iequals(std::string_view a, std::string_view b)
{
    if (a.size() != b.size())
        return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        unsigned char x = static_cast<unsigned char>(a[i]), y = static_cast<unsigned char>(b[i]);
        if (x >= 'A' && x <= 'Z')
            x = static_cast<unsigned char>(x + 32);
        if (y >= 'A' && y <= 'Z')
            y = static_cast<unsigned char>(y + 32);
        if (x != y)
            return false;
    }
    return true;
}

int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

} // namespace ferry::server
