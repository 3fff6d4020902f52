#include "backend/btrace/perf/pt_features.h"

#include <cerrno>
#include <charconv>
#include <fstream>
#include <sstream>

namespace backend {

namespace {

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::optional<unsigned> parse_bit(std::string_view text) {
  unsigned v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v > 63) return std::nullopt;
  return v;
}

// caps/<cap> reads 1 and format/<format> names config bits: those bits.
std::optional<uint64_t> feature(const std::string& dir, const char* cap, const char* format) {
  auto has = read_text(dir + "/caps/" + cap);
  if (!has || has->empty() || (*has)[0] != '1') return std::nullopt;
  auto bits = read_text(dir + "/format/" + format);
  return bits ? pt_config_mask(*bits) : std::nullopt;
}

}  // namespace

std::optional<uint64_t> pt_config_mask(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  if (!text.starts_with("config:")) return std::nullopt;
  text.remove_prefix(7);
  auto dash = text.find('-');
  auto low = parse_bit(text.substr(0, dash));
  auto high = dash == std::string_view::npos ? low : parse_bit(text.substr(dash + 1));
  if (!low || !high || *high < *low) return std::nullopt;
  uint64_t mask = 0;
  for (unsigned b = *low; b <= *high; ++b) mask |= uint64_t{1} << b;
  return mask;
}

PtFeatures read_pt_features(const std::string& pmu_dir) {
  return PtFeatures{feature(pmu_dir, "ptwrite", "ptw"), feature(pmu_dir, "event_trace", "event")};
}

Result<PtConfig> pt_config(const PtOptions& requested, const PtFeatures& features) {
  PtConfig c;
  if (requested.ptwrite && features.ptwrite) {
    c.config |= *features.ptwrite;
    c.on.ptwrite = true;
  }
  if (requested.event_tracing) {
    if (!features.event_tracing) return Error{ENOTSUP, "Event tracing for record btrace pt is not supported."};
    c.config |= *features.event_tracing;
    c.on.event_tracing = true;
  }
  return c;
}

}  // namespace backend
