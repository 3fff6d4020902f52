#include "protocol/replies.h"

#include <fmt/format.h>

#include "protocol/fileio.h"
#include "protocol/hex.h"
#include "protocol/qsupported.h"
#include "protocol/thread_id.h"

namespace protocol {

namespace {

// One overload per reply type; std::visit picks it.
struct Encoder {
  const Dialect& d;

  std::string operator()(const reply::NoReply&) const { return {}; }
  std::string operator()(const reply::Ok&) const { return "OK"; }
  std::string operator()(const reply::Unsupported&) const { return {}; }
  std::string operator()(const reply::Error& e) const { return error_reply(d, e.err, e.text, e.form); }
  std::string operator()(const StopReply& stop) const { return format_stop_reply(stop, d); }
  std::string operator()(const ExitReply& exit) const { return format_exit_reply(exit, d); }
  std::string operator()(const ThreadExitReply& exit) const { return format_thread_exit_reply(exit, d); }
  std::string operator()(const reply::NoResumed&) const { return "N"; }
  std::string operator()(const reply::Hex& h) const { return to_hex(h.bytes); }
  std::string operator()(const reply::BinaryMemory& b) const {
    if (d.lldb) return b.bytes.empty() ? "OK" : escape_binary(b.bytes);  // lldb-server's answers
    return 'b' + escape_binary(b.bytes);  // gdbserver 16+ (server.cc, case 'x')
  }

  std::string operator()(const reply::Registers& regs) const {
    std::string out;
    for (const auto& v : regs.values) out += v.available ? to_hex(v.bytes) : std::string(v.bytes.size() * 2, 'x');
    return out;
  }

  std::string operator()(const reply::HexNumber& n) const { return hex_u64(n.value); }
  std::string operator()(const reply::Features& f) const { return format_qsupported(f.server, d); }
  std::string operator()(const reply::ResumeActions&) const { return "vCont;c;C;t;s;S;r"; }

  std::string operator()(const reply::CurrentThread& t) const {
    return "QC" + format_thread_id(t.pid, t.tid, d.multiprocess);
  }

  std::string operator()(const reply::ThreadList& list) const {
    std::string out = "m";
    for (size_t i = 0; i < list.threads.size(); ++i) {
      if (i) out += ",";
      out += format_thread_id(list.threads[i].pid, list.threads[i].tid, d.multiprocess);
    }
    return out;
  }

  std::string operator()(const reply::ThreadListEnd&) const { return "l"; }
  std::string operator()(const reply::Attached& a) const { return a.attached ? "1" : "0"; }
  std::string operator()(const reply::ExecAndArgs& e) const {
    if (e.argv.empty()) return "U";
    return "S;" + to_hex(std::string_view(e.argv.front())) + ";" + to_hex(shell_argument_string(e.argv)) + ";";
  }
  std::string operator()(const reply::XferChunk& x) const { return (x.last ? 'l' : 'm') + escape_binary(x.data); }
  std::string operator()(const reply::ConsoleOutput& c) const { return console_output(c.text); }
  std::string operator()(const reply::FileResult& f) const { return file_result(f.result); }
  std::string operator()(const reply::FileError& f) const { return file_error(f.host_errno); }

  std::string operator()(const reply::FileData& f) const {
    return file_data(static_cast<int64_t>(f.bytes.size()), f.bytes);
  }

  std::string operator()(const reply::StepBranchSummary& s) const {
    if (s.none) return "none";
    std::string out = "thread:" + format_thread_id(s.pid, s.tid, d.multiprocess) + ";";
    if (s.branch_from || s.branch_to) out += fmt::format("branch-from:{:x};branch-to:{:x};", s.branch_from, s.branch_to);
    return out + "stepbranch-mechanism:" + s.mechanism + ";";
  }

  std::string operator()(const reply::HostInfo& r) const { return encode(r); }
  std::string operator()(const reply::ProcessInfo& r) const { return encode(r); }
  std::string operator()(const reply::MemoryRegion& r) const { return encode(r); }
  std::string operator()(const reply::WatchpointSlots& r) const { return encode(r); }
  std::string operator()(const reply::ThreadsInfo& r) const { return encode(r); }
  std::string operator()(const reply::TraceStatus& r) const { return reply::encode(r); }
  std::string operator()(const reply::TracepointHits& r) const { return reply::encode(r); }
  std::string operator()(const reply::TraceVariableValue& r) const { return reply::encode(r); }
  std::string operator()(const reply::TraceFrameFound& r) const { return reply::encode(r); }
  std::string operator()(const reply::TraceUpload& r) const { return reply::encode(r); }
  std::string operator()(const reply::TraceBufferData& r) const { return reply::encode(r); }
  std::string operator()(const reply::Encoded& e) const { return e.payload; }
};

}  // namespace

std::string encode(const Reply& reply, const Dialect& dialect) { return std::visit(Encoder{dialect}, reply); }

std::string error_code(int err) { return fmt::format("E{:02x}", static_cast<uint8_t>(err & 0xff)); }

std::string error_reply(const Dialect& d, int err, std::string_view text, ErrorForm form) {
  if (form == ErrorForm::Fixed) return error_code(err);
  if (d.lldb) return d.error_strings ? error_code(err) + ";" + to_hex(text) : error_code(err);
  if (text.empty() || (form == ErrorForm::Code && !d.error_message)) return error_code(err);
  return "E." + std::string(text);
}

Reply xfer_reply(std::string_view document, uint64_t offset, uint64_t length) {
  if (offset > document.size()) return reply::Error{1, {}, ErrorForm::Fixed};  // gdbserver's answer
  uint64_t available = document.size() - offset;
  uint64_t n = length < available ? length : available;
  return reply::XferChunk{std::string(document.substr(offset, n)), n == available};
}

std::string xfer_chunk(std::string_view document, uint64_t offset, uint64_t length) {
  return encode(xfer_reply(document, offset, length), Dialect{});
}

std::string shell_argument_string(const std::vector<std::string>& argv) {
  static constexpr std::string_view kSpecial = "\"!#$&*()\\|[]{}<>?'`~^; \t\n";
  std::string out;
  for (size_t i = 1; i < argv.size(); ++i) {
    if (i > 1) out += ' ';
    if (argv[i].empty()) out += "''";
    for (char c : argv[i]) {
      if (c == '\n') {
        out += "'\n'";  // a backslash cannot quote a newline
        continue;
      }
      if (kSpecial.find(c) != std::string_view::npos) out += '\\';
      out += c;
    }
  }
  return out;
}

std::string console_output(std::string_view text) { return "O" + to_hex(text); }

}  // namespace protocol
