// TLS session ticket keys (internal to server/; docs/tls.md, "What is served"): the keys that encrypt the
// tickets a client presents to resume a session, made at random by the server and rotated every `period`:
// a new key encrypts new tickets, the previous one still decrypts (and the ticket is renewed), older ones are
// gone, so a stolen key opens at most two periods of sessions. One ring for the server, outside any OpenSSL
// context: a certificate reload keeps the sessions resumable. Shared by every loop (a mutex: one lock per
// full handshake or resumption).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <mutex>

using SSL_CTX = struct ssl_ctx_st;

namespace ferry::server::detail {

class TicketKeys {
public:
    using Clock = std::chrono::steady_clock;
    explicit TicketKeys(Clock::duration period = std::chrono::hours(1));

    // Makes `ctx` encrypt and decrypt its tickets with this ring (which outlives it).
    void use_in(SSL_CTX *ctx);

    struct Key {
        std::array<unsigned char, 16> name{};
        std::array<unsigned char, 32> aes{}, hmac{};
    };
    // The key for a new ticket (a rotation first when the current one is `period` old at `now`).
    Key current(Clock::time_point now);
    enum class Found { none, current, previous };
    // The key named `name` at `now` (rotated first as above): the current one, the previous one (the ticket
    // is then renewed), or none (a full handshake).
    Found find(const unsigned char *name, Key &out, Clock::time_point now);

private:
    static Key random_key();
    void rotate_locked(Clock::time_point now);
    mutable std::mutex mutex_;
    Clock::duration period_;
    Key current_, previous_;
    bool has_previous_ = false;
    Clock::time_point made_;
};

} // namespace ferry::server::detail
