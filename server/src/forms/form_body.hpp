// The body sink of a urlencoded form (internal to server/): the text is kept in memory, at most
// `max_size` bytes per request and within the shared budget for bodies in memory, and parsed once complete.
#pragma once

#include "ferry/base/budget.hpp"
#include "ferry/server/http_parser.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace ferry::server::detail {

// Makes `reserved` cover `bytes` of form text in memory (a multipart form's fields, a urlencoded form):
// 413 past the connection's share of http.limits.max_body_memory, 503 when the budget is spent
// (Budget::take_request). Never waits and never grows the process past the budget.
HttpResult<void> reserve_form_memory(Reservation &reserved, Budget &budget, std::uint64_t bytes);

// The capacity to give a string that must hold `need` bytes now (at most `max` in all): doubling, so that a
// form that trickles in is not copied at every read, within what the reservation then covers.
std::uint64_t next_capacity(std::uint64_t capacity, std::uint64_t need, std::uint64_t max);

class FormBody final : public BodySink {
public:
    FormBody(Budget &budget, std::uint64_t max_size) : budget_(budget), max_size_(max_size) {}

    void begin(std::uint64_t expected) override;
    // 413 beyond http.limits.max_form_size (at the first bytes when Content-Length says so) or beyond the
    // connection's share of http.limits.max_body_memory; 503 when the budget is spent. The reservation
    // covers the text's capacity: the memory really held.
    HttpResult<void> write(std::string_view bytes) override;

    std::string_view text() const { return text_; }
    // Frees the text once parsed; its reservation stays for the parsed tree until clear().
    void drop_text();
    void clear(); // gives the memory back

private:
    Budget &budget_;
    std::uint64_t max_size_;
    std::uint64_t expected_ = 0;
    std::string text_;
    Reservation reserved_;
};

} // namespace ferry::server::detail
