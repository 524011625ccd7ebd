// The handler seam, end to end over loopback: a real HTTP session with fake handlers (no PHP, no pool).
#include "handlers/handler.hpp"
#include "http/body_stream.hpp"
#include "http/response.hpp"
#include "loop.hpp"
#include "shared_state.hpp"

#include <boost/asio/steady_timer.hpp>
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <functional>
#include <netinet/in.h>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

using namespace ferry;
using namespace ferry::server;
using namespace ferry::server::detail;

namespace {

// Answers "<name> <method> <target>" to requests whose target starts with `prefix`.
class Fixed final : public Handler {
public:
    Fixed(std::string name, std::string prefix) : name_(std::move(name)), prefix_(std::move(prefix)) {}
    std::string_view name() const override { return name_; }
    bool accepts(const Request &req) const override { return req.target.starts_with(prefix_); }
    std::unique_ptr<Connection> connect() override { return std::make_unique<Conn>(*this); }

private:
    struct Conn final : Connection {
        explicit Conn(Fixed &owner) : h(owner) {}
        awaitable<After> handle(Exchange &ex) override
        {
            std::string text = h.name_ + " " + ex.request.method + " " + ex.request.target;
            Head head;
            head.content_type = "text/plain";
            head.content_length = text.size();
            head.keep_alive = ex.keep_alive;
            append_head(ex.out, head);
            ex.out += text;
            co_return ex.keep_alive ? After::keep_alive : After::close;
        }
        Fixed &h;
    };
    std::string name_, prefix_;
};

// Takes the body with its own sink and answers what the sink saw.
class Counting final : public Handler {
public:
    std::string_view name() const override { return "counting"; }
    bool accepts(const Request &req) const override { return req.target == "/count"; }
    std::unique_ptr<Connection> connect() override { return std::make_unique<Conn>(); }

private:
    struct Sink final : BodySink {
        void begin(std::uint64_t e) override
        {
            ++begins;
            expected = e;
        }
        HttpResult<void> write(std::string_view bytes) override
        {
            ++writes;
            total += bytes.size();
            if (bytes.find('!') != std::string_view::npos)
                return HttpError{422, "no exclamation marks"};
            return {};
        }
        int begins = 0, writes = 0;
        std::uint64_t expected = 0, total = 0;
    };
    struct Conn final : Connection {
        BodySink *body_sink(const Request &req) override
        {
            sink = Sink{};
            seen_at_head = req.body.size();
            return &sink;
        }
        awaitable<After> handle(Exchange &ex) override
        {
            std::string text =
                "begins=" + std::to_string(sink.begins) + " expected=" + std::to_string(sink.expected) +
                " total=" + std::to_string(sink.total) + " kept=" + std::to_string(ex.request.body.size()) +
                " at_head=" + std::to_string(seen_at_head);
            Head head;
            head.content_type = "text/plain";
            head.content_length = text.size();
            head.keep_alive = false;
            append_head(ex.out, head);
            ex.out += text;
            co_return After::close;
        }
        Sink sink;
        std::size_t seen_at_head = 0;
    };
};

// "Upgrade: echo": switches protocols and echoes every byte until the client half-closes.
class Echo final : public Handler {
public:
    std::string_view name() const override { return "echo"; }
    bool accepts(const Request &req) const override { return req.upgrade && req.header("Upgrade") == "echo"; }
    std::unique_ptr<Connection> connect() override { return std::make_unique<Conn>(); }

private:
    struct Conn final : Connection {
        awaitable<After> handle(Exchange &ex) override
        {
            ex.out += "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n";
            ex.out += ex.parser->take_buffered(); // what the client sent right behind the request
            if (!co_await ex.transport.flush(ex.out))
                co_return After::ended;
            std::string buf(1024, '\0');
            auto &tr = static_cast<Transport &>(ex.transport); // HTTP/1.1: the connection itself
            for (;;) {
                auto [ec, n] = co_await tr.read_some(std::span(buf.data(), buf.size()));
                if (ec)
                    break;
                std::array<asio::const_buffer, 1> b{asio::buffer(buf.data(), n)};
                if (!co_await tr.write(b))
                    break;
            }
            co_return After::ended;
        }
    };
};

// A streamed response in three pieces.
class Streaming final : public Handler {
public:
    std::string_view name() const override { return "stream"; }
    bool accepts(const Request &req) const override { return req.target == "/stream"; }
    std::unique_ptr<Connection> connect() override { return std::make_unique<Conn>(); }

private:
    struct Conn final : Connection {
        awaitable<After> handle(Exchange &ex) override
        {
            BodyStream stream(ex.transport, ex.out, ex.request);
            Head head;
            head.content_type = "text/event-stream";
            head.keep_alive = ex.keep_alive;
            stream.start(head);
            for (const char *piece : {"one ", "two ", "three"})
                if (!co_await stream.write(piece, false))
                    co_return After::close;
            co_await stream.write("", true);
            co_return stream.keep_alive() ? After::keep_alive : After::close;
        }
    };
};

int connect_to(unsigned short port)
{
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
    return fd;
}

void send_all(int fd, std::string_view s)
{
    while (!s.empty()) {
        ssize_t n = ::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
        ASSERT_GT(n, 0);
        s.remove_prefix(static_cast<std::size_t>(n));
    }
}

std::string read_to_end(int fd)
{
    std::string got;
    char buf[4096];
    for (;;) {
        ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0)
            break;
        got.append(buf, static_cast<std::size_t>(n));
    }
    return got;
}

std::string read_exactly(int fd, std::size_t want)
{
    std::string got;
    char buf[4096];
    while (got.size() < want) {
        ssize_t n = ::recv(fd, buf, std::min(sizeof buf, want - got.size()), 0);
        if (n <= 0)
            break;
        got.append(buf, static_cast<std::size_t>(n));
    }
    return got;
}

std::string body_of(const std::string &response)
{
    auto p = response.find("\r\n\r\n");
    return p == std::string::npos ? "" : response.substr(p + 4);
}

// A loop serving HTTP sessions with the given handlers while `client` runs in a thread.
struct Server {
    conf::Config config;
    Budget budget{1 << 20};
    Router router;
    Loop io;
    ServerCounters counters;
    SharedState state{io, config, budget, router, counters};
    tcp::acceptor acceptor{io, tcp::endpoint(asio::ip::address_v4::loopback(), 0)};

    void run(const std::function<void(unsigned short)> &client)
    {
        auto port = acceptor.local_endpoint().port();
        asio::co_spawn(io, accept(), asio::detached);
        asio::co_spawn(io, tick(), asio::detached);
        std::thread t([&] {
            client(port);
            asio::post(io, [this] { io.stop(); });
        });
        io.run();
        t.join();
        io.destroy_handlers(); // the sessions still open, while the state they use exists
    }

    // The loop's ticker (server.cpp): connections' deadlines.
    awaitable<void> tick()
    {
        asio::steady_timer t(io);
        for (;;) {
            t.expires_after(state.connections.wheel.tick());
            if (auto [ec] = co_await t.async_wait(nothrow); ec)
                co_return;
            state.connections.expire_due(std::chrono::steady_clock::now());
        }
    }

    // Set: an admin listener's sessions (its own Site, each connection with a slot of `slots`).
    const Site *site = nullptr;
    ConnSlots slots{counters.control, ControlListener::status, 8, "test"};

    awaitable<void> accept()
    {
        for (;;) {
            auto [ec, sock] = co_await acceptor.async_accept(io, nothrow);
            if (ec)
                co_return;
            if (!site) {
                asio::co_spawn(io, http_session(state, std::move(sock)), asio::detached);
                continue;
            }
            std::shared_ptr<ConnSlots::Lease> lease = slots.admit("peer", [] {});
            asio::co_spawn(io, admin(std::move(sock), std::move(lease)), asio::detached);
        }
    }
    awaitable<void> admin(StreamSocket sock, std::shared_ptr<ConnSlots::Lease> lease)
    {
        co_await http_session(state, std::move(sock), *site, lease.get());
    }
};

} // namespace

TEST(Router, TheFirstHandlerThatAcceptsServes)
{
    Fixed a("a", "/a"), any("any", "/");
    Router r;
    EXPECT_EQ(r.select(Request{}), -1) << "no handler";
    r.add(a);
    r.add(any);
    Request req;
    req.target = "/a/x";
    EXPECT_EQ(r.select(req), 0);
    req.target = "/b";
    EXPECT_EQ(r.select(req), 1);
    req.target = "*";
    EXPECT_EQ(r.select(req), -1);
    EXPECT_EQ(r.at(1).name(), "any");
}

TEST(Session, EachPipelinedRequestReachesItsOwnHandlerInOrder)
{
    Server s;
    Fixed a("a", "/a"), b("b", "/b");
    s.router.add(a);
    s.router.add(b);
    s.run([](unsigned short port) {
        int fd = connect_to(port);
        send_all(fd, "GET /b/1 HTTP/1.1\r\nHost: h\r\n\r\n"
                     "GET /a/2 HTTP/1.1\r\nHost: h\r\n\r\n"
                     "GET /nobody HTTP/1.1\r\nHost: h\r\n\r\n"
                     "HEAD /b/3 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
        std::string got = read_to_end(fd);
        ::close(fd);
        auto p1 = got.find("b GET /b/1"), p2 = got.find("a GET /a/2"), p3 = got.find("404"),
             p4 = got.find("b HEAD /b/3");
        ASSERT_NE(p1, std::string::npos) << got;
        ASSERT_NE(p2, std::string::npos) << got;
        ASSERT_NE(p3, std::string::npos) << got;
        ASSERT_NE(p4, std::string::npos) << got;
        EXPECT_LT(p1, p2);
        EXPECT_LT(p2, p3);
        EXPECT_LT(p3, p4);
    });
}

TEST(Session, TheHandlersBodySinkGetsTheBodyAsItArrives)
{
    Server s;
    Counting c;
    s.router.add(c);
    s.run([](unsigned short port) {
        // Content-Length, the body trickling in after the head.
        int fd = connect_to(port);
        send_all(fd, "POST /count HTTP/1.1\r\nHost: h\r\nContent-Length: 3000\r\n\r\n");
        for (int i = 0; i < 3; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            send_all(fd, std::string(1000, 'x'));
        }
        std::string got = read_to_end(fd);
        ::close(fd);
        EXPECT_EQ(body_of(got), "begins=1 expected=3000 total=3000 kept=0 at_head=0") << got;
        // Chunked: no length announced.
        fd = connect_to(port);
        send_all(fd, "POST /count HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
        got = read_to_end(fd);
        ::close(fd);
        EXPECT_EQ(body_of(got), "begins=1 expected=0 total=11 kept=0 at_head=0") << got;
        // The sink refuses: its status goes to the client.
        fd = connect_to(port);
        send_all(fd, "POST /count HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhey!!");
        got = read_to_end(fd);
        ::close(fd);
        EXPECT_TRUE(got.starts_with("HTTP/1.1 422 ")) << got;
        EXPECT_NE(got.find("no exclamation marks"), std::string::npos) << got;
    });
}

TEST(Session, AHandlerTakesOverTheConnectionWithTheBytesAlreadyRead)
{
    Server s;
    Echo e;
    Fixed any("any", "/");
    s.router.add(e);
    s.router.add(any);
    s.run([](unsigned short port) {
        int fd = connect_to(port);
        // The first echoed bytes arrive in the same packet as the request: the parser has read them.
        send_all(fd, "GET /chat HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\nhello ");
        std::string head = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n";
        EXPECT_EQ(read_exactly(fd, head.size() + 6), head + "hello ");
        send_all(fd, "GET / HTTP/1.1\r\n\r\n"); // not HTTP any more: echoed as it is
        EXPECT_EQ(read_exactly(fd, 18), "GET / HTTP/1.1\r\n\r\n");
        ::shutdown(fd, SHUT_WR);
        EXPECT_EQ(read_to_end(fd), "");
        ::close(fd);
        // Without the handler's protocol, an upgrade request is a plain request, then the connection closes.
        fd = connect_to(port);
        send_all(
            fd,
            "GET /x HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: other\r\n\r\nGET /y HTTP/1.1\r\n");
        std::string got = read_to_end(fd);
        ::close(fd);
        EXPECT_NE(got.find("any GET /x"), std::string::npos) << got;
        EXPECT_NE(got.find("Connection: close"), std::string::npos) << got;
        EXPECT_EQ(got.find("/y"), std::string::npos) << got;
    });
}

TEST(Session, AStreamedResponseIsChunkedForHttp11AndClosedForHttp10)
{
    Server s;
    Streaming st;
    s.router.add(st);
    s.run([](unsigned short port) {
        int fd = connect_to(port);
        send_all(fd, "GET /stream HTTP/1.1\r\nHost: h\r\n\r\nGET /stream HTTP/1.1\r\nHost: h\r\nConnection: "
                     "close\r\n\r\n");
        std::string got = read_to_end(fd);
        ::close(fd);
        std::string chunks = "4\r\none \r\n4\r\ntwo \r\n5\r\nthree\r\n0\r\n\r\n";
        auto first = got.find(chunks);
        ASSERT_NE(first, std::string::npos) << got;
        EXPECT_NE(got.find(chunks, first + 1), std::string::npos) << "kept alive for the second: " << got;
        EXPECT_NE(got.find("Transfer-Encoding: chunked"), std::string::npos) << got;

        fd = connect_to(port);
        send_all(fd, "GET /stream HTTP/1.0\r\n\r\n");
        got = read_to_end(fd);
        ::close(fd);
        EXPECT_EQ(got.find("chunked"), std::string::npos) << got;
        EXPECT_EQ(body_of(got), "one two three") << got;
    });
}

TEST(Session, AnAdminSiteHasItsOwnFirstByteTimeoutIsNotObservedAndAnswersThroughADrain)
{
    Server s;
    Fixed a("admin", "/");
    Router admin_router;
    admin_router.add(a);
    Limits limits;
    limits.max_body_size = 0;
    const Site site{&admin_router,
                    &limits,
                    std::chrono::milliseconds(150),
                    std::chrono::milliseconds(150),
                    std::chrono::seconds(5),
                    false,
                    false};
    s.site = &site;
    s.state.observe = true;
    s.state.draining = true; // the HTTP listener's sessions would take no request now
    const auto before = s.counters.control.snapshot();
    s.run([](unsigned short port) {
        // Silent: closed after its first-byte timeout, not the HTTP idle timeout.
        int fd = connect_to(port);
        const auto t0 = std::chrono::steady_clock::now();
        EXPECT_EQ(read_to_end(fd), "");
        EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
        ::close(fd);
        // A request is answered by the admin handler, draining or not.
        fd = connect_to(port);
        send_all(fd, "GET /health HTTP/1.1\r\nHost: h\r\n\r\n");
        std::string got = read_to_end(fd);
        ::close(fd);
        EXPECT_NE(got.find("admin GET /health"), std::string::npos) << got;
    });
    const auto after = s.counters.control.snapshot();
    const auto fbt = static_cast<unsigned>(CloseReason::first_byte_timeout);
    EXPECT_EQ(after.n[static_cast<unsigned>(ControlListener::status)][fbt],
              before.n[static_cast<unsigned>(ControlListener::status)][fbt] + 1)
        << "the silent connection's slot was told";
    HttpStats::Totals totals;
    s.state.http_stats.read(totals);
    std::uint64_t answered = 0;
    for (auto n : totals.by_class)
        answered += n;
    EXPECT_EQ(answered, 0u) << "an admin request is not counted as the HTTP listener's";
}
