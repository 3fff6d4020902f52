#include "protocol/btrace_xml.h"

#include "protocol/hex.h"

namespace protocol {

std::string btrace_xml(const std::vector<BtraceBlockSpec>& newest_first) {
  std::string out = "<!DOCTYPE btrace SYSTEM \"btrace.dtd\">\n<btrace version=\"1.0\">\n";
  out.reserve(out.size() + newest_first.size() * 56 + 16);
  for (const BtraceBlockSpec& b : newest_first)
    out += "<block begin=\"0x" + hex_u64(b.begin) + "\" end=\"0x" + hex_u64(b.end) + "\"/>\n";
  out += "</btrace>\n";
  return out;
}

std::string btrace_conf_xml(std::optional<uint64_t> bts_size, std::optional<uint64_t> pt_size) {
  std::string out = "<!DOCTYPE btrace-conf SYSTEM \"btrace-conf.dtd\">\n<btrace-conf version=\"1.0\">\n";
  if (bts_size) out += "<bts size=\"0x" + hex_u64(*bts_size) + "\"/>\n";
  if (pt_size) out += "<pt size=\"0x" + hex_u64(*pt_size) + "\"/>\n";
  out += "</btrace-conf>\n";
  return out;
}

}  // namespace protocol
