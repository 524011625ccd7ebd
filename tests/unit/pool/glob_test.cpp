#include "glob.hpp"

#include <gtest/gtest.h>

using ferry::pool::detail::expand_braces;
using ferry::pool::detail::Glob;

TEST(Glob, SuffixOfRoadRunnerMeansAnyDepth)
{
    Glob g(".php");
    EXPECT_TRUE(g.match("index.php"));
    EXPECT_TRUE(g.match("src/Controller/Home.php"));
    EXPECT_FALSE(g.match("index.phpx"));
    EXPECT_FALSE(g.match("php"));
}

TEST(Glob, NameWithoutSlashMatchesAtAnyDepth)
{
    Glob g("*.{php,twig}");
    EXPECT_TRUE(g.match("a.php"));
    EXPECT_TRUE(g.match("templates/base.twig"));
    EXPECT_FALSE(g.match("templates/base.html"));
    EXPECT_TRUE(Glob("*").match(".env")); // dot files are files too
}

TEST(Glob, DoubleStarTakesAnyNumberOfSegments)
{
    Glob g("**/*.php");
    EXPECT_TRUE(g.match("a.php"));
    EXPECT_TRUE(g.match("x/y/z/a.php"));
    EXPECT_FALSE(g.match("x/y/a.txt"));
    Glob under("src/**");
    EXPECT_TRUE(under.match("src/a"));
    EXPECT_TRUE(under.match("src/a/b/c.php"));
    EXPECT_FALSE(under.match("lib/src/a"));
    Glob middle("app/**/views/*.php");
    EXPECT_TRUE(middle.match("app/views/a.php"));
    EXPECT_TRUE(middle.match("app/x/y/views/a.php"));
    EXPECT_FALSE(middle.match("app/x/views/sub/a.php"));
}

TEST(Glob, PathPatternIsAnchoredAndSegmentwise)
{
    Glob g("config/*.yaml");
    EXPECT_TRUE(g.match("config/app.yaml"));
    EXPECT_FALSE(g.match("config/sub/app.yaml")); // * stays within a segment
    EXPECT_FALSE(g.match("other/config/app.yaml"));
    EXPECT_TRUE(Glob("./config/*.yaml").match("config/app.yaml"));
    EXPECT_TRUE(Glob("src/[A-Z]*.php").match("src/Kernel.php"));
    EXPECT_FALSE(Glob("src/[A-Z]*.php").match("src/kernel.php"));
    EXPECT_TRUE(Glob("a?c.php").match("abc.php"));
}

TEST(Glob, BracesExpandNestedAndLeaveOthers)
{
    EXPECT_EQ(expand_braces("a.{php,twig}"), (std::vector<std::string>{"a.php", "a.twig"}));
    EXPECT_EQ(expand_braces("{src,lib}/{a,b{1,2}}.php"),
              (std::vector<std::string>{"src/a.php", "src/b1.php", "src/b2.php", "lib/a.php", "lib/b1.php",
                                        "lib/b2.php"}));
    EXPECT_EQ(expand_braces("{x}.php"), (std::vector<std::string>{"{x}.php"}));
    EXPECT_EQ(expand_braces("a{b"), (std::vector<std::string>{"a{b"}));
    EXPECT_TRUE(Glob("{x}.php").match("{x}.php"));
}

TEST(Glob, EmptyAndOddPaths)
{
    Glob g("**/*.php");
    EXPECT_FALSE(g.match(""));
    EXPECT_TRUE(g.match("a//b.php")); // empty segments are dropped
}
