// `monitor CMD` (qRcmd): gdbserver's commands plus branchstub's (btrace, stepbranch, lbr, probe).
#include <algorithm>
#include <optional>
#include <sstream>
#include <string_view>

#include "backend/btrace/lbr/lbr_device.h"
#include "backend/host/symbolizer.h"
#include "server/handlers/handlers.h"
#include "server/server.h"

namespace server {

namespace {

struct Command {
  std::string name;
  std::string help;
};

const std::vector<Command>& commands() {
  static const std::vector<Command> list = {
      {"help", "Print this message."},
      {"exit", "Quit branchstub (kills a launched program, detaches an attached one)."},
      {"probe", "Show which branch-trace and branch-step mechanisms work on this machine."},
      {"btrace start", "Start recording branches of the current thread (for clients without record btrace)."},
      {"btrace stop", "Stop recording branches of the current thread."},
      {"btrace status", "Show the branch-trace source and what is being recorded."},
      {"btrace history [N]", "Print the last N taken branches (default 20) with symbols."},
      {"btrace calls [N]", "Print the last N entries of the function-call history (default 20)."},
      {"btrace graph FILE.svg", "Draw a flame graph of the current thread's recorded history (width = instructions)."},
      {"coverage start", "Record basic-block coverage of every thread from here (no history is kept)."},
      {"coverage stop", "Stop recording coverage (what was recorded stays, for save)."},
      {"coverage save FILE [drcov|drcov3|lcov]", "Write the coverage: FILE.info as lcov, else drcov (version 2)."},
      {"coverage cfg FUNC FILE.svg", "Draw FUNC's control-flow graph with its executed blocks and edge counts."},
      {"coverage status", "Say what coverage is being recorded."},
      {"stepbranch [N]", "Resume the current thread until it has taken N branches (default 1)."},
      {"lbr", "Print the Last Branch Record taken at the current stop (needs the msr_helper module)."},
      {"when", "A replay: where it stands (trace event, branch count, pc)."},
      {"checkpoint", "A replay: keep a checkpoint here (reverse execution replays from the nearest)."},
      {"checkpoints", "A replay: list its checkpoints."},
      {"tracepoints", "List the tracepoints and how each is collected (jump pad, or a stop per hit)."},
  };
  return list;
}

// `monitor set NAME VALUE`, one row per setting (gdbserver's, then ours). `run` gets the text
// after "set NAME " and returns what to print, or nullopt when it does not understand it:
// the client then gets the unknown-command answer.
struct SetCommand {
  std::string_view name;
  std::string_view usage;  // for monitor help
  std::string_view help;
  std::optional<std::string> (*run)(Session&, std::string_view value);
};

std::optional<bool> zero_or_one(std::string_view value) {
  if (value == "1" || value == "on") return true;
  if (value == "0" || value == "off") return false;
  return std::nullopt;
}

const std::vector<SetCommand>& set_commands() {
  static const std::vector<SetCommand> list = {
      {"debug", "set debug <0|1>", "Enable or disable general debugging messages.",
       [](Session& s, std::string_view v) -> std::optional<std::string> {
         auto on = zero_or_one(v);
         if (!on) return std::nullopt;
         s.server().log().debug = *on;
         return *on ? "Debug output enabled.\n" : "Debug output disabled.\n";
       }},
      {"debug-hw-points", "set debug-hw-points <0|1>",
       "Enable or disable hardware breakpoint/watchpoint debugging messages.",
       [](Session& s, std::string_view v) -> std::optional<std::string> {
         auto on = zero_or_one(v);
         if (!on) return std::nullopt;
         s.server().log().hw_points = *on;
         return *on ? "H/W point debugging output enabled.\n" : "H/W point debugging output disabled.\n";
       }},
      {"remote-debug", "set remote-debug <0|1>", "Enable or disable remote protocol debugging messages.",
       [](Session& s, std::string_view v) -> std::optional<std::string> {
         auto on = zero_or_one(v);
         if (!on) return std::nullopt;
         s.server().log().remote_debug = *on;
         return *on ? "Protocol debug output enabled.\n" : "Protocol debug output disabled.\n";
       }},
      {"event-loop-debug", "set event-loop-debug <0|1>", "Enable or disable event loop debugging messages.",
       [](Session& s, std::string_view v) -> std::optional<std::string> {
         auto on = zero_or_one(v);
         if (!on) return std::nullopt;
         s.server().log().event_loop = *on;
         return *on ? "Event loop debug output enabled.\n" : "Event loop debug output disabled.\n";
       }},
      {"debug-format", "set debug-format LIST",
       "Extra debug format: all, none or timestamp (comma-separated).",
       [](Session& s, std::string_view v) -> std::optional<std::string> {
         auto format = parse_debug_format(v);
         if (!format.error.empty()) return std::nullopt;
         s.server().log().timestamps = format.timestamps;
         return format.said;
       }},
      {"libthread-db-search-path", "set libthread-db-search-path [PATH]",
       "Where to look for libthread_db (default $sdir:$pdir), for thread-local storage.",
       [](Session& s, std::string_view v) -> std::optional<std::string> {
         auto& thread_db = s.server().thread_db();
         thread_db.set_search_path(std::string(v));
         return "libthread-db-search-path set to `" + thread_db.search_path() + "'\n";
       }},
      {"debug-file", "set debug-file [FILE]", "Write debugging messages to FILE (none: back to stderr).",
       [](Session& s, std::string_view v) -> std::optional<std::string> {
         s.server().log().set_file(std::string(v));
         return std::string();  // gdbserver says nothing
       }},
  };
  return list;
}

std::vector<std::string> words_of(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

size_t count_arg(const std::vector<std::string>& w, size_t index, size_t fallback) {
  if (w.size() <= index) return fallback;
  char* end = nullptr;
  unsigned long n = std::strtoul(w[index].c_str(), &end, 0);
  return (end && *end == '\0' && n > 0) ? std::min<unsigned long>(n, 100000) : fallback;
}

std::string help_text() {
  std::string out = "The following monitor commands are supported:\n";
  auto row = [&out](std::string_view name, std::string_view help) {
    out += name.size() <= 26 ? fmt::format("  {:<26} -- {}\n", name, help)
                             : fmt::format("  {}\n  {:<26} -- {}\n", name, "", help);
  };
  for (size_t i = 0; i < commands().size(); ++i) {
    row(commands()[i].name, commands()[i].help);
    if (commands()[i].name == "exit")
      for (const auto& c : set_commands()) row(c.usage, c.help);
  }
  return out;
}

// gdbserver's answer to a command it does not know (an empty one too): the reason, the help,
// then E01, which GDB reports as "Protocol error with Rcmd".
Reply unknown_command(Session& s, std::string_view why) {
  s.send_console(std::string(why) + help_text());
  return error_reply(EINVAL, "Unknown monitor command.", ErrorForm::Code);
}

// `set NAME VALUE` (the text after "set"): the row for NAME.
Reply set_command(Session& s, std::string_view rest) {
  auto trim = [](std::string_view v) {
    while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
    while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
    return v;
  };
  rest = trim(rest);
  size_t space = rest.find(' ');
  std::string_view name = rest.substr(0, space);
  std::string_view value = space == std::string_view::npos ? std::string_view{} : trim(rest.substr(space));
  for (const auto& c : set_commands()) {
    if (c.name != name) continue;
    auto said = c.run(s, value);
    if (!said) {
      if (name == "debug-format") return unknown_command(s, parse_debug_format(value).error);
      return unknown_command(s, "Unknown monitor command.\n\n");
    }
    if (!said->empty()) s.send_console(*said);
    return reply::Ok{};
  }
  return unknown_command(s, "Unknown monitor command.\n\n");
}

std::string branch_line(const backend::Symbolizer& symbols, const backend::Branch& b) {
  if (backend::is_gap(b)) return "-- gap: the branches here were not recorded (LBR windows did not overlap) --\n";
  return fmt::format("branch {:#x} <{}> -> {:#x} <{}>\n", b.from, symbols.describe(b.from), b.to, symbols.describe(b.to));
}

backend::Symbolizer symbols_for(backend::Process& p) {
  auto regions = p.memory_map();
  return regions ? backend::Symbolizer::from_memory_map(*regions) : backend::Symbolizer{};
}

std::string function_of(const backend::Symbolizer& symbols, uint64_t addr) {
  auto hit = symbols.lookup(addr);
  return hit ? hit->name : fmt::format("{:#x}", addr);
}

// A function-call history from taken branches, like GDB's `record function-call-history`: a
// new line whenever control enters another function. Entering a function at its first
// instruction is a call (the caller is remembered); landing inside a function that is on the
// caller stack is a return to it; anything else is a jump (tail call, PLT stub to its target).
std::string calls_text(const backend::Symbolizer& symbols, const std::vector<backend::Branch>& branches, size_t limit) {
  struct Entry { size_t depth; std::string name; };
  std::vector<Entry> entries;
  std::vector<std::string> callers;
  std::string current = branches.empty() ? std::string() : function_of(symbols, branches.front().from);
  bool current_is_stub = false;
  for (const auto& b : branches) {
    if (backend::is_gap(b)) continue;
    std::string to_fn = function_of(symbols, b.to);
    if (to_fn == current) continue;
    auto hit = symbols.lookup(b.to);
    if (!hit || hit->offset == 0) {
      if (!current_is_stub) callers.push_back(current);  // a stub jumping on is not a new call
    } else {
      auto it = std::find(callers.rbegin(), callers.rend(), to_fn);
      if (it != callers.rend()) callers.erase(std::prev(it.base()), callers.end());  // return
    }
    current = to_fn;
    current_is_stub = !hit;
    entries.push_back(Entry{callers.size(), to_fn});
  }
  std::string out;
  size_t first = entries.size() > limit ? entries.size() - limit : 0;
  for (size_t i = first; i < entries.size(); ++i)
    out += fmt::format("{:>6}\t{}{}\n", i + 1, std::string(std::min<size_t>(entries[i].depth, 40) * 2, ' '),
                       entries[i].name);
  if (out.empty()) out = "No function calls recorded yet.\n";
  return out;
}

std::string btrace_command(Session& s, const std::vector<std::string>& w) {
  auto* p = s.process();
  if (!p) return "No process.\n";
  pid_t tid = s.general_thread();
  auto& tracer = p->tracer();
  std::string sub = w.size() > 1 ? w[1] : "status";
  if (sub == "start") {
    if (tracer.enabled(tid)) return fmt::format("Thread {} is already being recorded.\n", tid);
    auto r = tracer.enable(tid);
    return r ? fmt::format("Recording branches of thread {} ({} source).\n", tid, tracer.source_name())
             : "Failed: " + r.error().message + "\n";
  }
  if (sub == "stop") {
    if (!tracer.enabled(tid)) return fmt::format("Thread {} is not being recorded.\n", tid);
    (void)tracer.disable(tid);
    return fmt::format("Stopped recording thread {}.\n", tid);
  }
  if (sub == "status") {
    std::string out = fmt::format("Branch-trace source: {} (chosen: {}).\n", tracer.source_name(), s.server().options().btrace_source);
    for (const auto& line : tracer.explain()) out += "  " + line + "\n";
    for (pid_t t : p->threads())
      if (tracer.enabled(t)) out += fmt::format("Thread {}: recording, buffer {} bytes.\n", t, tracer.buffer_size(t));
    return out;
  }
  if (!tracer.enabled(tid)) return fmt::format("Thread {} is not being recorded: use 'monitor btrace start'.\n", tid);
  auto symbols = symbols_for(*p);
  if (sub == "history") {
    auto branches = tracer.history(tid, count_arg(w, 2, 20));
    if (branches.empty()) return "No branches recorded yet.\n";
    std::string out;
    for (const auto& b : branches) out += branch_line(symbols, b);
    return out;
  }
  if (sub == "calls") return calls_text(symbols, tracer.history(tid, 100000), count_arg(w, 2, 20));
  if (sub == "graph") {
    if (w.size() != 3) return "Usage: monitor btrace graph FILE.svg\n";
    if (!s.server().options().allow_file_writes) return "Refused: the server was started with --no-file-writes.\n";
    auto said = save_history_flame_graph(*p, tid, w[2]);
    return said ? *said : "Failed: " + said.error().message + "\n";
  }
  return "Unknown btrace command: use start, stop, status, history [N], calls [N] or graph FILE.svg.\n";
}

std::string coverage_command(Session& s, const std::vector<std::string>& w) {
  auto& server = s.server();
  std::string sub = w.size() > 1 ? w[1] : "status";
  auto* run = server.coverage();
  auto* p = s.process();
  if (sub == "start") {
    if (!p || !p->alive()) return "No process.\n";
    if (run && run->recording() && run->pid() == p->pid()) return "Coverage is already being recorded.\n";
    if (p != server.process()) return "Coverage is recorded for the main process only.\n";
    auto& fresh = server.new_coverage(*p);
    if (auto r = fresh.start(); !r) return "Failed: " + r.error().message + "\n";
    return fmt::format("Recording coverage of every thread of process {} ({} threads).\n", p->pid(), p->threads().size());
  }
  if (!run) return "No coverage recorded: use 'monitor coverage start'.\n";
  if (sub == "stop") {
    if (!run->recording()) return "Coverage is not being recorded.\n";
    run->stop();
    return "Stopped recording coverage.\n";
  }
  if (sub == "status") return run->status();
  bool writes = sub == "save" || sub == "cfg";
  if (writes && !server.options().allow_file_writes) return "Refused: the server was started with --no-file-writes.\n";
  if (sub == "save") {
    if (w.size() < 3 || w.size() > 4) return "Usage: monitor coverage save FILE [drcov|drcov3|lcov]\n";
    auto format = coverage_format(w[2], w.size() == 4 ? w[3] : std::string());
    if (!format) return "Unknown format " + w[3] + ": use drcov, drcov3 or lcov.\n";
    auto said = run->save(w[2], *format);
    return said ? *said : "Failed: " + said.error().message + "\n";
  }
  if (sub == "cfg") {
    if (w.size() != 4) return "Usage: monitor coverage cfg FUNC FILE.svg\n";
    auto said = run->save_cfg(w[2], w[3]);
    return said ? *said : "Failed: " + said.error().message + "\n";
  }
  return "Unknown coverage command: use start, stop, save FILE [FORMAT], cfg FUNC FILE.svg or status.\n";
}

std::string lbr_command(Session& s) {
  auto* p = s.process();
  if (!p) return "No process.\n";
  std::string why;
  auto* feed = s.server().lbr_feed(&why);  // the same handle `record btrace` uses
  if (!feed) return why + "\n";
  pid_t tid = s.general_thread();
  if (!feed->armed(tid)) {
    // Not armed yet: arm it now; the next stop of this thread takes a snapshot.
    if (auto a = feed->arm(tid); !a) return "LBR attach failed: " + a.error().message + "\n";
    return fmt::format("LBR armed for thread {}: the next stop takes a snapshot; run 'monitor lbr' then.\n", tid);
  }
  auto window = feed->window(tid, 0);
  if (!window) return "LBR snapshot failed: " + window.error().message + "\n";
  if (window->sequence == 0) return fmt::format("No LBR snapshot of thread {} yet: it has not stopped since it was armed.\n", tid);
  auto symbols = symbols_for(*p);
  std::string out = fmt::format("Last {} branches before this stop (newest last){}{}:\n", window->oldest_first.size(),
                                window->simulated ? " [SIMULATED LBR: test mode]" : "",
                                window->conflict ? " [another LBR user held the hardware: entries may be missing]" : "");
  for (const auto& b : window->oldest_first) out += branch_line(symbols, b);
  return out;
}

// rr's `when` and `checkpoint`, for a replay: where it stands and the checkpoints reverse
// execution starts from.
std::string replay_command(Session& s, const std::vector<std::string>& w) {
  auto* p = s.process();
  if (!p || !p->can_reverse()) return "Not a replay: start the server with `branchstub replay COMM DIR`.\n";
  auto describe = [](const backend::ReplayPosition& at) {
    if (at.at_end) return std::string("the recorded end");
    return fmt::format("event {} of {}, branch count {}, pc {:#x}", at.event, at.events, at.branches, at.pc);
  };
  if (w[0] == "when") {
    auto at = p->replay_position();
    return at ? "Now at " + describe(*at) + ".\n" : std::string("The program is running.\n");
  }
  if (w[0] == "checkpoint") {
    if (auto r = p->take_checkpoint(); !r) return "No checkpoint: " + r.error().message + "\n";
  }
  auto all = p->replay_checkpoints();
  std::string out = fmt::format("{} checkpoint{}{}\n", all.size(), all.size() == 1 ? "" : "s",
                                all.empty() ? "." : " (reverse execution replays from the nearest before):");
  for (size_t i = 0; i < all.size(); ++i) out += fmt::format("  {}: {}\n", i + 1, describe(all[i]));
  return out;
}

}  // namespace

std::string monitor_stepbranch_text(Session& s, const backend::StopEvent& e) {
  auto* p = s.process();
  if (e.kind == backend::StopKind::StepBranch && (e.branch_from || e.branch_to)) {
    auto symbols = p ? symbols_for(*p) : backend::Symbolizer{};
    return branch_line(symbols, backend::Branch{e.branch_from, e.branch_to}) +
           "Note: run 'maint flush register-cache' so GDB sees the new registers.\n";
  }
  if (e.kind == backend::StopKind::Exited) return fmt::format("The program exited with code {}.\n", e.exit_status);
  return fmt::format("Stopped before a branch was taken (signal {}).\n", e.signo);
}

Reply handle(Session& s, const Monitor& m) {
  auto w = words_of(m.command);
  auto& server = s.server();
  if (w.empty()) return unknown_command(s, "Unknown monitor command.\n\n");
  if (w[0] == "help") {
    s.send_console(help_text());
    return reply::Ok{};
  }
  if (w[0] == "exit") {
    server.request_exit();
    return reply::Ok{};
  }
  if (w[0] == "set" && w.size() >= 2) return set_command(s, std::string_view(m.command).substr(m.command.find("set") + 3));
  if (w[0] == "probe") {
    s.send_console(backend::format_probe(server.probe()));
    return reply::Ok{};
  }
  if (w[0] == "btrace") {
    s.send_console(btrace_command(s, w));
    return reply::Ok{};
  }
  if (w[0] == "coverage") {
    s.send_console(coverage_command(s, w));
    return reply::Ok{};
  }
  if (w[0] == "lbr") {
    s.send_console(lbr_command(s));
    return reply::Ok{};
  }
  if (w[0] == "when" || w[0] == "checkpoint" || w[0] == "checkpoints") {
    s.send_console(replay_command(s, w));
    return reply::Ok{};
  }
  if (w[0] == "tracepoints") {
    s.send_console(tracepoints_text(s));
    return reply::Ok{};
  }
  if (w[0] == "stepbranch") {
    auto* p = s.process();
    if (!p) {
      s.send_console("No process.\n");
      return reply::Ok{};
    }
    s.begin_resume();  // a stepbranch of its own: a stepbranch-next request expires
    if (auto r = p->step_branch(s.general_thread(), static_cast<uint32_t>(count_arg(w, 1, 1))); !r) {
      s.send_console("stepbranch failed: " + r.error().message + "\n");
      return reply::Ok{};
    }
    s.expect_stop(Waiting::MonitorStepBranch);
    server.resumed();
    return reply::NoReply{};  // output and OK follow when the thread stops
  }
  return unknown_command(s, "Unknown monitor command.\n\n");
}

}  // namespace server
