// Encodes a FormTree in both codecs and checks that each output is one well-formed document of its codec
// (Boost.JSON and msgpack-cxx parse it back), for the urlencoded and multipart targets.
#pragma once

#include "fuzz_util.hpp"

#include "ferry/relay/form.hpp"

#include <boost/json.hpp>
#include <msgpack.hpp>

#include <string>

namespace fuzz {

inline void check_form_encodings(const ferry::relay::FormTree &form)
{
    std::string json;
    ferry::relay::encode_form(form, ferry::relay::Codec::json, json);
    boost::system::error_code ec;
    // A name may nest 64 brackets (PHP's max_input_nesting_level, http.limits.max_form_depth); Boost.JSON
    // refuses more than 32 levels by default (found by fuzz/urlencoded: regress-deeper-than-32).
    boost::json::parse_options deep;
    deep.max_depth = 256;
    auto v = boost::json::parse(json, ec, {}, deep);
    FUZZ_CHECK(!ec);
    FUZZ_CHECK(v.is_object() || v.is_array());
    if (form.empty())
        FUZZ_CHECK(json == "{}");

    std::string mp;
    ferry::relay::encode_form(form, ferry::relay::Codec::msgpack, mp);
    std::size_t off = 0;
    msgpack::object_handle oh = msgpack::unpack(mp.data(), mp.size(), off);
    FUZZ_CHECK(off == mp.size());
    auto t = oh.get().type;
    FUZZ_CHECK(t == msgpack::type::MAP || t == msgpack::type::ARRAY);
}

} // namespace fuzz
