// Session ticket keys: a ring of two (current, previous) rotated every period; OpenSSL's ticket callback
// (AES-256-CBC and HMAC-SHA256, as OpenSSL's own default tickets) reads it.
#include "tls/ticket_keys.hpp"

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>

#include <cstring>
#include <stdexcept>

namespace ferry::server::detail {
namespace {

int ring_index()
{
    static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
    return index;
}

int init_hmac(EVP_MAC_CTX *hctx, const TicketKeys::Key &k)
{
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, const_cast<char *>("SHA256"), 0),
        OSSL_PARAM_construct_end()};
    return EVP_MAC_init(hctx, k.hmac.data(), k.hmac.size(), params);
}

// OpenSSL's ticket callback: enc = 1 makes a ticket (name, iv, the cipher and the MAC keyed), enc = 0 opens
// one (1: go on, 2: go on and renew it, 0: unknown key, a full handshake; -1: an error).
int ticket_callback(SSL *ssl, unsigned char name[16], unsigned char *iv, EVP_CIPHER_CTX *cctx,
                    EVP_MAC_CTX *hctx, int enc)
{
    auto *ring = static_cast<TicketKeys *>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), ring_index()));
    if (ring == nullptr)
        return -1;
    TicketKeys::Key k;
    if (enc == 1) {
        k = ring->current(TicketKeys::Clock::now());
        const int iv_len = EVP_CIPHER_get_iv_length(EVP_aes_256_cbc());
        if (RAND_bytes(iv, iv_len) != 1)
            return -1;
        std::memcpy(name, k.name.data(), k.name.size());
        if (EVP_EncryptInit_ex(cctx, EVP_aes_256_cbc(), nullptr, k.aes.data(), iv) != 1 ||
            init_hmac(hctx, k) != 1)
            return -1;
        return 1;
    }
    const TicketKeys::Found found = ring->find(name, k, TicketKeys::Clock::now());
    if (found == TicketKeys::Found::none)
        return 0;
    if (EVP_DecryptInit_ex(cctx, EVP_aes_256_cbc(), nullptr, k.aes.data(), iv) != 1 ||
        init_hmac(hctx, k) != 1)
        return -1;
    return found == TicketKeys::Found::current ? 1 : 2;
}

} // namespace

TicketKeys::TicketKeys(Clock::duration period) : period_(period), current_(random_key()), made_(Clock::now())
{
}

TicketKeys::Key TicketKeys::random_key()
{
    Key k;
    if (RAND_bytes(k.name.data(), static_cast<int>(k.name.size())) != 1 ||
        RAND_bytes(k.aes.data(), static_cast<int>(k.aes.size())) != 1 ||
        RAND_bytes(k.hmac.data(), static_cast<int>(k.hmac.size())) != 1)
        throw std::runtime_error(
            "RAND_bytes failed: no random ticket key"); // the system has no entropy: a bug
    return k;
}

void TicketKeys::use_in(SSL_CTX *ctx)
{
    SSL_CTX_set_ex_data(ctx, ring_index(), this);
    SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, ticket_callback);
}

void TicketKeys::rotate_locked(Clock::time_point now)
{
    if (now - made_ < period_)
        return;
    previous_ = current_;
    has_previous_ = now - made_ < 2 * period_; // a ring unused for two periods keeps no old key
    current_ = random_key();
    made_ = now;
}

TicketKeys::Key TicketKeys::current(Clock::time_point now)
{
    std::lock_guard lock(mutex_);
    rotate_locked(now);
    return current_;
}

TicketKeys::Found TicketKeys::find(const unsigned char *name, Key &out, Clock::time_point now)
{
    std::lock_guard lock(mutex_);
    rotate_locked(now);
    if (std::memcmp(name, current_.name.data(), current_.name.size()) == 0) {
        out = current_;
        return Found::current;
    }
    if (has_previous_ && std::memcmp(name, previous_.name.data(), previous_.name.size()) == 0) {
        out = previous_;
        return Found::previous;
    }
    return Found::none;
}

} // namespace ferry::server::detail
