// TLS on its own (tls/tls_context.hpp, transport/stream.hpp's TLS mode, handlers/redirect.hpp): a context
// from files (errors naming the key, the handshake cap), a Stream doing a handshake with an OpenSSL client
// over a socketpair, then reads that leave bytes inside the TLS object (buffered()), writes gathered from
// many small buffers and a large one, and the 308 redirect's URL.
#include "handlers/redirect.hpp"
#include "tls/ticket_keys.hpp"
#include "tls/tls_context.hpp"
#include "transport/stream.hpp"

#include <gtest/gtest.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <string>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

using namespace ferry::server::detail;

namespace {

[[maybe_unused]] const auto sigpipe = std::signal(SIGPIPE, SIG_IGN);

// A self-signed P-256 certificate and its key as PEM files in a temp directory (and a second key).
struct Files {
    std::string dir, cert, key, other_key;
    Files()
    {
        char tmpl[] = "/tmp/ferry-tls-unit-XXXXXX";
        dir = ::mkdtemp(tmpl);
        cert = dir + "/c.crt", key = dir + "/c.key", other_key = dir + "/o.key";
        EVP_PKEY *pkey = EVP_EC_gen("P-256");
        EVP_PKEY *other = EVP_EC_gen("P-256");
        X509 *x = X509_new();
        ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
        X509_gmtime_adj(X509_getm_notBefore(x), 0);
        X509_gmtime_adj(X509_getm_notAfter(x), 3600);
        X509_set_pubkey(x, pkey);
        X509_NAME *name = X509_get_subject_name(x);
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char *>("unit"),
                                   -1, -1, 0);
        X509_set_issuer_name(x, name);
        X509_sign(x, pkey, EVP_sha256());
        write(cert, [&](FILE *f) { PEM_write_X509(f, x); });
        write(key, [&](FILE *f) { PEM_write_PrivateKey(f, pkey, nullptr, nullptr, 0, nullptr, nullptr); });
        write(other_key,
              [&](FILE *f) { PEM_write_PrivateKey(f, other, nullptr, nullptr, 0, nullptr, nullptr); });
        X509_free(x);
        EVP_PKEY_free(pkey);
        EVP_PKEY_free(other);
    }
    ~Files() { std::system(("rm -rf " + dir).c_str()); }
    template <typename F> static void write(const std::string &path, F f)
    {
        FILE *file = std::fopen(path.c_str(), "w");
        f(file);
        std::fclose(file);
    }
    ferry::conf::SslConfig config() const
    {
        ferry::conf::SslConfig c;
        c.enabled = true;
        c.cert = cert;
        c.key = key;
        c.max_handshakes = 2;
        return c;
    }
};

// A Stream (the server) and an OpenSSL client over a socketpair, both non-blocking, handshake done.
struct Pair {
    Files files;
    ferry::asio::io_context io;
    std::unique_ptr<TlsContext> ctx;
    int fds[2] = {-1, -1};
    std::unique_ptr<Stream> server;
    SSL_CTX *client_ctx = SSL_CTX_new(TLS_client_method());
    SSL *client = nullptr;

    Pair()
    {
        auto made = TlsContext::create(files.config());
        EXPECT_TRUE(made) << made.error().message;
        ctx = std::move(*made);
        ::socketpair(AF_UNIX, SOCK_STREAM, 0, fds);
        StreamSocket s(io);
        s.assign(tcp::v4(), fds[0]);
        server = std::make_unique<Stream>(std::move(s));
        EXPECT_TRUE(server->start_tls(ctx->new_ssl()));
        client = SSL_new(client_ctx);
        SSL_set_fd(client, fds[1]);
        SSL_set_connect_state(client);
        ::fcntl(fds[1], F_SETFL, O_NONBLOCK);
        bool server_done = false, client_done = false;
        for (int i = 0; i < 1000 && !(server_done && client_done); ++i) {
            if (!client_done)
                client_done = SSL_do_handshake(client) == 1;
            if (!server_done) {
                Io r = server->handshake();
                EXPECT_TRUE(r.status == Io::done || r.blocked()) << r.error;
                server_done = r.status == Io::done;
            }
        }
        EXPECT_TRUE(server_done && client_done);
    }
    ~Pair()
    {
        SSL_free(client);
        SSL_CTX_free(client_ctx);
        ::close(fds[1]);
    }
    // What the client can read now.
    std::string client_read()
    {
        std::string got;
        char buf[65536];
        std::size_t n = 0;
        while (SSL_read_ex(client, buf, sizeof buf, &n) == 1)
            got.append(buf, n);
        return got;
    }
};

} // namespace

TEST(Tls, ContextErrorsNameTheKeyAndTheFile)
{
    Files f;
    auto c = f.config();
    c.cert = f.dir + "/missing.crt";
    auto r = TlsContext::create(c);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("http.ssl.cert: cannot use " + c.cert), std::string::npos)
        << r.error().message;
    c = f.config();
    c.key = f.other_key;
    r = TlsContext::create(c);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("is not the key of"), std::string::npos) << r.error().message;
    c = f.config();
    c.client_auth = ferry::conf::ClientAuth::verify_if_given;
    r = TlsContext::create(c);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("http.ssl.root_ca: required"), std::string::npos) << r.error().message;
}

TEST(Tls, HandshakesInProgressAreCapped)
{
    Files f;
    auto r = TlsContext::create(f.config()); // max_handshakes: 2
    ASSERT_TRUE(r);
    TlsContext &t = **r;
    EXPECT_TRUE(t.begin_handshake());
    EXPECT_TRUE(t.begin_handshake());
    EXPECT_FALSE(t.begin_handshake());
    EXPECT_EQ(t.refused.load(), 1u);
    t.end_handshake();
    EXPECT_TRUE(t.begin_handshake());
}

TEST(Tls, AReadSmallerThanARecordLeavesTheRestBufferedInTheStream)
{
    Pair p;
    const std::string sent(40000, 'r'); // three records
    std::size_t n = 0;
    ASSERT_EQ(SSL_write_ex(p.client, sent.data(), sent.size(), &n), 1);
    std::string got;
    char buf[1000];
    bool saw_buffered = false;
    for (int i = 0; i < 1000 && got.size() < sent.size(); ++i) {
        Io r = p.server->read({buf, sizeof buf});
        if (r.status == Io::done)
            got.append(buf, r.n);
        else
            ASSERT_TRUE(r.blocked());
        saw_buffered = saw_buffered || p.server->buffered();
    }
    EXPECT_EQ(got, sent);
    EXPECT_TRUE(saw_buffered) << "a record read in part waits inside the TLS object, not in the socket";
    EXPECT_FALSE(p.server->buffered());
}

TEST(Tls, WritesGatherSmallBuffersAndTakeLargeOnesARecordAtATime)
{
    Pair p;
    std::vector<std::string> parts;
    for (int i = 0; i < 40; ++i)
        parts.push_back(std::string(100 + i, static_cast<char>('a' + i % 26)));
    parts.push_back(std::string(300000, 'Z'));
    std::string expected;
    for (auto &s : parts)
        expected += s;
    std::vector<iovec> iov;
    for (auto &s : parts)
        iov.push_back({s.data(), s.size()});
    std::size_t first = 0, calls = 0;
    std::string got;
    while (first < iov.size() && calls < 100000) {
        Io r = p.server->write({iov.data() + first, iov.size() - first});
        ++calls;
        got += p.client_read();
        if (r.blocked())
            continue;
        ASSERT_EQ(r.status, Io::done);
        std::size_t done = r.n;
        while (first < iov.size() && done >= iov[first].iov_len)
            done -= iov[first++].iov_len;
        if (first < iov.size()) {
            iov[first].iov_base = static_cast<char *>(iov[first].iov_base) + done;
            iov[first].iov_len -= done;
        }
    }
    for (int i = 0; i < 100 && got.size() < expected.size(); ++i)
        got += p.client_read();
    EXPECT_EQ(got.size(), expected.size());
    EXPECT_TRUE(got == expected);
}

TEST(Tls, RedirectLocationDropsTheHostsPortAndKeepsPathAndQuery)
{
    EXPECT_EQ(RedirectHandler::location("example.com:8080", "/a/b?c=d", 443), "https://example.com/a/b?c=d");
    EXPECT_EQ(RedirectHandler::location("example.com", "/", 8443), "https://example.com:8443/");
    EXPECT_EQ(RedirectHandler::location("[::1]:8080", "/x", 8443), "https://[::1]:8443/x");
    EXPECT_EQ(RedirectHandler::location("[::1]", "/x", 443), "https://[::1]/x");
    EXPECT_EQ(RedirectHandler::location("h:1", "http://h:1/p?q", 443), "https://h/p?q");
    EXPECT_EQ(RedirectHandler::location("h", "*", 443), "https://h/");
}

TEST(Tls, TicketKeysRotateEachPeriodAndTheirPreviousKeyStillOpensATicketOnce)
{
    using namespace std::chrono_literals;
    TicketKeys ring(1h);
    const auto t0 = TicketKeys::Clock::now();
    const TicketKeys::Key a = ring.current(t0);
    TicketKeys::Key found;
    EXPECT_EQ(ring.find(a.name.data(), found, t0 + 10min), TicketKeys::Found::current);
    EXPECT_TRUE(found.aes == a.aes);
    const TicketKeys::Key b = ring.current(t0 + 61min); // rotated: a is the previous key
    EXPECT_FALSE(b.name == a.name);
    EXPECT_EQ(ring.find(a.name.data(), found, t0 + 62min), TicketKeys::Found::previous) << "renewed";
    EXPECT_EQ(ring.find(b.name.data(), found, t0 + 62min), TicketKeys::Found::current);
    EXPECT_EQ(ring.find(a.name.data(), found, t0 + 125min), TicketKeys::Found::none) << "two rotations: gone";
    const unsigned char unknown[16] = {1, 2, 3};
    EXPECT_EQ(ring.find(unknown, found, t0 + 125min), TicketKeys::Found::none);
    // A ring unused for two periods keeps no old key at all.
    TicketKeys idle(1h);
    const TicketKeys::Key c = idle.current(t0);
    idle.current(t0 + 3h);
    EXPECT_EQ(idle.find(c.name.data(), found, t0 + 3h), TicketKeys::Found::none);
}

// A head written with `more`, then a file: one record (nginx's buffering), where each would be its own.
TEST(Tls, AHeadWrittenWithMoreGoesInOneRecordWithTheFileAfterIt)
{
    Pair p;
    const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n";
    iovec v{const_cast<char *>(head.data()), head.size()};
    Io w = p.server->write({&v, 1}, true);
    ASSERT_EQ(w.status, Io::done);
    EXPECT_EQ(w.n, head.size());
    EXPECT_EQ(p.client_read(), "") << "held, not sent";
    char path[] = "/tmp/ferry-tls-file-XXXXXX";
    const int fd = ::mkstemp(path);
    ::unlink(path);
    const std::string body(1000, 'b');
    ASSERT_EQ(::write(fd, body.data(), body.size()), static_cast<ssize_t>(body.size()));
    off_t offset = 0;
    Io s = p.server->send_file(fd, offset, body.size());
    ::close(fd);
    ASSERT_EQ(s.status, Io::done);
    EXPECT_EQ(s.n, body.size()) << "the file's bytes, not the held head's";
    EXPECT_EQ(offset, static_cast<off_t>(body.size()));
    char buf[65536];
    std::size_t n = 0;
    ASSERT_EQ(SSL_read_ex(p.client, buf, sizeof buf, &n), 1);
    EXPECT_EQ(std::string(buf, n), head + body) << "one SSL_read: one record";
}
