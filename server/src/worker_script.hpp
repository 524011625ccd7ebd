// Checked before anything starts: the PHP script of server.command, so that a missing one is one message
// naming the key, the file and the directory it was looked for in, not a worker failing to boot in a loop.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ferry::server::detail {

// For a command run by php (php, php8.2, /usr/bin/php…): the script it names (after php's options; none when
// the code comes inline, -r, or php runs as a server, -S). nullopt when there is none to check.
std::optional<std::string> php_script_of(const std::vector<std::string> &command);
// "server.command: cannot open worker.php (in /srv/app): No such file or directory" when the script cannot be
// read; nullopt when it can, or when there is none to check.
std::optional<std::string> check_worker_script(const std::vector<std::string> &command);

} // namespace ferry::server::detail
