// A client's byte stream (transport/stream.hpp) over a real loopback TCP connection: every attempt says
// what it did or what it waits for — bytes read and written, wait_read on nothing to read, wait_write on a
// full socket buffer, eof on the peer's FIN, failed on its reset — its waits complete when that comes, a
// file goes out with send_file (the offset moved on), a FIN goes with shutdown_send, and cancel() ends a
// wait.
#include "transport/stream.hpp"

#include "../base/tcp_pair.hpp"

#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <fcntl.h>
#include <string>
#include <sys/socket.h>
#include <unistd.h>

using namespace ferry::server::detail;
namespace asio = boost::asio;
using ferry::error_code;

namespace {

[[maybe_unused]] const auto sigpipe = std::signal(SIGPIPE, SIG_IGN);

// The server's side of a TcpPair as a Stream (it takes the descriptor); the client's stays a descriptor.
struct Conn {
    asio::io_context io;
    ferry::test::TcpPair pair;
    Stream stream{adopt(io, pair.server)};

    static StreamSocket adopt(asio::io_context &io, int &fd)
    {
        StreamSocket s(io);
        s.assign(tcp::v4(), std::exchange(fd, -1));
        return s;
    }
    bool ok() const { return pair.client >= 0 && stream.is_open(); }
    // The client resets the connection (SO_LINGER 0, then close).
    void reset_client()
    {
        linger l{1, 0};
        ::setsockopt(pair.client, SOL_SOCKET, SO_LINGER, &l, sizeof l);
        ::close(pair.client);
        pair.client = -1;
    }
    std::string drain_client()
    {
        std::string got;
        char buf[65536];
        ssize_t n;
        while ((n = ::recv(pair.client, buf, sizeof buf, MSG_DONTWAIT)) > 0)
            got.append(buf, static_cast<std::size_t>(n));
        return got;
    }
    // Runs the loop until `done` or 5 s.
    void run_until(const bool &done)
    {
        for (int i = 0; i < 500 && !done; ++i) {
            io.run_for(std::chrono::milliseconds(10));
            io.restart();
        }
    }
};

Io write_str(Stream &s, const std::string &text, bool more = false)
{
    iovec v{const_cast<char *>(text.data()), text.size()};
    return s.write(std::span<const iovec>(&v, 1), more);
}

} // namespace

TEST(Stream, ReadsWhatCameAndWaitsForReadableWhenNothingDid)
{
    Conn c;
    ASSERT_TRUE(c.ok());
    char buf[64];
    Io r = c.stream.read(buf);
    EXPECT_EQ(r.status, Io::wait_read);
    EXPECT_TRUE(r.blocked());

    bool woke = false;
    error_code got;
    c.stream.async_wait(r.status, [&](const error_code &ec) {
        woke = true;
        got = ec;
    });
    c.io.poll();
    c.io.restart();
    EXPECT_FALSE(woke) << "nothing sent yet";
    ASSERT_EQ(::send(c.pair.client, "hello", 5, 0), 5);
    c.run_until(woke);
    ASSERT_TRUE(woke);
    EXPECT_FALSE(got);
    r = c.stream.read(buf);
    ASSERT_EQ(r.status, Io::done);
    EXPECT_EQ(std::string(buf, r.n), "hello");
}

TEST(Stream, TheClientsFinIsEofAndItsResetIsFailed)
{
    Conn c;
    ASSERT_TRUE(c.ok());
    char buf[64];
    ::shutdown(c.pair.client, SHUT_WR);
    Io r;
    for (int i = 0; i < 200 && (r = c.stream.read(buf)).status == Io::wait_read; ++i)
        ::usleep(5000);
    EXPECT_EQ(r.status, Io::eof);

    Conn d;
    ASSERT_TRUE(d.ok());
    d.reset_client();
    for (int i = 0; i < 200 && (r = d.stream.read(buf)).status == Io::wait_read; ++i)
        ::usleep(5000);
    EXPECT_EQ(r.status, Io::failed);
    EXPECT_EQ(r.error, ECONNRESET);
}

TEST(Stream, AFullSocketWaitsForWritableAndGoesOnWhenTheClientReads)
{
    Conn c;
    ASSERT_TRUE(c.ok());
    int small = 4096;
    ::setsockopt(c.stream.native_handle(), SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    const std::string big(1 << 20, 'x');
    std::size_t sent = 0;
    Io r;
    while ((r = write_str(c.stream, big.substr(sent))).status == Io::done)
        sent += r.n;
    ASSERT_EQ(r.status, Io::wait_write) << "a megabyte never fits a 4 KiB send buffer";
    ASSERT_LT(sent, big.size());

    bool woke = false;
    c.stream.async_wait(r.status, [&](const error_code &) { woke = true; });
    std::string got = c.drain_client();
    c.run_until(woke);
    EXPECT_TRUE(woke) << "room came once the client read";
    while (sent < big.size()) {
        r = write_str(c.stream, big.substr(sent));
        if (r.status == Io::done)
            sent += r.n;
        got += c.drain_client();
    }
    for (int i = 0; i < 200 && got.size() < big.size(); ++i) {
        ::usleep(2000);
        got += c.drain_client();
    }
    EXPECT_EQ(got, big);
}

TEST(Stream, WritesToAResetClientFail)
{
    Conn c;
    ASSERT_TRUE(c.ok());
    c.reset_client();
    Io r;
    for (int i = 0; i < 200 && (r = write_str(c.stream, "late")).status == Io::done; ++i)
        ::usleep(5000);
    EXPECT_EQ(r.status, Io::failed);
}

TEST(Stream, SendsAFileAndMovesTheOffset)
{
    Conn c;
    ASSERT_TRUE(c.ok());
    char path[] = "/tmp/ferry-stream-XXXXXX";
    int fd = ::mkstemp(path);
    ASSERT_GE(fd, 0);
    ::unlink(path);
    const std::string body = "0123456789abcdef";
    ASSERT_EQ(::write(fd, body.data(), body.size()), static_cast<ssize_t>(body.size()));
    off_t off = 4;
    Io r = c.stream.send_file(fd, off, 8);
    ::close(fd);
    ASSERT_EQ(r.status, Io::done);
    EXPECT_EQ(r.n, 8u);
    EXPECT_EQ(off, 12);
    std::string got;
    for (int i = 0; i < 200 && got.size() < 8; ++i) {
        got += c.drain_client();
        ::usleep(1000);
    }
    EXPECT_EQ(got, "456789ab");
}

TEST(Stream, HeadWithMoreThenShutdownSendsAllAndAFin)
{
    Conn c;
    ASSERT_TRUE(c.ok());
    ASSERT_EQ(write_str(c.stream, "head;", true).status, Io::done);
    ASSERT_EQ(write_str(c.stream, "body").status, Io::done);
    ASSERT_TRUE(c.stream.shutdown_send());
    std::string got;
    char buf[64];
    for (int i = 0; i < 200; ++i) {
        ssize_t n = ::recv(c.pair.client, buf, sizeof buf, MSG_DONTWAIT);
        if (n == 0)
            break; // the FIN
        if (n > 0)
            got.append(buf, static_cast<std::size_t>(n));
        else
            ::usleep(5000);
    }
    EXPECT_EQ(got, "head;body");
    EXPECT_FALSE(c.stream.peer_left()) << "the client has not closed its side";
}

TEST(Stream, CancelEndsAWaitWithOperationAborted)
{
    Conn c;
    ASSERT_TRUE(c.ok());
    bool woke = false;
    error_code got;
    c.stream.async_wait(Io::wait_read, [&](const error_code &ec) {
        woke = true;
        got = ec;
    });
    c.stream.cancel();
    c.run_until(woke);
    ASSERT_TRUE(woke);
    EXPECT_EQ(got, asio::error::operation_aborted);
}
