// TLS for the front end (internal to server/; docs/tls.md): the OpenSSL context built from http.ssl, shared
// by every loop. A connection takes an SSL object from the context current when it is accepted; reload()
// builds a new context from the files again (SIGHUP, `ferry reset`), so new connections get the new
// certificate and existing ones keep theirs. It also counts the handshakes in progress
// (http.ssl.max_handshakes).
#pragma once

#include "ferry/base/result.hpp"
#include "ferry/conf/config.hpp"
#include "tls/ticket_keys.hpp"

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

using SSL = struct ssl_st;
using SSL_CTX = struct ssl_ctx_st;

namespace ferry::server::detail {

class TlsContext {
public:
    // Reads the certificate, key and CAs; an error names the key and the file ("http.ssl.cert: cannot read
    // ...").
    static Result<std::unique_ptr<TlsContext>> create(const conf::SslConfig &config);
    ~TlsContext();
    TlsContext(const TlsContext &) = delete;
    TlsContext &operator=(const TlsContext &) = delete;

    // Builds the context from the files again; on an error the current one stays (the caller logs it).
    Result<void> reload();
    // Reloads (and logs how it went, naming `why`) — SIGHUP, `ferry reset`.
    void reload_logged(std::string_view why);
    // Reloads if the certificate, key or CA file changed since the last build (loop 0's ticker, every few
    // seconds: a renewed certificate is taken without a signal).
    void reload_if_changed();
    // A new server-side SSL object from the current context (nullptr: out of memory).
    SSL *new_ssl();

    // A handshake begins: false when max_handshakes are in progress already (the caller closes).
    bool begin_handshake();
    void end_handshake() { handshakes_.fetch_sub(1, std::memory_order_relaxed); }
    const conf::SslConfig &config() const { return config_; }
    // Handshakes done; failed or timed out; refused (closed because max_handshakes were in progress).
    std::atomic<std::uint64_t> done{0}, failed{0}, refused{0};

private:
    explicit TlsContext(const conf::SslConfig &config) : config_(config) {}

    const conf::SslConfig config_;
    std::mutex mutex_;
    TicketKeys tickets_;           // every context's tickets: a reload keeps sessions resumable
    std::shared_ptr<SSL_CTX> ctx_; // current; each SSL holds a reference to its own
    std::string stamp_;            // the files' identity and times when it was built
    std::atomic<unsigned> handshakes_{0};
};

// The peer's certificate subject in RFC 2253 form ("CN=alice,O=Example"), "" if it sent none.
std::string peer_subject(SSL *ssl);
// A client certificate as PSR-7 request attributes, under mod_ssl's names (what PHP apps read behind Apache
// and nginx): SSL_CLIENT_S_DN (its subject) and SSL_CLIENT_VERIFY ("SUCCESS": verified against root_ca;
// "GENEROUS": taken unverified, client_auth_type request/require_any). Nothing without a certificate. Read
// from the certificate once per connection, at its first request.
void add_tls_attributes(SSL *ssl, std::vector<std::pair<std::string, std::string>> &attributes);
// The protocol version negotiated ("TLSv1.3").
std::string_view tls_version(SSL *ssl);
// ALPN chose HTTP/2 ("h2") in this handshake.
bool tls_selected_h2(SSL *ssl);

} // namespace ferry::server::detail
