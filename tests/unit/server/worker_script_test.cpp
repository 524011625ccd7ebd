// The worker script check made before anything starts: php's command line read far enough to find the script.
#include "worker_script.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

using ferry::server::detail::check_worker_script;
using ferry::server::detail::php_script_of;

TEST(WorkerScript, TheScriptAfterPhpsOptions)
{
    using V = std::vector<std::string>;
    EXPECT_EQ(php_script_of(V{"php", "worker.php"}), "worker.php");
    EXPECT_EQ(php_script_of(V{"/usr/bin/php8.2", "-d", "opcache.enable_cli=1", "-dmemory_limit=1G", "-n",
                              "app/w.php", "--flag"}),
              "app/w.php");
    EXPECT_EQ(php_script_of(V{"php", "-c", "php.ini", "-f", "w.php"}), "w.php");
    EXPECT_EQ(php_script_of(V{"php", "--", "w.php"}), "w.php");
    EXPECT_EQ(php_script_of(V{"php", "-r", "echo 1;"}), std::nullopt); // inline code
    EXPECT_EQ(php_script_of(V{"php", "-S", "127.0.0.1:8000"}), std::nullopt);
    EXPECT_EQ(php_script_of(V{"php", "-d", "x=1"}), std::nullopt); // stdin
    EXPECT_EQ(php_script_of(V{"php-cgi", "w.php"}), std::nullopt);
    EXPECT_EQ(php_script_of(V{"/usr/local/bin/my-worker", "w.php"}),
              std::nullopt); // not php: not ours to read
    EXPECT_EQ(php_script_of(V{}), std::nullopt);
}

TEST(WorkerScript, AMissingScriptNamesTheKeyTheFileAndTheDirectory)
{
    const std::optional<std::string> bad = check_worker_script({"php", "no-such-worker-script.php"});
    ASSERT_TRUE(bad);
    EXPECT_EQ(bad->rfind("server.command: cannot open no-such-worker-script.php (in /", 0), 0u) << *bad;
    EXPECT_NE(bad->find("): No such file or directory"), std::string::npos) << *bad;
    EXPECT_EQ(check_worker_script({"php", "/etc/hostname"}), std::nullopt); // readable: fine
    EXPECT_EQ(check_worker_script({"sh", "no-such-file"}), std::nullopt);   // not php: not checked
}
