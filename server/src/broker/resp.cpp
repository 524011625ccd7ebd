#include "broker/resp.hpp"

#include <hiredis/read.h>

#include <cstdio>
#include <cstdlib>

namespace ferry::server::detail::broker {
namespace {

// hiredis's reader builds the reply through these: straight into a Reply tree (no redisReply to convert).
// A nested value goes into the slot its parent array made for it (sized once: the slots do not move).
Reply *slot(const redisReadTask *task)
{
    if (task->parent == nullptr)
        return new Reply;
    auto *parent = static_cast<Reply *>(task->parent->obj);
    return &parent->elements[static_cast<std::size_t>(task->idx)];
}

Reply::Type type_of(int t)
{
    switch (t) {
    case REDIS_REPLY_STATUS:
        return Reply::Type::status;
    case REDIS_REPLY_ERROR:
        return Reply::Type::error;
    default:
        return Reply::Type::string;
    }
}

void *create_string(const redisReadTask *task, char *str, size_t len)
{
    Reply *r = slot(task);
    r->type = type_of(task->type);
    r->str.assign(str, len);
    return r;
}

void *create_array(const redisReadTask *task, int elements)
{
    auto *limits = static_cast<ReplyReader::Limits *>(task->privdata);
    if (limits != nullptr && static_cast<std::size_t>(elements) > limits->max_elements) {
        limits->too_many = true;
        return nullptr; // hiredis: "Out of memory"; error() says what it was
    }
    Reply *r = slot(task);
    r->type = Reply::Type::array;
    r->elements.resize(static_cast<std::size_t>(elements));
    return r;
}

void *create_integer(const redisReadTask *task, long long value)
{
    Reply *r = slot(task);
    r->type = Reply::Type::integer;
    r->integer = value;
    return r;
}

void *create_nil(const redisReadTask *task)
{
    Reply *r = slot(task);
    r->type = Reply::Type::nil;
    return r;
}

void free_object(void *obj)
{
    delete static_cast<Reply *>(obj); // hiredis frees the root only
}

redisReplyObjectFunctions functions = {create_string, create_array, create_integer, create_nil, free_object};

// RESP's array of bulk strings ("*2\r\n$4\r\nPING\r\n..."), appended in place: no allocation but the
// buffer's own growth (hiredis's redisFormatCommandArgv would make and free a buffer per command, and argv
// arrays besides).
void append_args(std::string &out, const std::string_view *args, std::size_t n)
{
    char head[24];
    out.append(head, static_cast<std::size_t>(std::snprintf(head, sizeof head, "*%zu\r\n", n)));
    for (std::size_t i = 0; i < n; ++i) {
        out.append(head,
                   static_cast<std::size_t>(std::snprintf(head, sizeof head, "$%zu\r\n", args[i].size())));
        out.append(args[i]).append("\r\n");
    }
}

} // namespace

std::string Reply::describe() const
{
    auto bounded = [](const std::string &s) {
        std::string out;
        for (unsigned char c : s.substr(0, 80))
            out += c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?';
        return s.size() > 80 ? out + "..." : out;
    };
    switch (type) {
    case Type::string:
        return "$" + std::to_string(str.size()) + " " + bounded(str);
    case Type::status:
        return "+" + bounded(str);
    case Type::error:
        return "-" + bounded(str);
    case Type::integer:
        return ":" + std::to_string(integer);
    case Type::array:
        return "*" + std::to_string(elements.size());
    case Type::nil:
        break;
    }
    return "(nil)";
}

void append_command(std::string &out, std::initializer_list<std::string_view> args)
{
    append_args(out, args.begin(), args.size());
}

void append_command(std::string &out, const std::vector<std::string_view> &args)
{
    append_args(out, args.data(), args.size());
}

ReplyReader::ReplyReader(std::size_t max_elements, std::size_t max_buffered)
    : reader_(redisReaderCreateWithFunctions(&functions)), max_buffered_(max_buffered), limits_{max_elements}
{
    if (reader_ == nullptr)
        throw std::bad_alloc();
    reader_->privdata = &limits_;
}

ReplyReader::~ReplyReader()
{
    redisReaderFree(reader_);
}

bool ReplyReader::feed(const char *data, std::size_t n)
{
    if (!error_.empty())
        return false;
    if (reader_->len - reader_->pos + n > max_buffered_) {
        error_ = "a reply of more than " + std::to_string(max_buffered_ >> 20) + " MiB";
        return false;
    }
    if (redisReaderFeed(reader_, data, n) != REDIS_OK) {
        error_ = reader_->errstr;
        return false;
    }
    return true;
}

ReplyReader::Got ReplyReader::next(Reply &out)
{
    if (!error_.empty())
        return Got::error;
    void *obj = nullptr;
    if (redisReaderGetReply(reader_, &obj) != REDIS_OK) {
        error_ = limits_.too_many ? "an array of more than " + std::to_string(limits_.max_elements) + " items"
                                  : std::string(reader_->errstr);
        return Got::error;
    }
    if (obj == nullptr)
        return Got::more;
    std::unique_ptr<Reply> r(static_cast<Reply *>(obj));
    out = std::move(*r);
    return Got::reply;
}

} // namespace ferry::server::detail::broker
