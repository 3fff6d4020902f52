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

std::string btrace_pt_xml(const BtracePtCpu& cpu, std::span<const uint8_t> raw) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "<!DOCTYPE btrace SYSTEM \"btrace.dtd\">\n<btrace version=\"1.0\">\n<pt>\n<pt-config>\n";
  if (cpu.vendor == "GenuineIntel")
    out += "<cpu vendor=\"GenuineIntel\" family=\"" + std::to_string(cpu.family) + "\" model=\"" +
           std::to_string(cpu.model) + "\" stepping=\"" + std::to_string(cpu.stepping) + "\"/>\n";
  out += "</pt-config>\n";
  if (!raw.empty()) {
    out.reserve(out.size() + raw.size() * 2 + 32);
    out += "<raw>\n";  // GDB trims the text; no whitespace may come inside it
    for (uint8_t b : raw) {
      out += kHex[b >> 4];
      out += kHex[b & 0xf];
    }
    out += "</raw>\n";
  }
  out += "</pt>\n</btrace>\n";
  return out;
}

std::string btrace_conf_xml(std::optional<uint64_t> bts_size, std::optional<uint64_t> pt_size,
                            BtracePtOptions pt_options) {
  auto yes_no = [](bool on) { return on ? "\"yes\"" : "\"no\""; };
  std::string out = "<!DOCTYPE btrace-conf SYSTEM \"btrace-conf.dtd\">\n<btrace-conf version=\"1.0\">\n";
  if (bts_size) out += "<bts size=\"0x" + hex_u64(*bts_size) + "\"/>\n";
  if (pt_size)
    out += "<pt size=\"0x" + hex_u64(*pt_size) + "\" ptwrite=" + yes_no(pt_options.ptwrite) +
           " event-tracing=" + yes_no(pt_options.event_tracing) + "/>\n";
  out += "</btrace-conf>\n";
  return out;
}

}  // namespace protocol
