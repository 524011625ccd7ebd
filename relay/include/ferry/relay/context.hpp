// HTTP request/response contexts (shared protocol.md §3) in the JSON and msgpack codecs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ferry::relay {

enum class Codec : std::uint8_t { json, msgpack };

// Frame flag for a codec (0x08 JSON, 0x10 msgpack).
std::uint8_t codec_flag(Codec c);

struct HeaderField {
    std::string name; // canonical form: Content-Type
    std::vector<std::string> values;
};

struct RequestContext {
    std::string remote_addr;
    std::string protocol; // HTTP/1.0, HTTP/1.1
    std::string method;
    std::string uri;                  // absolute: http://host/path?query
    std::vector<HeaderField> headers; // Host excluded; names canonical; one entry per name
    std::vector<std::pair<std::string, std::string>> cookies; // URL-decoded values
    std::string raw_query;
    bool parsed = false;
    // uploads: always null for now; attributes: always {}.
};

// Appends the encoded context to `out`.
void encode_request(const RequestContext &ctx, Codec codec, std::string &out);

struct ResponseContext {
    int status = 200;
    std::vector<HeaderField> headers; // order as received; each value is its own header line
};

// Decodes a response context. Empty input = 200, no headers. Returns false and sets `error`
// on malformed input (not JSON/msgpack, not a map, status not an integer, headers not a map of
// string lists...). A status outside 100..599 decodes fine; the server maps it to 500.
bool decode_response(std::string_view in, Codec codec, ResponseContext &out, std::string &error);

// "content-type" -> "Content-Type" (as Go's CanonicalMIMEHeaderKey).
std::string canonical_header_name(std::string_view name);
// The same, written into `out` (its capacity is reused: no allocation on the request path).
void canonical_header_name(std::string_view name, std::string &out);
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
// ASCII case-insensitive equality (header names).
bool iequals(std::string_view a, std::string_view b);
// Splits a Cookie header into name/value pairs, URL-decoding values; appends to out.
void parse_cookies(std::string_view header, std::vector<std::pair<std::string, std::string>> &out);

} // namespace ferry::relay
