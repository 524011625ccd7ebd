// A .env file (`ferry serve --dotenv FILE`, or $DOTENV_PATH, as RoadRunner's `rr serve --dotenv`): the
// variables it sets are put in the process environment before the config is read (so ${VAR} in it sees them)
// and are inherited by the workers. The syntax is the common one (godotenv, Symfony's Dotenv, Laravel's):
//     # a comment
//     KEY=value              trailing blanks and " # comment" dropped
//     export KEY=value       "export " ignored
//     KEY="a\nb \"q\""       double quotes: \n \t \r \" \\ \$ escapes, may span lines
//     KEY='literal $X'       single quotes: as written
//     KEY=                   empty
// No ${VAR} expansion inside the file. A variable already in the environment wins, as godotenv.Load does.
#pragma once

#include "ferry/base/result.hpp"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ferry::conf {

using DotenvVars = std::vector<std::pair<std::string, std::string>>;

// The variables of `text`, in file order; the error names `name`, the line and what is wrong with it.
Result<DotenvVars> parse_dotenv(std::string_view text, const std::string &name);

// Reads `path` (a regular file of at most 1 MiB) and sets what it defines that the environment does not have
// yet (setenv; call it before any thread starts). Returns the names it set.
Result<std::vector<std::string>> load_dotenv(const std::string &path);

} // namespace ferry::conf
