#include "protocol/xml.h"

#include "protocol/hex.h"
#include "protocol/thread_id.h"

namespace protocol {

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

std::string threads_xml(const std::vector<ThreadEntry>& threads, bool multiprocess) {
  std::string out = "<threads>\n";
  for (const ThreadEntry& t : threads) {
    out += "<thread id=\"" + format_thread_id(t.pid, t.tid, multiprocess) + "\"";
    // Decimal here (GDB's XML attribute), where the stop reply's `core:` is hex: a host with 10
    // or more CPUs showed "core=\"e\"", which GDB rejects, losing the whole thread list.
    if (t.core >= 0) out += " core=\"" + std::to_string(t.core) + "\"";
    if (!t.name.empty()) out += " name=\"" + xml_escape(t.name) + "\"";
    out += "/>\n";
  }
  out += "</threads>\n";
  return out;
}

std::string libraries_svr4_xml(const std::vector<LibraryEntry>& libraries, std::optional<uint64_t> main_lm) {
  std::string out = "<library-list-svr4 version=\"1.0\"";
  if (main_lm) out += " main-lm=\"0x" + hex_u64(*main_lm) + "\"";
  out += ">";
  for (const LibraryEntry& l : libraries) {
    out += "<library name=\"" + xml_escape(l.name) + "\" lm=\"0x" + hex_u64(l.lm) + "\" l_addr=\"0x" +
           hex_u64(l.l_addr) + "\" l_ld=\"0x" + hex_u64(l.l_ld) + "\" lmid=\"0x" + hex_u64(l.lmid) + "\"/>";
  }
  out += "</library-list-svr4>";
  return out;
}

std::string osdata_xml(std::string_view type, const std::vector<OsdataColumns>& items) {
  // Text from /proc (command lines, file names) may hold control bytes, which XML forbids
  // and which would make GDB reject the whole table: they become '?'.
  auto text = [](std::string_view s) {
    std::string out = xml_escape(s);
    for (char& c : out)
      if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') c = '?';
    return out;
  };
  std::string out = "<osdata type=\"" + text(type) + "\">\n";
  for (const auto& item : items) {
    out += "<item>";
    for (const auto& [name, value] : item) out += "<column name=\"" + text(name) + "\">" + text(value) + "</column>";
    out += "</item>";
  }
  out += "</osdata>\n";
  return out;
}

}  // namespace protocol
