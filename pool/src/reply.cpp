// Reply (ferry/pool/pool.hpp): what exec() gives, pulled by its caller. A reply that holds its worker reads
// on through the worker's shard (Shard::pull) and gives the worker back through it (Shard::settle) — on the
// worker's own loop, posted there when that is another loop than the caller's.
#include "shard.hpp"

#include "ferry/base/log.hpp"

#include <boost/asio/post.hpp>

#include <utility>

namespace ferry::pool {

Reply::Reply(Reply &&other) noexcept
{
    *this = std::move(other);
}

Reply &Reply::operator=(Reply &&other) noexcept
{
    if (this == &other)
        return *this;
    finish();
    outcome = other.outcome;
    message = std::move(other.message);
    response = std::move(other.response);
    worker_pid = other.worker_pid;
    // A short copy lives inside the string (SSO): the view must follow it.
    const bool in_copy = !other.body_.empty() && other.body_.data() == other.copy_.data();
    copy_ = std::move(other.copy_);
    frame_ = std::move(other.frame_);
    reservation_ = std::move(other.reservation_);
    body_ = in_copy ? std::string_view(copy_) : other.body_;
    worker_ = std::move(other.worker_);
    shard_ = std::move(other.shard_);
    foreign_ = other.foreign_;
    informational_ = other.informational_;
    more_ = other.more_;
    presented_ = other.presented_;
    final_head_ = other.final_head_;
    ended_ = other.ended_;
    ping_ = other.ping_;
    other.clear_body();
    return *this;
}

awaitable<void> Reply::next()
{
    if (!worker_ || ended_) {
        informational_ = more_ = false;
        body_ = {};
        co_return;
    }
    std::shared_ptr<Shard> shard = shard_;
    if (foreign_) {
        co_await asio::co_spawn(shard->io, shard->pull(this), use_awaitable);
    } else {
        co_await shard->pull(this);
    }
    co_return;
}

awaitable<std::string> Reply::collect()
{
    std::string all;
    // A stream is joined up to what one frame may carry (Options::max_frame_payload): a worker that streams
    // without end must not grow the server's memory without end.
    const std::size_t max = shard_ ? shard_->opt.max_frame_payload : ~std::size_t(0);
    while (outcome == Outcome::ok && informational()) {
        co_await next();
    }
    while (outcome == Outcome::ok) {
        if (body_.size() > max - all.size()) {
            outcome = Outcome::bad_response;
            message = "worker " + std::to_string(worker_pid) + " streamed more than " + std::to_string(max) +
                      " bytes (the largest frame it may send) for an answer that is read whole";
            log::error("pool", message);
            all.clear();
            break; // finish() stops the stream
        }
        all.append(body_.data(), body_.size());
        if (!more_)
            break;
        co_await next();
    }
    finish();
    co_return all;
}

void Reply::finish()
{
    if (worker_) {
        std::shared_ptr<Shard> shard = std::move(shard_);
        WorkerPtr w = std::move(worker_);
        const bool ended = ended_;
        if (foreign_)
            asio::post(shard->io, [shard, w = std::move(w), ended] { shard->settle(w, ended); });
        else
            shard->settle(w, ended);
    }
    clear_body();
}

void Reply::clear_body()
{
    body_ = {};
    copy_.clear();
    frame_ = FrameBuffer{};
    reservation_.reset();
    foreign_ = informational_ = more_ = presented_ = final_head_ = ended_ = ping_ = false;
}

void Reply::release_memory()
{
    if (copy_.capacity() > 4096 && body_.data() != copy_.data())
        std::string().swap(copy_);
}

} // namespace ferry::pool
