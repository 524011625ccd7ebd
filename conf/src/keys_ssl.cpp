// http.ssl: RoadRunner's TLS keys (address, cert, key, root_ca, client_auth_type, redirect; its `acme` is not
// supported) and Ferry's handshake limits. The section's presence turns TLS on; cert and key are then
// required. Whether the files can be read and match is checked when the server starts (server/src/tls/).
#include "ferry/base/text.hpp"
#include "keys.hpp"

#include <algorithm>

namespace ferry::conf::keys {

namespace {

constexpr std::string_view client_auth_expected =
    "\"no_client_certs\", \"request_client_cert\", \"require_any_client_cert\", "
    "\"verify_client_cert_if_given\" or \"require_and_verify_client_cert\"";

std::optional<schema::Problem> client_auth_type(const schema::Value &value, const std::string &shown)
{
    return one_of(value, shown,
                  {"no_client_certs", "request_client_cert", "require_any_client_cert",
                   "verify_client_cert_if_given", "require_and_verify_client_cert"},
                  client_auth_expected, true);
}
ClientAuth parse_client_auth(std::string_view w)
{
    if (w == "request_client_cert")
        return ClientAuth::request;
    if (w == "require_any_client_cert")
        return ClientAuth::require_any;
    if (w == "verify_client_cert_if_given")
        return ClientAuth::verify_if_given;
    if (w == "require_and_verify_client_cert")
        return ClientAuth::require_and_verify;
    return ClientAuth::none;
}
std::string_view client_auth_word(ClientAuth a)
{
    switch (a) {
    case ClientAuth::request:
        return "request_client_cert";
    case ClientAuth::require_any:
        return "require_any_client_cert";
    case ClientAuth::verify_if_given:
        return "verify_client_cert_if_given";
    case ClientAuth::require_and_verify:
        return "require_and_verify_client_cert";
    case ClientAuth::none:
        break;
    }
    return "no_client_certs";
}

// A host name as SNI sends it ("example.com"), or one label of wildcard in front ("*.example.com").
std::optional<schema::Problem> host_names(const schema::Value &value, const std::string &)
{
    const auto &hosts = std::get<std::vector<std::string>>(value);
    for (std::size_t i = 0; i < hosts.size(); ++i) {
        std::string_view h = hosts[i];
        if (h.starts_with("*."))
            h.remove_prefix(2);
        const bool ok = !h.empty() && h.find('*') == h.npos && h.front() != '.' && h.back() != '.' &&
                        std::all_of(h.begin(), h.end(), [](char c) {
                            return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                                   (c >= '0' && c <= '9') || c == '-' || c == '.';
                        });
        if (!ok)
            return schema::Problem{quote(hosts[i]) +
                                       " is not a host name (expected a name such as \"example.com\" or "
                                       "\"*.example.com\")",
                                   i};
    }
    return std::nullopt;
}

const schema::Table<SslCert> &ssl_cert()
{
    using namespace schema;
    static const Table<SslCert> table{{
        string("cert", &SslCert::cert, "the path of a PEM certificate file")
            .required_as("the certificate", "\"/etc/ssl/a.crt\"")
            .described("The certificate for these hosts, followed by its intermediates, in PEM."),
        string("key", &SslCert::key, "the path of a PEM private key file")
            .required_as("its private key", "\"/etc/ssl/a.key\"")
            .described("Its private key in PEM."),
        list("hosts", &SslCert::hosts, "a list of host names such as \"example.com\" or \"*.example.com\"", 1)
            .checked(host_names)
            .described("The names (SNI) it serves; `*.example.com` covers one label. Case does not matter."),
    }};
    return table;
}

} // namespace

const schema::Table<SslConfig> &ssl()
{
    using namespace schema;
    static const Table<SslConfig> table{
        {
            address("address", &SslConfig::address)
                .described("Where HTTPS is served (RoadRunner's default `:443`)."),
            string("cert", &SslConfig::cert, "the path of a PEM certificate file")
                .required_as("the TLS certificate", "\"/etc/ssl/server.crt\"")
                .described("The certificate, followed by its intermediates, in PEM."),
            string("key", &SslConfig::key, "the path of a PEM private key file")
                .required_as("the TLS private key", "\"/etc/ssl/server.key\"")
                .described("The certificate's private key in PEM (unencrypted)."),
            string("root_ca", &SslConfig::root_ca, "the path of a PEM file of CA certificates")
                .described("The CAs that client certificates are verified against (mTLS)."),
            choice("client_auth_type", &SslConfig::client_auth, parse_client_auth, client_auth_word,
                   client_auth_type, client_auth_expected)
                .described("Client certificates (mTLS), RoadRunner's values: `no_client_certs`, "
                           "`request_client_cert`, `require_any_client_cert`, `verify_client_cert_if_given`, "
                           "`require_and_verify_client_cert` (the last two need `root_ca`)."),
            sections("certs", &SslConfig::certs, ssl_cert(), "a list of maps {cert, key, hosts}")
                .described("Ferry's own: more certificates, each served to clients asking for one of its "
                           "`hosts` (SNI); `cert` and `key` above serve every other name."),
            boolean("redirect", &SslConfig::redirect)
                .described("Plain HTTP on `http.address` answers 308 to the same URL over HTTPS."),
            duration("handshake_timeout", &SslConfig::handshake_timeout)
                .checked(positive_duration)
                .described("Ferry's own: a TLS handshake not done by then closes the connection."),
            integer("max_handshakes", &SslConfig::max_handshakes, "a positive integer", 1)
                .described("Ferry's own: TLS handshakes in progress, all loops together; a connection past "
                           "it is closed at once (logged at debug, counted in `/metrics`)."),
        },
        {"acme"},
        nullptr,
        &SslConfig::enabled,
    };
    return table;
}

} // namespace ferry::conf::keys
