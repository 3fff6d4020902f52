// Session, breakpoints: Z0..Z4 / z0..z4 reach the backend with the right kind and length;
// what the backend refuses becomes the empty reply (unsupported) or an error.
#include <catch2/catch.hpp>

#include <csignal>

#include "tests/unit/server/session_harness.h"

using backend::BreakpointKind;
using fake::BreakpointCall;
using fake::FakeProcess;
using fake::SessionHarness;

TEST_CASE("breakpoints: Z0..Z4 insert the matching kind, watchpoints keep their length") {
  SessionHarness h;
  auto& p = h.add_process(0x64);
  CHECK(h.request("Z0,401000,1") == "OK");
  CHECK(h.request("Z0,401004,2") == "OK");  // a breakpoint's kind is an instruction size: one int3 anyway
  CHECK(h.request("Z1,401010,1") == "OK");
  CHECK(h.request("Z2,601040,4") == "OK");
  CHECK(h.request("Z3,601048,8") == "OK");
  CHECK(h.request("Z4,601050,2") == "OK");
  CHECK(p.breakpoint_calls == std::vector<BreakpointCall>{
                                  {true, BreakpointKind::Software, 0x401000, 1},
                                  {true, BreakpointKind::Software, 0x401004, 1},
                                  {true, BreakpointKind::Hardware, 0x401010, 1},
                                  {true, BreakpointKind::WriteWatch, 0x601040, 4},
                                  {true, BreakpointKind::ReadWatch, 0x601048, 8},
                                  {true, BreakpointKind::AccessWatch, 0x601050, 2},
                              });
}

TEST_CASE("breakpoints: z0..z4 remove the matching kind") {
  SessionHarness h;
  auto& p = h.add_process(0x64);
  CHECK(h.request("z0,401000,1") == "OK");
  CHECK(h.request("z1,401010,1") == "OK");
  CHECK(h.request("z2,601040,4") == "OK");
  CHECK(h.request("z3,601048,8") == "OK");
  CHECK(h.request("z4,601050,2") == "OK");
  CHECK(p.breakpoint_calls == std::vector<BreakpointCall>{
                                  {false, BreakpointKind::Software, 0x401000, 1},
                                  {false, BreakpointKind::Hardware, 0x401010, 1},
                                  {false, BreakpointKind::WriteWatch, 0x601040, 4},
                                  {false, BreakpointKind::ReadWatch, 0x601048, 8},
                                  {false, BreakpointKind::AccessWatch, 0x601050, 2},
                              });
}

TEST_CASE("breakpoints: EOPNOTSUPP from the backend is the empty reply, other errors Exx") {
  SessionHarness h;
  auto& p = h.add_process(0x64);
  p.breakpoint_error = backend::Error{EOPNOTSUPP, "read watchpoints need an access watchpoint"};
  CHECK(h.request("Z3,601048,4") == "");
  p.breakpoint_error = backend::Error{ENOSPC, "no free debug register"};
  CHECK(h.request("Z2,601040,4") == "E.no free debug register");
  p.breakpoint_error = backend::Error{EIO, "cannot write"};
  CHECK(h.request("Z0,401000,1") == "E.cannot write");
  CHECK(h.request("z0,401000,1") == "E.cannot write");
  CHECK(p.breakpoint_calls.size() == 4);
}

TEST_CASE("breakpoints: LLDB with error strings gets the backend's sentence") {
  SessionHarness h;
  auto& p = h.add_process(0x64);
  h.lldb_handshake();
  CHECK(h.request("QEnableErrorStrings") == "OK");
  p.breakpoint_error = backend::Error{ENOSPC, "no slot"};
  CHECK(h.request("Z2,601040,4") == "E1c;6e6f20736c6f74");  // ENOSPC, "no slot"
}

TEST_CASE("breakpoints: malformed Z packets never reach the backend") {
  SessionHarness h;
  auto& p = h.add_process(0x64);
  CHECK(h.request("Z5,401000,1") == "");  // a type nobody knows: unsupported
  CHECK(h.request("Z0,401000") == "E.Z/z: expected type,addr,kind");
  CHECK(h.request("Z0,zz,1") == "E.Z/z: bad addr or kind");
  CHECK(h.request("Z") == "E.Z/z: expected type,addr,kind");
  CHECK(p.breakpoint_calls.empty());
}

TEST_CASE("breakpoints: removing from a fork child what forking took out already is fine") {
  SessionHarness h;
  auto& parent = h.add_process(0x64);
  h.gdb_handshake();
  auto child = std::make_unique<FakeProcess>(0xc8, std::vector<pid_t>{0xc8});
  auto& c = *child;
  parent.add_fork_child(std::move(child));
  auto fork = fake::stop_event(backend::StopKind::Fork, 0x64, 0x64, SIGTRAP);
  fork.child_pid = 0xc8;
  parent.stop_with(fork);
  CHECK(h.round_trip("vCont;c").size() == 1);
  CHECK(h.request("Hgpc8.c8") == "OK");
  c.breakpoint_error = backend::Error{ENOENT, "no breakpoint there"};
  CHECK(h.request("z0,401000,1") == "OK");
  CHECK(h.request("z1,401000,1") == "E.no breakpoint there");  // only the int3 copies went with the fork
  CHECK(c.breakpoint_calls.size() == 2);
  CHECK(parent.breakpoint_calls.empty());
}

// ---- target-side conditions and commands (ConditionalBreakpoints+, BreakpointCommands+) ----

namespace {
using Bytes = std::vector<uint8_t>;
// `const8 1; end` and `const8 0; end`.
const Bytes kTrue{0x22, 0x01, 0x27};
const Bytes kFalse{0x22, 0x00, 0x27};
}  // namespace

TEST_CASE("breakpoints: qSupported advertises conditions and commands") {
  SessionHarness h;
  std::string reply = h.gdb_handshake();
  CHECK(reply.find(";ConditionalBreakpoints+") != std::string::npos);
  CHECK(reply.find(";BreakpointCommands+") != std::string::npos);
}

TEST_CASE("breakpoints: Z0 with conditions and commands hands the program to the backend") {
  SessionHarness h;
  auto& p = h.add_process(0x64);
  h.gdb_handshake();
  CHECK(h.request("Z0,401000,1;X3,220127X3,220027;cmds:1,X3,220127") == "OK");
  REQUIRE(p.breakpoint_calls.size() == 1);
  REQUIRE(p.program_calls.size() == 1);
  const auto& c = p.program_calls[0];
  CHECK(c.kind == BreakpointKind::Software);
  CHECK(c.addr == 0x401000);
  CHECK(c.program.conditions == std::vector<Bytes>{kTrue, kFalse});
  CHECK(c.program.commands == std::vector<Bytes>{kTrue});
  CHECK(c.program.persist);
  // Z1 too; a plain Z0 elsewhere needs no program call.
  CHECK(h.request("Z1,401010,1;X3,220027") == "OK");
  CHECK(h.request("Z0,401020,1") == "OK");
  REQUIRE(p.program_calls.size() == 2);
  CHECK(p.program_calls[1].kind == BreakpointKind::Hardware);
  CHECK(p.program_calls[1].program.conditions == std::vector<Bytes>{kFalse});
  CHECK(p.program_calls[1].program.commands.empty());
}

TEST_CASE("breakpoints: GDB's Z again at an inserted breakpoint replaces its conditions, inserts nothing") {
  SessionHarness h;
  auto& p = h.add_process(0x64);
  h.gdb_handshake();
  CHECK(h.request("Z0,401000,1;X3,220127") == "OK");
  CHECK(h.request("Z0,401000,1;X3,220027") == "OK");
  CHECK(h.request("Z0,401000,1") == "OK");  // the condition was deleted: plain again
  CHECK(p.breakpoint_calls == std::vector<BreakpointCall>{{true, BreakpointKind::Software, 0x401000, 1}});
  REQUIRE(p.program_calls.size() == 3);
  CHECK(p.program_calls[1].program.conditions == std::vector<Bytes>{kFalse});
  CHECK(p.program_calls[2].program.empty());
  // One z removes it.
  CHECK(h.request("z0,401000,1") == "OK");
  CHECK_FALSE(p.has_client_breakpoint(BreakpointKind::Software, 0x401000));
}

TEST_CASE("breakpoints: LLDB's Z0s at one address are counted, as lldb-server does") {
  SessionHarness h;
  auto& p = h.add_process(0x64);
  h.lldb_handshake();
  CHECK(h.request("Z0,401000,1") == "OK");
  CHECK(h.request("Z0,401000,1") == "OK");
  CHECK(p.breakpoint_calls.size() == 2);
}

TEST_CASE("breakpoints: a program the backend refuses takes the new breakpoint out again") {
  SessionHarness h;
  auto& p = h.add_process(0x64);
  h.gdb_handshake();
  p.program_error = backend::Error{EIO, "no room"};
  CHECK(h.request("Z0,401000,1;X3,220127") == "E.no room");
  CHECK(p.breakpoint_calls == std::vector<BreakpointCall>{{true, BreakpointKind::Software, 0x401000, 1},
                                                          {false, BreakpointKind::Software, 0x401000, 1}});
  // Already there before: it stays (only its conditions could not change).
  p.program_error.reset();
  CHECK(h.request("Z0,402000,1") == "OK");
  p.program_error = backend::Error{EIO, "no room"};
  CHECK(h.request("Z0,402000,1;X3,220127") == "E.no room");
  CHECK(p.has_client_breakpoint(BreakpointKind::Software, 0x402000));
}

TEST_CASE("breakpoints: dprintf output reaches GDB as O packets before the stop reply") {
  SessionHarness h;
  auto& p = h.add_process(0x64);
  h.gdb_handshake();
  p.console_output = "x=5\n";
  p.stop_with(fake::stop_event(backend::StopKind::Breakpoint, 0x64, 0x64, SIGTRAP));
  auto packets = h.round_trip("vCont;c");
  REQUIRE(packets.size() == 2);
  CHECK(packets[0] == "O" + fake::hex("x=5\n"));
  CHECK(packets[1].rfind("T05", 0) == 0);
  CHECK(p.console_output.empty());
}
