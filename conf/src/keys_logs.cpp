// logs: RoadRunner's logger plugin (roadrunner-server/logger, zap underneath). `mode` picks a preset (zap's:
// development = debug + console, production = info + json, raw = the message alone at info, off = nothing),
// `level` and `encoding` override it when set. The section's presence turns RoadRunner's defaults on (mode
// development); without it Ferry keeps its own (info, console). The output file is opened by the server at
// start (server/main.cpp), not here: loading a config has no side effect.
#include "keys.hpp"

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace ferry::conf::keys {

namespace {

constexpr std::string_view mode_expected = "\"development\", \"production\", \"raw\" or \"off\"";
constexpr std::string_view level_expected = "\"debug\", \"info\", \"warn\" or \"error\"";
constexpr std::string_view encoding_expected = "\"console\" or \"json\"";
constexpr std::string_view output_expected = "\"stderr\", \"stdout\" or a file path";

std::optional<schema::Problem> mode(const schema::Value &value, const std::string &shown)
{
    return one_of(value, shown, {"development", "production", "raw", "off", "none"}, mode_expected, false);
}

// zap's level names, and "warning" as Ferry's --log-level takes it; zap's panic levels have no Ferry
// equivalent beyond error (nothing in Ferry panics).
std::optional<schema::Problem> level(const schema::Value &value, const std::string &shown)
{
    return one_of(value, shown, {"debug", "info", "warn", "warning", "error", "dpanic", "panic", "fatal"},
                  level_expected, true);
}

std::optional<schema::Problem> encoding(const schema::Value &value, const std::string &shown)
{
    return one_of(value, shown, {"console", "json"}, encoding_expected, true);
}

std::optional<schema::Problem> output(const schema::Value &value, const std::string &shown)
{
    const auto &v = std::get<std::string>(value);
    if (v.find('\0') == std::string::npos)
        return std::nullopt;
    return schema::Problem{shown + " is not a valid value (expected " + std::string(output_expected) + ")",
                           {}};
}

void resolve(LogsConfig &logs)
{
    if (!logs.enabled) {
        // Ferry's defaults, whatever RoadRunner's mode would say: nothing in the document asked for more.
        logs.level = "info";
        logs.encoding = "console";
        return;
    }
    if (logs.mode == "none")
        logs.mode = "off";
    if (logs.level.empty())
        logs.level = logs.mode == "development" ? "debug" : "info";
    else if (logs.level == "warning")
        logs.level = "warn";
    else if (logs.level == "dpanic" || logs.level == "panic" || logs.level == "fatal")
        logs.level = "error";
    if (logs.encoding.empty())
        logs.encoding = logs.mode == "production" ? "json" : "console";
    if (logs.output.empty())
        logs.output = "stderr";
}

} // namespace

const schema::Table<LogsConfig> &logs()
{
    using namespace schema;
    static const Table<LogsConfig> table{
        {
            string("mode", &LogsConfig::mode, mode_expected)
                .checked(mode)
                .described("`development` (debug, console), `production` (info, json), `raw` (the message "
                           "alone), `off` (nothing); `none` is `off`."),
            string("level", &LogsConfig::level, level_expected)
                .checked(level)
                .described(
                    "Overrides the mode's level: `debug`, `info`, `warn` (`warning`), `error` (`panic` and "
                    "`fatal` read as `error`); `--log-level` and `FERRY_LOG_LEVEL` override it in turn."),
            string("encoding", &LogsConfig::encoding, encoding_expected)
                .checked(encoding)
                .described("Overrides the mode's encoding: `console` (one text line) or `json` (one object "
                           "per line)."),
            string("output", &LogsConfig::output, output_expected)
                .checked(output)
                .first_of_a_list()
                .described("`stderr`, `stdout` or a file path (appended to, created 0644, checked at start). "
                           "Given as a list (RoadRunner's form), the first is used; the others are warned "
                           "and ignored."),
        },
        // err_output only receives zap's own errors (a failed write), which Ferry's logger has no second
        // place for; channels (a level per plugin), file rotation, custom formats: not yet.
        {"err_output", "channels", "file_logger_options", "line_ending", "format", "time_format"},
        resolve,
        &LogsConfig::enabled,
    };
    return table;
}

} // namespace ferry::conf::keys
