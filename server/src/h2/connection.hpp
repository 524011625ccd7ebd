// One HTTP/2 connection (internal to server/; docs/http2.md): nghttp2's server session over the connection's
// Transport, a reader and a writer, and a task per stream running the same handlers HTTP/1.1 requests reach.
#pragma once

#include "control/conn_slots.hpp"
#include "ferry/base/io.hpp"
#include "ferry/base/task_group.hpp"
#include "h2/framer.hpp"
#include "handlers/handler.hpp"

#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

struct nghttp2_session;

namespace ferry::server::detail {
struct SharedState;
struct Site;
class Transport;
namespace h2 {

class H2Stream;

// Serves `tr` as HTTP/2 until it closes; `received`: bytes already read (h2c's preface).
awaitable<void> serve(SharedState &st, Transport &tr, const Site &site, ConnSlots::Lease *lease,
                      std::string_view received);

// An HTTP/1.1 request asking to go on in HTTP/2 (`Upgrade: h2c` with HTTP2-Settings, RFC 7540 §3.2) that
// can: one without a body (one with a body is answered in HTTP/1.1, as the RFC lets a server do).
bool upgrade_requested(const Request &req);
// After the 101: `req` is stream 1's request, answered over HTTP/2; `received`: the bytes after it.
awaitable<void> serve_upgraded(SharedState &st, Transport &tr, const Site &site, Request req,
                               std::string_view received);

class Connection {
public:
    Connection(SharedState &st, Transport &tr, const Site &site, ConnSlots::Lease *lease);
    ~Connection();
    Connection(const Connection &) = delete;
    Connection &operator=(const Connection &) = delete;

    awaitable<void> run(std::string_view received);
    // Stream 1 from an HTTP/1.1 upgrade (its SETTINGS from HTTP2-Settings); false: they are not valid.
    bool upgraded(Request req);

    // For its streams.
    SharedState &state() { return st_; }
    Transport &transport() { return tr_; }
    nghttp2_session *session() { return ng_; }
    void wake(); // the writer has frames to send
    // Submits a stream's head: a 1xx, or the final head with its body to come (`body`) or none.
    bool submit_head(H2Stream &s, Framer::Head &head);
    void resume(H2Stream &s); // held DATA came for a deferred stream
    void submit_trailers(H2Stream &s, const std::vector<std::pair<std::string, std::string>> &fields);
    void reset(H2Stream &s, std::uint32_t code);
    void release(H2Stream &s); // its handler (or pump) is done with it
    void track(H2Stream &s);   // a task (an event stream's pump) runs on it
    TaskGroup::Hold hold() { return tasks_.enter_anyway(); }
    void count_reset(); // a RST_STREAM came: the rapid-reset rate

    static constexpr unsigned reset_burst = 1000, reset_rate = 33;

    struct Callbacks; // nghttp2's, in connection.cpp

private:
    nghttp2_session *new_session(); // h2/callbacks.cpp: the session, its callbacks and limits
    awaitable<void> writer(TaskGroup::Hold hold);
    // What arrives next, read into the loop's scratch (SharedState::scratch): {error, bytes}.
    awaitable<std::pair<error_code, std::size_t>> read();
    awaitable<void> handle(H2Stream *s, TaskGroup::Hold hold);
    void dispatch(); // requests completed by the last read get their handlers
    void set_deadline();
    bool end_all(); // every stream closed (the connection ends); true when none is running
    H2Stream *begin_stream(std::int32_t id);
    void head_done(H2Stream &s);
    void refuse(H2Stream &s, int status, std::string_view detail);
    void forget(H2Stream &s);

    SharedState &st_;
    Transport &tr_;
    const Site &site_;
    ConnSlots::Lease *lease_;
    nghttp2_session *ng_ = nullptr;
    std::unordered_map<std::int32_t, std::unique_ptr<H2Stream>> streams_;
    std::vector<H2Stream *> ready_;
    // Handlers' per-connection state, one per stream at a time, kept for the next stream (by handler).
    std::vector<std::vector<std::unique_ptr<Handler::Connection>>> idle_handlers_;
    unsigned running_ = 0;  // handler tasks (a reset stream's still counts until its handler returns)
    unsigned refusals_ = 0; // streams refused for running_ at max_concurrent_streams, since the last answer
    std::string wbuf_;
    asio::steady_timer wake_;
    bool woken_ = false, writer_waiting_ = false;
    bool ending_ = false; // no more reads: the writer sends what is queued (a GOAWAY) and stops
    bool spoke_ = false;
    double reset_tokens_ = reset_burst;
    std::chrono::steady_clock::time_point resets_at_{};
    TaskGroup tasks_;
};

} // namespace h2
} // namespace ferry::server::detail
