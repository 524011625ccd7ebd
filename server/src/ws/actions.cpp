#include "actions.hpp"

#include "ws/frame.hpp"

#include <boost/json.hpp>

#include <cstring>

namespace ferry::server::detail::ws {
namespace {

namespace json = boost::json;

Result<std::vector<std::string>> strings(const json::value &v, std::string_view what)
{
    std::vector<std::string> out;
    if (v.is_string()) {
        out.emplace_back(v.get_string());
        return out;
    }
    if (!v.is_array())
        return fail(std::string(what) + " must be a string or a list of strings");
    for (const auto &item : v.get_array()) {
        if (!item.is_string())
            return fail(std::string(what) + " must be a string or a list of strings");
        out.emplace_back(item.get_string());
    }
    return out;
}

} // namespace

Result<std::vector<Action>> parse_actions(std::string_view body)
{
    std::vector<Action> out;
    if (body.empty())
        return out;
    std::string_view doc = body, data;
    if (auto nul = body.find('\0'); nul != std::string_view::npos) {
        doc = body.substr(0, nul);
        data = body.substr(nul + 1);
    }
    boost::system::error_code ec;
    json::value v = json::parse(json::string_view(doc.data(), doc.size()), ec);
    if (ec)
        return fail("the actions are not JSON: " + ec.message());
    if (!v.is_array())
        return fail("the actions must be a JSON list");
    std::size_t used = 0;
    std::size_t index = 0;
    for (const auto &item : v.get_array()) {
        const std::string where = "action " + std::to_string(index++);
        if (!item.is_object())
            return fail(where + " is not an object");
        const auto &o = item.get_object();
        const json::value *op = o.if_contains("do");
        if (!op || !op->is_string())
            return fail(where + " has no \"do\"");
        Action a;
        std::string_view name(op->get_string().data(), op->get_string().size());
        if (name == "send")
            a.op = Op::send;
        else if (name == "publish")
            a.op = Op::publish;
        else if (name == "join")
            a.op = Op::join;
        else if (name == "leave")
            a.op = Op::leave;
        else if (name == "close")
            a.op = Op::close;
        else if (name == "data")
            a.op = Op::data;
        else
            return fail(where + ": unknown \"do\": \"" + std::string(name) + "\"");
        const char *target_key = (a.op == Op::send || a.op == Op::close) ? "to" : "topics";
        if (const json::value *t = o.if_contains(target_key)) {
            auto list = strings(*t, where + ": \"" + target_key + "\"");
            if (!list)
                return fail(list.error().message);
            a.targets = std::move(*list);
        } else if (a.op == Op::publish || a.op == Op::join || a.op == Op::leave) {
            return fail(where + " has no \"topics\"");
        } else {
            a.to_self = true;
        }
        if (a.op == Op::send || a.op == Op::publish) {
            if (const json::value *b = o.if_contains("binary"); b && b->is_bool())
                a.binary = b->get_bool();
            if (const json::value *x = o.if_contains("exclude_self"); x && x->is_bool())
                a.exclude_self = x->get_bool();
            const json::value *size = o.if_contains("size");
            const json::value *text = o.if_contains("text");
            if (size && size->is_uint64()) {
                std::uint64_t n = size->get_uint64();
                if (n > data.size() - used)
                    return fail(where + ": \"size\" " + std::to_string(n) + " goes past the end of the data");
                a.payload = data.substr(used, static_cast<std::size_t>(n));
                used += static_cast<std::size_t>(n);
            } else if (size && size->is_int64() && size->get_int64() >= 0) {
                auto n = static_cast<std::uint64_t>(size->get_int64());
                if (n > data.size() - used)
                    return fail(where + ": \"size\" " + std::to_string(n) + " goes past the end of the data");
                a.payload = data.substr(used, static_cast<std::size_t>(n));
                used += static_cast<std::size_t>(n);
            } else if (text && text->is_string()) {
                // A view into the parsed document would die with it: the text is kept in the action.
                a.value.assign(text->get_string().data(), text->get_string().size());
                a.inline_text = true;
            } else {
                return fail(where + " needs \"size\" (bytes after the NUL) or \"text\"");
            }
        }
        if (a.op == Op::close) {
            if (const json::value *c = o.if_contains("code")) {
                if (!c->is_int64() || !valid_close_code(static_cast<std::uint16_t>(c->get_int64())) ||
                    c->get_int64() < 1000 || c->get_int64() > 4999)
                    return fail(where + ": \"code\" is not a close code a server may send");
                a.code = static_cast<std::uint16_t>(c->get_int64());
            }
            if (const json::value *r = o.if_contains("reason"); r && r->is_string())
                a.reason.assign(r->get_string().data(), r->get_string().size());
        }
        if (a.op == Op::data) {
            const json::value *val = o.if_contains("value");
            if (!val || !val->is_string())
                return fail(where + " needs a string \"value\"");
            a.value.assign(val->get_string().data(), val->get_string().size());
        }
        out.push_back(std::move(a));
    }
    if (used != data.size())
        return fail(std::to_string(data.size() - used) +
                    " byte(s) of data after the NUL are not used by any action");
    for (Action &a : out) // the vector no longer moves: views into the actions' own strings stay valid
        if (a.inline_text)
            a.payload = a.value;
    return out;
}

} // namespace ferry::server::detail::ws
