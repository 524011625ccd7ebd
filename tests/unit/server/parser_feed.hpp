// Feeding bytes to an HttpParser in pieces, for the parser's tests.
#pragma once

#include "ferry/server/http_parser.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace parser_test {

using ferry::server::HttpParser;
using ferry::server::Limits;
using ferry::server::Request;
using Event = HttpParser::Event;

// Feeds `data` in pieces of `step` bytes; collects every complete request (copied), or the error status.
struct Outcome {
    std::vector<Request> requests;
    int error = 0;
    std::string error_message;
    int heads = 0;
};

inline Outcome feed(const std::string &data, std::size_t step, Limits limits = {})
{
    HttpParser p(limits);
    Outcome o;
    std::size_t pos = 0;
    for (int guard = 0; guard < 1000000; ++guard) {
        Event ev = p.next();
        if (ev == Event::request) {
            o.requests.push_back(p.request());
            p.done();
            continue;
        }
        if (ev == Event::head) {
            ++o.heads;
            continue;
        }
        if (ev == Event::error) {
            o.error = p.error_status();
            o.error_message = p.error_message();
            return o;
        }
        if (pos >= data.size())
            return o;
        std::size_t n = std::min(step, data.size() - pos);
        auto buf = p.prepare(n);
        std::memcpy(buf.data(), data.data() + pos, n);
        p.commit(n);
        pos += n;
    }
    ADD_FAILURE() << "parser did not make progress";
    return o;
}

} // namespace parser_test
