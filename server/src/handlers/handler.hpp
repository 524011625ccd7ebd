// The handler seam (internal to server/; docs/architecture.md, "Handlers"): the HTTP session parses a
// request head, asks the Router which handler serves it, lets that handler choose where the body goes, then
// hands it the whole exchange. PHP is one handler; static files, WebSockets, server-sent events and status
// pages plug in beside it without touching the session.
#pragma once

#include "ferry/base/io.hpp"
#include "ferry/server/http_parser.hpp"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::server::detail {

class Wire;

// What the connection does once a handler is done with a request.
enum class After {
    keep_alive, // read the next request
    close,      // send what is in `out`, then close
    ended,      // the handler ran the connection to its end (a protocol switch): just close
};

struct Exchange {
    const Request &request;
    Wire &transport;    // the connection (HTTP/1.1) or the stream (HTTP/2) the answer goes to
    HttpParser *parser; // take_buffered(): bytes the client sent after this request (HTTP/2: none)
    std::string &out;   // response bytes not yet written: answers to pipelined requests batch here
    bool may_batch;     // more requests are buffered, so a small answer may wait in `out`
    bool keep_alive;    // the client allows another request and the server is not draining
    // What the handler answered, for the access log and /metrics: the final status (0: none was sent, the
    // client left first) and the PHP worker that served it (0: none).
    int status = 0;
    int worker_pid = 0;
};

class Handler {
public:
    // A handler's state on one client connection, created at the first request it serves there and kept
    // until the connection closes (buffers reused from one request to the next).
    class Connection {
    public:
        virtual ~Connection() = default;
        // Where this request's body goes; nullptr keeps it in Request::body. Called at the head.
        virtual BodySink *body_sink(const Request &) { return nullptr; }
        virtual awaitable<After> handle(Exchange &ex) = 0;
        // The connection waits for its next request: give back what a large request made this hold.
        // `large_head`: the last request's head was large (whatever was copied from it may be).
        virtual void release_idle_memory(bool large_head) { (void)large_head; }
    };

    virtual ~Handler() = default;
    virtual std::string_view name() const = 0;
    // Whether this handler serves the request, from its head (the body has not been read).
    virtual bool accepts(const Request &req) const = 0;
    virtual std::unique_ptr<Connection> connect() = 0;
};

// Handlers in order of precedence: the first that accepts a request serves it.
class Router {
public:
    void add(Handler &h) { handlers_.push_back(&h); }
    // The index of the handler for `req`, or -1 when none accepts it.
    int select(const Request &req) const
    {
        for (std::size_t i = 0; i < handlers_.size(); ++i)
            if (handlers_[i]->accepts(req))
                return static_cast<int>(i);
        return -1;
    }
    Handler &at(int i) const { return *handlers_[static_cast<std::size_t>(i)]; }
    std::size_t size() const { return handlers_.size(); }

private:
    std::vector<Handler *> handlers_;
};

} // namespace ferry::server::detail
