// The event loops on their threads; see loop_threads.hpp.
#include "loop_threads.hpp"

#include "ferry/base/log.hpp"

#include <pthread.h>
#include <string>

namespace ferry::server::detail {

LoopThreads::LoopThreads(std::vector<Loop *> loops)
    : loops_(std::move(loops)), held_(loops_.size()), running_(loops_.size(), true), stopped_(loops_.size())
{
}

LoopThreads::~LoopThreads()
{
    for (auto &h : held_)
        h.reset();
    for (auto *l : loops_)
        l->stop();
    for (auto &t : threads_)
        if (t.joinable())
            t.join();
    if (watchdog_.joinable()) {
        {
            std::lock_guard lock(m_);
            std::fill(running_.begin(), running_.end(), false);
        }
        cv_.notify_all();
        watchdog_.join();
    }
}

void LoopThreads::start()
{
    for (unsigned i = 1; i < loops_.size(); ++i) {
        held_[i].emplace(loops_[i]->get_executor());
        threads_.emplace_back([this, i] {
            // "ferry-loop-N" in top -H, ps -L and /proc/PID/task/TID/comm.
            ::pthread_setname_np(::pthread_self(), ("ferry-loop-" + std::to_string(i)).substr(0, 15).c_str());
            loops_[i]->run();
            ended(i);
        });
    }
}

void LoopThreads::finish(std::chrono::milliseconds grace)
{
    {
        std::lock_guard lock(m_);
        if (finishing_)
            return;
        finishing_ = true;
    }
    // A guard is released on the thread that holds it: the loop's own (its last handler may be this one).
    for (unsigned i = 1; i < loops_.size(); ++i)
        asio::post(*loops_[i], [this, i] { held_[i].reset(); });
    watchdog_ = std::thread([this, grace] { watch(grace); });
}

void LoopThreads::ended(unsigned i)
{
    {
        std::lock_guard lock(m_);
        running_[i] = false;
    }
    cv_.notify_all();
}

void LoopThreads::watch(std::chrono::milliseconds grace)
{
    std::unique_lock lock(m_);
    const auto all_ended = [this] {
        for (bool r : running_)
            if (r)
                return false;
        return true;
    };
    if (cv_.wait_for(lock, grace, all_ended))
        return;
    for (unsigned i = 0; i < loops_.size(); ++i)
        if (running_[i]) {
            stopped_[i] = true;
            log::warn("core", "event loop " + std::to_string(i) + " still had work " +
                                  std::to_string(grace.count()) +
                                  " ms after the stop: stopping it (a task its owner did not end)");
            loops_[i]->stop();
        }
}

unsigned LoopThreads::run()
{
    loops_[0]->run();
    ended(0);
    for (auto &t : threads_)
        t.join();
    threads_.clear();
    if (watchdog_.joinable())
        watchdog_.join();
    unsigned stopped = 0;
    for (unsigned i = 0; i < loops_.size(); ++i)
        if (stopped_[i]) {
            ++stopped;
            loops_[i]->destroy_handlers();
        }
    return stopped;
}

} // namespace ferry::server::detail
