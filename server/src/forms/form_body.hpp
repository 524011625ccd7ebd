// The body sink of a urlencoded form (internal to server/): the text is kept in memory, at most
// `max_size` bytes per request and within the shared budget for bodies in memory, and parsed once complete.
#pragma once

#include "ferry/pool/budget.hpp"
#include "ferry/server/http_parser.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace ferry::server::detail {

class FormBody final : public BodySink {
public:
    FormBody(pool::Budget &budget, std::uint64_t max_size) : budget_(budget), max_size_(max_size) {}

    void begin(std::uint64_t expected) override;
    // 413 beyond http.limits.max_form_size (at the first bytes when Content-Length says so); 503 when the
    // budget for bodies in memory (http.limits.max_body_memory) is spent.
    HttpResult<void> write(std::string_view bytes) override;

    std::string_view text() const { return text_; }
    void clear(); // gives the memory back

private:
    pool::Budget &budget_;
    std::uint64_t max_size_;
    std::uint64_t expected_ = 0;
    std::string text_;
    pool::Reservation reserved_;
};

} // namespace ferry::server::detail
