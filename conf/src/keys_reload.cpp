// reload: the file watcher (pool/src/watcher.*) that resets the workers when code changes. Ferry's shape
// (interval as a debounce, patterns as globs, dirs, recursive, ignore, backend, poll_interval) and RoadRunner
// 2.x's beside it: `patterns` as suffixes (".php") and `services.http.{dirs, recursive, ignore, patterns}`,
// merged here into the top-level lists so that nothing downstream sees two shapes.
#include "keys.hpp"

#include <algorithm>

namespace ferry::conf::keys {

namespace {

std::optional<schema::Problem> backend(const schema::Value &value, const std::string &shown)
{
    const auto &v = std::get<std::string>(value);
    if (v == "auto" || v == "inotify" || v == "poll")
        return std::nullopt;
    return schema::Problem{shown + " is not a valid value (expected \"auto\", \"inotify\" or \"poll\")", {}};
}

std::optional<schema::Problem> non_empty_items(const schema::Value &value, const std::string &)
{
    const auto &list = std::get<std::vector<std::string>>(value);
    for (std::size_t i = 0; i < list.size(); ++i)
        if (list[i].empty() || list[i].find('\0') != std::string::npos)
            return schema::Problem{"an empty item is not valid here", i};
    return std::nullopt;
}

const schema::Table<ReloadService> &service()
{
    using namespace schema;
    static const Table<ReloadService> table{{
        list("dirs", &ReloadService::dirs, "a list of directories")
            .checked(non_empty_items)
            .described("The directories this service watches (merged into `reload.dirs`)."),
        boolean("recursive", &ReloadService::recursive)
            .described("Whether this service's directories are watched with their subdirectories."),
        list("ignore", &ReloadService::ignore, "a list of directories or globs")
            .checked(non_empty_items)
            .described("Directories or globs this service does not watch."),
        list("patterns", &ReloadService::patterns, "a list of globs or suffixes")
            .checked(non_empty_items)
            .described("The files this service watches: globs or RoadRunner suffixes such as `.php`."),
    }};
    return table;
}

const schema::Table<ReloadServices> &services()
{
    using namespace schema;
    static const Table<ReloadServices> table{
        {section("http", &ReloadServices::http, service())
             .described("RoadRunner 2.x's per-service watch lists; merged into the lists above.")}};
    return table;
}

void append_new(std::vector<std::string> &to, const std::vector<std::string> &from)
{
    for (const auto &s : from)
        if (std::find(to.begin(), to.end(), s) == to.end())
            to.push_back(s);
}

void resolve(ReloadConfig &r)
{
    if (!r.enabled)
        return; // no reload: section, nothing to fill in (and nothing dumped)
    const ReloadService &http = r.services.http;
    append_new(r.dirs, http.dirs);
    append_new(r.ignore, http.ignore);
    append_new(r.patterns, http.patterns);
    if (!http.recursive)
        r.recursive = false;
    r.services = {};
    if (r.dirs.empty())
        r.dirs.push_back(".");
    if (r.patterns.empty())
        r.patterns.push_back("**/*.php");
}

} // namespace

const schema::Table<ReloadConfig> &reload()
{
    using namespace schema;
    static const Table<ReloadConfig> table{
        {
            duration("interval", &ReloadConfig::interval)
                .described("The workers are reset this long after the last change (RoadRunner 2.x: its poll "
                           "period)."),
            list("patterns", &ReloadConfig::patterns, "a list of globs (\"**/*.php\") or suffixes (\".php\")")
                .checked(non_empty_items)
                .described("The files watched: globs (`**/*.php`) or RoadRunner 2.x suffixes (`.php`)."),
            list("dirs", &ReloadConfig::dirs, "a list of directories")
                .checked(non_empty_items)
                .described("The directories watched, relative to the working directory."),
            boolean("recursive", &ReloadConfig::recursive)
                .described("Watch the directories' subdirectories too."),
            list("ignore", &ReloadConfig::ignore, "a list of directories or globs")
                .checked(non_empty_items)
                .described("Directory names, relative paths or globs not watched (`.git` never is)."),
            string("backend", &ReloadConfig::backend, "\"auto\", \"inotify\" or \"poll\"")
                .checked(backend)
                .described("Ferry's own: `auto` (inotify, else polling), `inotify` or `poll`."),
            duration("poll_interval", &ReloadConfig::poll_interval)
                .described("Ferry's own: the polling backend's period."),
            section("services", &ReloadConfig::services, services())
                .described("RoadRunner 2.x's shape, `services.http.{dirs, recursive, ignore, patterns}`."),
        },
        {},
        resolve,
        &ReloadConfig::enabled,
    };
    return table;
}

} // namespace ferry::conf::keys
