// The pool's side of the host's process table (process_table.hpp): worker processes are started on loops[0]
// and recorded there, forked ones claimed when the template answers, and each exit the reaper sees is routed
// to the shard (or the template) that owns the process.
#include "group.hpp"

#include "ferry/base/log.hpp"

#include <csignal>

namespace ferry::pool {

// On loops[0]: every process is started from the thread that owns the signal handling. A fork from another
// loop's thread could copy Asio's process-wide signal state while loops[0] held its lock, and the child,
// before its exec, wait for that lock forever, with the launching loop waiting for the child (seen under
// ASan with two loops). Under the table's lock: the reaper, which looks a pid up after waitpid(), cannot miss
// a worker that exits at once.
Result<int> Pool::Impl::launch_on_first(const Spawner &spawner, ForkTemplate::ChildEnds ends, unsigned owner)
{
    return host->processes().start(*this, owner,
                                   [&] { return spawner.launch_on(ends.in, ends.out, ends.err); });
}

std::optional<int> Pool::Impl::claim(int pid, unsigned owner)
{
    return host->processes().claim(pid, *this, owner);
}

void Pool::Impl::exited(int pid, int status, unsigned owner)
{
    if (owner == template_owner) { // on loops[0], the template's loop
        tmpl->on_exit(pid, status);
        return;
    }
    if (owner == 0) { // the reaper's own loop
        shards[0]->on_exit(pid, status);
        return;
    }
    Shard &s = *shards[owner];
    asio::post(s.io, [sp = s.shared_from_this(), pid, status] { sp->on_exit(pid, status); });
}

void Pool::Impl::kill_all(const std::string &why)
{
    // Each shard on its own loop stops first (no replacement is started, no request waits on), then kills its
    // processes: a worker killed before its shard knew would be replaced.
    const auto kill_part = [this, why](unsigned part) {
        host->processes().for_each(*this, part, [&why](int pid) {
            log::warn("pool", "worker " + std::to_string(pid) + ": " + why + ", killing it");
            if (::kill(-pid, SIGKILL) != 0)
                ::kill(pid, SIGKILL);
        });
    };
    shards[0]->stop_now(why);
    kill_part(template_owner);
    kill_part(0);
    for (unsigned i = 1; i < shards.size(); ++i)
        asio::post(shards[i]->io, [s = shards[i], kill_part, i, why] {
            s->stop_now(why);
            kill_part(i);
        });
}

} // namespace ferry::pool
