// A request body as it arrives (internal to server/): kept in memory while it is small and the shared body
// budget has room (Budget::take_request: the connection's share, the reserve for small bodies), otherwise
// spilled to an unnamed temp file, so a client can make the server hold at most `memory_max` bytes of body
// and all clients together at most the budget. It never waits for memory.
#pragma once

#include "ferry/base/budget.hpp"
#include "ferry/pool/pool.hpp"
#include "ferry/server/http_parser.hpp"

#include <cstdint>
#include <string>

namespace ferry::server::detail {

class RequestBody final : public BodySink {
public:
    // `dir`: where temp files go (created unnamed with O_TMPFILE, or named and unlinked at once).
    RequestBody(Budget &budget, std::uint64_t memory_max, std::string dir);
    ~RequestBody() override;
    RequestBody(const RequestBody &) = delete;
    RequestBody &operator=(const RequestBody &) = delete;

    void begin(std::uint64_t expected) override;
    HttpResult<void> write(std::string_view bytes) override;

    // Forgets the body (closes the file, gives the memory back to the budget).
    void clear();
    pool::BodyRef ref() const;
    std::uint64_t size() const { return size_; }
    bool in_file() const { return fd_ >= 0; }

private:
    HttpResult<void> spill();
    HttpResult<void> append_file(std::string_view bytes);

    Budget &budget_;
    std::uint64_t memory_max_;
    std::string dir_;
    std::string mem_;
    Reservation reserved_;
    int fd_ = -1;
    std::uint64_t size_ = 0;
};

// Opens an unnamed temp file for reading and writing in `dir` (O_TMPFILE, else mkstemp + unlink): nothing is
// left on disk whatever happens to the process. -1 with errno set on failure.
int open_temp_file(const std::string &dir);

} // namespace ferry::server::detail
