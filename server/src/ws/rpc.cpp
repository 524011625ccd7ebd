#include "ws/rpc.hpp"

#include "ws/connection.hpp"
#include "ws/events.hpp"
#include "ws/frame.hpp"

#include <boost/json.hpp>
#include <openssl/evp.h>

namespace ferry::server::detail::ws {
namespace {

namespace json = boost::json;

Result<std::vector<std::string>> string_list(const json::object &o, const char *key)
{
    const json::value *v = o.if_contains(key);
    if (!v)
        return fail(std::string("\"") + key + "\" is missing");
    std::vector<std::string> out;
    if (v->is_string()) {
        out.emplace_back(v->get_string());
        return out;
    }
    if (!v->is_array() || v->get_array().empty())
        return fail(std::string("\"") + key + "\" must be a string or a non-empty list of strings");
    for (const auto &item : v->get_array()) {
        if (!item.is_string())
            return fail(std::string("\"") + key + "\" must be a string or a non-empty list of strings");
        out.emplace_back(item.get_string());
    }
    return out;
}

// The message of Publish / Send as a frame (and an SSE event), encoded once for every receiver.
// `ids`: where a published message's SSE event id comes from (null: a message sent to connections has none).
Result<void> message_frame(const json::object &o, Delivery &d, bool sse, Publisher *ids)
{
    bool binary = false;
    if (const json::value *b = o.if_contains("binary"); b && b->is_bool())
        binary = b->get_bool();
    std::string bytes;
    if (const json::value *m = o.if_contains("message"); m && m->is_string()) {
        bytes.assign(m->get_string().data(), m->get_string().size());
        if (!binary && !valid_utf8(bytes))
            return fail(
                "\"message\" is not valid UTF-8 (send binary data as \"base64\" with \"binary\": true)");
    } else if (const json::value *b64 = o.if_contains("base64"); b64 && b64->is_string()) {
        const auto &in = b64->get_string();
        std::string out((in.size() / 4 + 1) * 3, '\0');
        int n =
            EVP_DecodeBlock(reinterpret_cast<unsigned char *>(out.data()),
                            reinterpret_cast<const unsigned char *>(in.data()), static_cast<int>(in.size()));
        if (n < 0 || in.size() % 4 != 0)
            return fail("\"base64\" is not valid base64");
        // EVP_DecodeBlock counts the padding as data: take it off.
        std::size_t len = static_cast<std::size_t>(n);
        if (!in.empty() && in.back() == '=')
            --len;
        if (in.size() >= 2 && in[in.size() - 2] == '=')
            --len;
        out.resize(len);
        bytes = std::move(out);
        if (!binary && !valid_utf8(bytes))
            return fail("the decoded \"base64\" is not valid UTF-8 (add \"binary\": true)");
    } else {
        return fail("\"message\" (a string) or \"base64\" is missing");
    }
    d.frame = make_frame(binary ? Opcode::binary : Opcode::text, bytes);
    if (sse)
        prepare_sse(d, bytes, binary, ids);
    return {};
}

// The connections of "to", this node's in d.ids, other nodes' in d.remote.
Result<void> targets(const json::object &o, Delivery &d, std::string_view own)
{
    auto list = string_list(o, "to");
    if (!list)
        return list.error();
    for (const auto &s : *list) {
        if (parse_target(s).id == 0)
            return fail("\"" + s + "\" is not a connection id (\"<loop>.<n>\" or \"<node>.<loop>.<n>\")");
        add_target(d, s, own);
    }
    return {};
}

} // namespace

std::optional<Result<std::string>> rpc_call(Publisher &publisher, std::string_view method,
                                            std::string_view arg, bool sse)
{
    if (method != "websockets.Publish" && method != "websockets.Send" && method != "websockets.Close")
        return std::nullopt;
    error_code ec;
    json::value v = json::parse(json::string_view(arg.data(), arg.size()), ec);
    if (ec || !v.is_object())
        return fail(std::string(method) + " takes a JSON object (" +
                    (ec ? ec.message() : "got another value") + ")");
    const json::object &o = v.get_object();
    auto d = std::make_shared<Delivery>();
    if (method == "websockets.Publish") {
        auto topics = string_list(o, "topics");
        if (!topics)
            return fail(topics.error().message);
        if (auto m = message_frame(o, *d, sse, &publisher); !m)
            return fail(m.error().message);
        d->kind = Delivery::Kind::publish;
        d->topics = std::move(*topics);
    } else if (method == "websockets.Send") {
        if (auto to = targets(o, *d, publisher.node()); !to)
            return fail(to.error().message);
        if (auto m = message_frame(o, *d, sse, nullptr); !m)
            return fail(m.error().message);
        d->kind = Delivery::Kind::send;
    } else {
        if (auto to = targets(o, *d, publisher.node()); !to)
            return fail(to.error().message);
        d->kind = Delivery::Kind::close;
        if (const json::value *c = o.if_contains("code")) {
            if (!c->is_int64() || c->get_int64() < 1000 || c->get_int64() > 4999 ||
                !valid_close_code(static_cast<std::uint16_t>(c->get_int64())))
                return fail("\"code\" is not a close code a server may send");
            d->code = static_cast<std::uint16_t>(c->get_int64());
        }
        if (const json::value *r = o.if_contains("reason"); r && r->is_string())
            d->reason.assign(r->get_string().data(), r->get_string().size());
    }
    publisher.publish(std::move(d));
    return Result<std::string>(boost::system::in_place_value, std::string("true"));
}

} // namespace ferry::server::detail::ws
