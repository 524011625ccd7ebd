// Building the OpenSSL context from http.ssl: TLS 1.2 and 1.3 only, a modern cipher list, ALPN, session
// resumption, client certificates as client_auth_type says, renegotiation refused.
#include "tls/tls_context.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "ferry/base/log.hpp"
#include "ferry/server/http_grammar.hpp"

#include <cerrno>
#include <cstring>
#include <sys/stat.h>

namespace ferry::server::detail {
namespace {

// TLS 1.2's suites: forward secrecy and AEAD only (Mozilla's "intermediate" list without DHE, which needs
// parameters of its own). TLS 1.3's are OpenSSL's three, AES-128-GCM first (OpenSSL's own order puts
// AES-256 first: as strong in practice, and slower).
constexpr const char *tls12_ciphers = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
                                      "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
                                      "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
constexpr const char *tls13_suites =
    "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_256_GCM_SHA384";

// The reason of OpenSSL's last error, the queue emptied ("no such file", "key values mismatch").
std::string openssl_error()
{
    unsigned long e = ERR_peek_last_error();
    std::string why;
    if (e != 0) {
        const char *reason = ERR_reason_error_string(e);
        why = reason ? reason : "error " + std::to_string(e);
        if (ERR_GET_LIB(e) == ERR_LIB_SYS)
            why = std::strerror(ERR_GET_REASON(e));
    }
    ERR_clear_error();
    return why.empty() ? "unknown error" : why;
}

// ALPN: HTTP/1.1 when the client offers it; a client offering none we speak goes on without ALPN.
int select_alpn(SSL *, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
                unsigned inlen, void *)
{
    // h2 first: a client offering both gets HTTP/2 (our order, RFC 7301 §3.2 lets the server choose).
    static const unsigned char ours[] = {2, 'h', '2', 8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
    unsigned char *selected = nullptr;
    if (SSL_select_next_proto(&selected, outlen, ours, sizeof ours, in, inlen) != OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK;
    *out = selected;
    return SSL_TLSEXT_ERR_OK;
}

// request_client_cert and require_any_client_cert take any certificate the client sends (Go's semantics).
int accept_any(int, X509_STORE_CTX *)
{
    return 1;
}

// A context for one certificate (`cert`, `key`, named `where` in messages: "http.ssl", "http.ssl.certs[0]")
// with everything else http.ssl says.
Result<std::shared_ptr<SSL_CTX>> build(const conf::SslConfig &c, const std::string &where,
                                       const std::string &cert, const std::string &key)
{
    ERR_clear_error();
    std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
    if (!ctx)
        return fail("http.ssl: cannot create a TLS context: " + openssl_error());
    SSL_CTX *x = ctx.get();
    SSL_CTX_set_min_proto_version(x, TLS1_2_VERSION);
    // No renegotiation (a client could make us compute handshakes at will), no compression (CRIME), our
    // order of suites; a client closing without close_notify is an EOF, not an error (nginx does the same).
    SSL_CTX_set_options(x, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE |
                               SSL_OP_IGNORE_UNEXPECTED_EOF);
    // A write may be taken in part (one record at a time); the buffer of a retried write may move; an idle
    // connection gives its read and write buffers back (tens of kilobytes each).
    SSL_CTX_set_mode(x, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                            SSL_MODE_RELEASE_BUFFERS);
    if (SSL_CTX_set_cipher_list(x, tls12_ciphers) != 1 || SSL_CTX_set_ciphersuites(x, tls13_suites) != 1)
        return fail("http.ssl: cannot set the cipher list: " + openssl_error());
    if (SSL_CTX_use_certificate_chain_file(x, cert.c_str()) != 1)
        return fail(where + ".cert: cannot use " + cert + ": " + openssl_error());
    if (SSL_CTX_use_PrivateKey_file(x, key.c_str(), SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(x) != 1) {
        const std::string why = openssl_error();
        if (why == "key values mismatch")
            return fail(where + ".key: " + key + " is not the key of " + cert + " (key values mismatch)");
        return fail(where + ".key: cannot use " + key + ": " + why);
    }
    SSL_CTX_set_alpn_select_cb(x, select_alpn, nullptr);
    // Resumption: TLS 1.3 and 1.2 session tickets (TicketKeys: rotated hourly, kept across reloads) and a
    // server-side cache for TLS 1.2 clients without tickets.
    static const unsigned char sid_ctx[] = "ferry";
    SSL_CTX_set_session_id_context(x, sid_ctx, sizeof sid_ctx - 1);
    SSL_CTX_set_session_cache_mode(x, SSL_SESS_CACHE_SERVER);
    SSL_CTX_sess_set_cache_size(x, 20000);
    SSL_CTX_set_timeout(x, 3600);

    using conf::ClientAuth;
    const bool verifies =
        c.client_auth == ClientAuth::verify_if_given || c.client_auth == ClientAuth::require_and_verify;
    if (verifies && c.root_ca.empty())
        return fail("http.ssl.root_ca: required by client_auth_type " +
                    std::string(c.client_auth == ClientAuth::verify_if_given
                                    ? "verify_client_cert_if_given"
                                    : "require_and_verify_client_cert") +
                    " (the CAs client certificates are verified against)");
    if (!c.root_ca.empty()) {
        if (SSL_CTX_load_verify_locations(x, c.root_ca.c_str(), nullptr) != 1)
            return fail("http.ssl.root_ca: cannot use " + c.root_ca + ": " + openssl_error());
        if (STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(c.root_ca.c_str()))
            SSL_CTX_set_client_CA_list(x, names);
        ERR_clear_error();
    }
    switch (c.client_auth) {
    case ClientAuth::none:
        SSL_CTX_set_verify(x, SSL_VERIFY_NONE, nullptr);
        break;
    case ClientAuth::request:
        SSL_CTX_set_verify(x, SSL_VERIFY_PEER, accept_any);
        break;
    case ClientAuth::require_any:
        SSL_CTX_set_verify(x, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, accept_any);
        break;
    case ClientAuth::verify_if_given:
        SSL_CTX_set_verify(x, SSL_VERIFY_PEER, nullptr);
        break;
    case ClientAuth::require_and_verify:
        SSL_CTX_set_verify(x, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
        break;
    }
    return ctx;
}

// The identity and times of the files (device, inode, size, modification time): a renewed certificate
// moved into place (a new inode) or written over (a new time) changes it.
std::string files_stamp(const conf::SslConfig &c)
{
    std::string out;
    std::vector<const std::string *> paths{&c.cert, &c.key, &c.root_ca};
    for (const conf::SslCert &more : c.certs)
        paths.insert(paths.end(), {&more.cert, &more.key});
    for (const std::string *path : paths) {
        struct stat st {};
        if (path->empty() || ::stat(path->c_str(), &st) != 0) {
            out += "-;";
            continue;
        }
        out += std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" +
               std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
               std::to_string(st.st_mtim.tv_nsec) + ";";
    }
    return out;
}

// http.ssl.certs: the other certificates' contexts by host name, owned by the main context (freed with it,
// so a handshake in progress during a reload still finds them).
struct ByHost {
    std::vector<std::pair<std::string, std::shared_ptr<SSL_CTX>>> hosts; // as configured; "*.x": wildcards
};

void free_by_host(void *, void *ptr, CRYPTO_EX_DATA *, int, long, void *)
{
    delete static_cast<ByHost *>(ptr);
}

int by_host_index()
{
    static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, free_by_host);
    return index;
}

// "a.example.com" matches "a.example.com" and "*.example.com" (one label), case aside.
bool host_matches(std::string_view pattern, std::string_view name)
{
    if (pattern.starts_with("*.")) {
        const std::size_t dot = name.find('.');
        return dot != name.npos && dot > 0 && iequals(name.substr(dot), pattern.substr(1));
    }
    return iequals(pattern, name);
}

// SNI: the certificate for the name the client asks for, if one has it; else the main one.
int pick_certificate(SSL *ssl, int *, void *)
{
    const char *asked = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    const auto *table =
        static_cast<const ByHost *>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), by_host_index()));
    if (asked == nullptr || table == nullptr)
        return SSL_TLSEXT_ERR_OK;
    for (const auto &[pattern, ctx] : table->hosts)
        if (host_matches(pattern, asked)) {
            SSL_set_SSL_CTX(ssl, ctx.get());
            break;
        }
    return SSL_TLSEXT_ERR_OK;
}

} // namespace

Result<std::unique_ptr<TlsContext>> TlsContext::create(const conf::SslConfig &config)
{
    std::unique_ptr<TlsContext> t(new TlsContext(config));
    if (auto built = t->reload(); !built)
        return built.error();
    return t;
}

TlsContext::~TlsContext() = default;

Result<void> TlsContext::reload()
{
    std::string stamp = files_stamp(config_);
    auto ctx = build(config_, "http.ssl", config_.cert, config_.key);
    if (!ctx)
        return ctx.error();
    tickets_.use_in(ctx->get());
    if (!config_.certs.empty()) {
        auto table = std::make_unique<ByHost>();
        for (std::size_t i = 0; i < config_.certs.size(); ++i) {
            const conf::SslCert &more = config_.certs[i];
            auto other = build(config_, "http.ssl.certs[" + std::to_string(i) + "]", more.cert, more.key);
            if (!other)
                return other.error();
            tickets_.use_in(other->get());
            for (const std::string &host : more.hosts)
                table->hosts.emplace_back(host, *other);
        }
        SSL_CTX_set_ex_data(ctx->get(), by_host_index(), table.release()); // freed with the context
        SSL_CTX_set_tlsext_servername_callback(ctx->get(), pick_certificate);
    }
    std::lock_guard lock(mutex_);
    ctx_ = std::move(*ctx);
    stamp_ = std::move(stamp);
    return {};
}

void TlsContext::reload_logged(std::string_view why)
{
    if (auto reloaded = reload(); !reloaded)
        log::error("tls", std::string(why) + ": the certificate was not reloaded, the current one stays: " +
                              reloaded.error().message);
    else
        log::info("tls", std::string(why) + ": certificate reloaded from " + config_.cert +
                             " (new connections get it; open ones keep theirs)");
}

void TlsContext::reload_if_changed()
{
    std::string stamp = files_stamp(config_);
    {
        std::lock_guard lock(mutex_);
        if (stamp == stamp_)
            return;
        stamp_ = stamp; // a file changed: tried once per change (a broken file is logged once)
    }
    reload_logged("a certificate file changed");
}

SSL *TlsContext::new_ssl()
{
    std::shared_ptr<SSL_CTX> ctx;
    {
        std::lock_guard lock(mutex_);
        ctx = ctx_;
    }
    return SSL_new(ctx.get()); // takes its own reference to the context
}

bool TlsContext::begin_handshake()
{
    if (handshakes_.fetch_add(1, std::memory_order_relaxed) >= config_.max_handshakes) {
        handshakes_.fetch_sub(1, std::memory_order_relaxed);
        refused.fetch_add(1, std::memory_order_relaxed);
        return false;
    }
    return true;
}

std::string peer_subject(SSL *ssl)
{
    X509 *cert = SSL_get1_peer_certificate(ssl);
    if (cert == nullptr)
        return {};
    std::string out;
    if (BIO *bio = BIO_new(BIO_s_mem())) {
        if (X509_NAME_print_ex(bio, X509_get_subject_name(cert), 0, XN_FLAG_RFC2253) >= 0) {
            char *data = nullptr;
            long n = BIO_get_mem_data(bio, &data);
            if (n > 0)
                out.assign(data, static_cast<std::size_t>(n));
        }
        BIO_free(bio);
    }
    X509_free(cert);
    return out;
}

namespace {

// A connection's client certificate as PHP sees it, read once (the first request) and kept with its SSL.
struct PeerAttributes {
    std::string subject; // "" without a certificate
    bool verified = false;
};

void free_peer(void *, void *ptr, CRYPTO_EX_DATA *, int, long, void *)
{
    delete static_cast<PeerAttributes *>(ptr);
}

int peer_index()
{
    static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, free_peer);
    return index;
}

} // namespace

void add_tls_attributes(SSL *ssl, std::vector<std::pair<std::string, std::string>> &attributes)
{
    auto *peer = static_cast<PeerAttributes *>(SSL_get_ex_data(ssl, peer_index()));
    if (peer == nullptr) {
        peer = new PeerAttributes{peer_subject(ssl), false};
        peer->verified = SSL_get_verify_mode(ssl) != SSL_VERIFY_NONE &&
                         SSL_get_verify_callback(ssl) == nullptr && SSL_get_verify_result(ssl) == X509_V_OK;
        SSL_set_ex_data(ssl, peer_index(), peer); // freed with the SSL
    }
    if (peer->subject.empty())
        return;
    attributes.emplace_back("SSL_CLIENT_S_DN", peer->subject);
    attributes.emplace_back("SSL_CLIENT_VERIFY", peer->verified ? "SUCCESS" : "GENEROUS");
}

bool tls_selected_h2(SSL *ssl)
{
    const unsigned char *p = nullptr;
    unsigned len = 0;
    SSL_get0_alpn_selected(ssl, &p, &len);
    return len == 2 && p[0] == 'h' && p[1] == '2';
}

std::string_view tls_version(SSL *ssl)
{
    return SSL_get_version(ssl);
}

} // namespace ferry::server::detail
