// HTTP request/response contexts (docs/protocol.md §3) in the JSON and msgpack codecs.
#pragma once

#include "ferry/base/result.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ferry::relay {

enum class Codec : std::uint8_t { json, msgpack };

class FormTree;

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
    const FormTree *uploads = nullptr; // a multipart form's files (null: none)
    // PSR-7 request attributes, strings only (WebSocket events carry theirs here: docs/protocol.md §9).
    std::vector<std::pair<std::string, std::string>> attributes;
};

// Appends the encoded context to `out`.
void encode_request(const RequestContext &ctx, Codec codec, std::string &out);

struct ResponseContext {
    int status = 200;
    std::vector<HeaderField> headers; // order as received; each value is its own header line
};

// Decodes a response context. Empty input = 200, no headers. An error says what is malformed (not
// JSON/msgpack, not a map, status not an integer, headers not a map of string lists...). A status outside
// 100..599 decodes fine; the server maps it to 500.
Result<void> decode_response(std::string_view in, Codec codec, ResponseContext &out);

} // namespace ferry::relay
