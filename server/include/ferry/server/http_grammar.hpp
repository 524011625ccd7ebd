// HTTP/1.1 grammar checks on request parts that end up in what PHP routes on (RFC 9110, RFC 9112, RFC 3986).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ferry::server {

// RFC 9110 token (header names, methods): non-empty, tchar only.
bool is_token(std::string_view s);

namespace detail {
// A set of bytes for table lookups: letters, digits and `extra`.
struct AlnumPlus {
    bool is[256] = {};
    constexpr explicit AlnumPlus(std::string_view extra)
    {
        for (int c = 0; c < 256; ++c)
            is[c] = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        for (unsigned char c : extra)
            is[c] = true;
    }
};
inline constexpr AlnumPlus tchar_table{"!#$%&'*+-.^_`|~"};
} // namespace detail

// RFC 9110 tchar.
inline bool is_tchar(unsigned char c)
{
    return detail::tchar_table.is[c];
}
// The value of a hex digit, or -1.
int hex_value(char c);
// The decoded, non-empty values of the query parameter `name` in a request target, in order
// ("?topic=a&topic=b%2Fc" → a, b/c).
std::vector<std::string> query_values(std::string_view target, std::string_view name);
// Without leading and trailing spaces and tabs (RFC 9110 OWS).
std::string_view trim_ows(std::string_view s);
// ASCII case-insensitive equality (header names).
bool iequals(std::string_view a, std::string_view b);
// Whether a comma-separated header list ("no-cache, no-transform") has `item`, case-insensitively.
bool list_has(std::string_view list, std::string_view item);
// ASCII lower case ("Content-Type" -> "content-type": HTTP/2's field names, file extensions).
std::string ascii_lower(std::string_view s);
// "content-type" -> "Content-Type" (as Go's CanonicalMIMEHeaderKey).
std::string canonical_header_name(std::string_view name);
// The same, written into `out` (its capacity is reused: no allocation on the request path).
void canonical_header_name(std::string_view name, std::string &out);
// Splits a Cookie header into name/value pairs, URL-decoding values; appends to out.
void parse_cookies(std::string_view header, std::vector<std::pair<std::string, std::string>> &out);

// RFC 9110 §7.2 Host = uri-host [ ":" port ], uri-host = IP-literal / IPv4address / reg-name. Accepts the
// empty value (a request without authority); rejects anything that would change the URI PHP parses:
// "/", "?", "#", "@", spaces, a non-numeric or too long port, an unclosed "[", a port without a host (":80").
bool valid_host(std::string_view host);

// The request-target forms of RFC 9112 §3.2.
enum class TargetForm { origin, absolute, authority, asterisk, invalid };

struct Target {
    TargetForm form = TargetForm::invalid;
    std::string_view authority; // absolute-form: the host[:port] after "scheme://"
    std::string_view path;      // origin- and absolute-form: "/p?q" ("" for "http://a" and "http://a?q")
};

// Classifies a request-target. origin-form starts with "/"; absolute-form is "http://" or "https://"
// (any case) + valid_host() + path-abempty [ "?" query ]; "*" is asterisk-form. A "#" anywhere, userinfo
// ("user@host"), or another scheme make it invalid.
Target classify_target(std::string_view target);

} // namespace ferry::server
