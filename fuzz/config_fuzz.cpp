// conf::load_string over any text (YAML, ${VAR} expansion, the key tables and their value syntax); a config
// it accepts dumps to YAML that loads back to the same config (what `ferry config` promises). The
// environment is fixed (PORT=8080, EMPTY=""), never the process's.
#include "fuzz_util.hpp"

#include "ferry/conf/config.hpp"

#include <optional>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size)
{
    namespace conf = ferry::conf;
    conf::EnvLookup env = [](const std::string &name) -> std::optional<std::string> {
        if (name == "PORT")
            return "8080";
        if (name == "EMPTY")
            return "";
        return std::nullopt;
    };
    std::string yaml(reinterpret_cast<const char *>(data), size);
    auto r = conf::load_string(yaml, ".rr.yaml", {}, env);
    if (!r) {
        FUZZ_CHECK(!r.error().message.empty());
        return 0;
    }
    std::string dumped = conf::dump(r->config);
    auto back = conf::load_string(dumped, ".rr.yaml", {}, env);
    if (!back)
        std::fprintf(stderr, "the dump does not load back: %s\n---\n%s\n", back.error().message.c_str(),
                     dumped.c_str());
    FUZZ_CHECK(back);
    if (!(back->config == r->config))
        std::fprintf(stderr, "the dump loads back different:\n%s\n---\n%s\n", dumped.c_str(),
                     conf::dump(back->config).c_str());
    FUZZ_CHECK(back->config == r->config);
    return 0;
}
