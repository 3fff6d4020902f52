// Small XML documents served through qXfer: threads and libraries-svr4.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace protocol {

// Escapes & < > " ' for use inside an attribute value or text.
std::string xml_escape(std::string_view text);

struct ThreadEntry {
  int pid = 0, tid = 0;
  int core = -1;     // -1: unknown, attribute omitted
  std::string name;  // empty: attribute omitted
};
// qXfer:threads:read document.
std::string threads_xml(const std::vector<ThreadEntry>& threads, bool multiprocess);

struct LibraryEntry {
  std::string name;
  uint64_t lm = 0, l_addr = 0, l_ld = 0;
  uint64_t lmid = 0;  // the r_debug of its link-map namespace
};
// qXfer:libraries-svr4:read document. main_lm only when given (LLDB must not get it).
std::string libraries_svr4_xml(const std::vector<LibraryEntry>& libraries, std::optional<uint64_t> main_lm);

// qXfer:osdata:read document (GDB's `info os`): one <item> per row, its columns in order.
using OsdataColumns = std::vector<std::pair<std::string, std::string>>;  // (name, value)
std::string osdata_xml(std::string_view type, const std::vector<OsdataColumns>& items);

}  // namespace protocol
