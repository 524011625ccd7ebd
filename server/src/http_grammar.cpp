#include "ferry/server/http_grammar.hpp"

#include "ferry/relay/context.hpp"

#include <arpa/inet.h>

#include <string>

namespace ferry::server {
namespace {

bool is_hex(char c)
{
    return relay::hex_value(c) >= 0;
}

// unreserved / sub-delims: the bytes a reg-name may hold besides pct-encoded triplets.
constexpr relay::detail::AlnumPlus reg_name_bytes{"-._~!$&'()*+,;="};

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
    return valid_reg_name(host.substr(0, colon)) && valid_port(host.substr(colon + 1));
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

} // namespace ferry::server
