// Decoding a response context (docs/protocol.md §3), the same rules for JSON and msgpack (internal to
// relay/): each codec supplies an adapter over its library's value type; decode_tree() walks it once.
#pragma once

#include "ferry/base/result.hpp"
#include "ferry/base/text.hpp"
#include "ferry/relay/context.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>

namespace ferry::relay::detail {

// Untrusted text in an error message: quoted, escaped, at most 64 bytes.
inline std::string shown(std::string_view s)
{
    return '"' + printable(s, 64) + '"';
}

enum class Kind { null, boolean, integer, unsigned_integer, floating, string, list, map, other };

// A status number as an int, saturated (a status outside 100..599 decodes; the server maps it to 500).
template <typename N> int clamp_status(N v)
{
    constexpr auto hi = std::numeric_limits<int>::max(), lo = std::numeric_limits<int>::min();
    if constexpr (std::is_floating_point_v<N>) {
        return v > hi ? hi : v < lo ? lo : static_cast<int>(v);
    } else {
        return std::cmp_greater(v, hi) ? hi : std::cmp_less(v, lo) ? lo : static_cast<int>(v);
    }
}

// "404", "-1": optional sign and digits only.
inline bool status_from_string(std::string_view s, int &status)
{
    std::string_view digits = s;
    if (!digits.empty() && (digits[0] == '-' || digits[0] == '+'))
        digits.remove_prefix(1);
    if (digits.empty() || digits.size() > 18)
        return false;
    for (char c : digits)
        if (c < '0' || c > '9')
            return false;
    std::int64_t v = 0;
    std::from_chars(digits.data(), digits.data() + digits.size(), v);
    status = clamp_status(s[0] == '-' ? -v : v);
    return true;
}

inline bool status_from_double(double d, int &status)
{
    if (!std::isfinite(d) || std::trunc(d) != d)
        return false;
    status = clamp_status(static_cast<long double>(d));
    return true;
}

inline std::string double_to_string(double d)
{
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, d);
    return std::string(buf, r.ptr);
}

// A scalar header value as text (PHP's string casts: true is "1", false ""); false for lists and maps,
// `skip` for null.
template <typename A, typename V> bool scalar_text(const V &v, std::string &s, bool &skip)
{
    skip = false;
    switch (A::kind(v)) {
    case Kind::string:
        s.assign(A::string(v));
        return true;
    case Kind::integer:
        s = std::to_string(A::integer(v));
        return true;
    case Kind::unsigned_integer:
        s = std::to_string(A::unsigned_integer(v));
        return true;
    case Kind::floating:
        s = double_to_string(A::floating(v));
        return true;
    case Kind::boolean:
        s = A::boolean(v) ? "1" : "";
        return true;
    case Kind::null:
        skip = true;
        return true;
    default:
        return false;
    }
}

// A header's values: one scalar, a list of them, or a map (a PHP array with gaps in its keys) of them.
template <typename A, typename V> bool header_values(const V &v, std::vector<std::string> &values)
{
    std::string s;
    bool skip = false;
    auto one = [&](const V &e) {
        if (!scalar_text<A>(e, s, skip))
            return false;
        if (!skip)
            values.push_back(std::move(s));
        return true;
    };
    switch (A::kind(v)) {
    case Kind::list:
        return A::elements(v, one);
    case Kind::map:
        return A::members(v, [&](std::string_view, const V &e) { return one(e); });
    default:
        return one(v);
    }
}

template <typename A, typename V> bool status_of(const V &v, int &status)
{
    switch (A::kind(v)) {
    case Kind::integer:
        status = clamp_status(A::integer(v));
        return true;
    case Kind::unsigned_integer:
        status = clamp_status(A::unsigned_integer(v));
        return true;
    case Kind::floating:
        return status_from_double(A::floating(v), status);
    case Kind::string:
        return status_from_string(A::string(v), status);
    case Kind::null:
        return true;
    default:
        return false;
    }
}

// {"status": int, "headers": {name: value | [values]}}; PHP's empty array stands for an empty map.
template <typename A, typename V> Result<void> decode_tree(const V &root, ResponseContext &out)
{
    if (A::kind(root) == Kind::list && A::empty(root))
        return {};
    if (A::kind(root) != Kind::map)
        return fail(std::string("response context is not a ") + A::map_name + ": " + A::show(root));
    const V *st = nullptr, *hs = nullptr;
    if (!A::members(root, [&](std::string_view key, const V &v) {
            if (key == "status")
                st = &v;
            else if (key == "headers")
                hs = &v;
            return true;
        }))
        return fail("response context has a key that is not a string: " + A::show(root));
    if (st && !status_of<A>(*st, out.status))
        return fail("response status is not an integer: " + A::show(*st));
    if (!hs || A::kind(*hs) == Kind::null)
        return {};
    if (A::kind(*hs) == Kind::list) {
        if (A::empty(*hs))
            return {};
        return fail("response headers are a list, not a map of name => values");
    }
    if (A::kind(*hs) != Kind::map)
        return fail("response headers are not a map: " + A::show(*hs));
    std::string bad;
    // A name given twice (a msgpack map can; PHP's arrays and JSON objects cannot): the last one counts, in
    // the first one's place, as Boost.JSON parses {"a":1,"a":2}, so both codecs answer alike (fuzz/context).
    // Names are looked up through an index past a few headers (a 64 KiB head holds thousands).
    std::unordered_map<std::string, std::size_t> index;
    auto find = [&](std::string_view name) -> std::size_t {
        if (out.headers.size() < 16) {
            for (std::size_t i = 0; i < out.headers.size(); ++i)
                if (out.headers[i].name == name)
                    return i;
            return out.headers.size();
        }
        if (index.size() != out.headers.size()) {
            index.clear();
            for (std::size_t i = 0; i < out.headers.size(); ++i)
                index.emplace(out.headers[i].name, i);
        }
        auto it = index.find(std::string(name));
        return it == index.end() ? out.headers.size() : it->second;
    };
    bool ok = A::members(*hs, [&](std::string_view name, const V &v) {
        std::vector<std::string> values;
        if (!header_values<A>(v, values)) {
            bad = "response header " + shown(name) + " is not a string or a list of strings";
            return false;
        }
        if (name.empty())
            return true;
        const std::size_t at = find(name);
        if (at < out.headers.size()) {
            if (values.empty()) { // null or [] last: nothing to send under this name
                out.headers.erase(out.headers.begin() + static_cast<std::ptrdiff_t>(at));
                index.clear();
            } else {
                out.headers[at].values = std::move(values);
            }
            return true;
        }
        // A header with no values (null or an empty list) has nothing to send.
        if (!values.empty()) {
            out.headers.push_back(HeaderField{std::string(name), std::move(values)});
            if (!index.empty())
                index.emplace(out.headers.back().name, out.headers.size() - 1);
        }
        return true;
    });
    if (!ok)
        return fail(bad.empty() ? "response header name is not a string" : bad);
    return {};
}

} // namespace ferry::relay::detail
