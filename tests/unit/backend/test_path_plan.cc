// The software branch engine in LinuxProcess against a real program (test_inferiors/branchy.c):
// traced runs and stepbranch compared with a truth taken independently by single-stepping a
// second launch of the same program.
#include <catch2/catch.hpp>

#include <signal.h>

#include "backend/x86/block_cache.h"
#include "backend/linux/linux_process.h"
#include "test_process_support.h"

using namespace backend;
using namespace bs_test;

namespace {

struct Program {
  std::string exe;
  uint64_t begin = 0, end = 0, hit_me = 0;
};

const Program& program() {
  static Program p = [] {
    Program q;
    q.exe = inferior("branchy");
    q.begin = symbol(q.exe, "region_begin");
    q.end = symbol(q.exe, "region_end");
    q.hit_me = symbol(q.exe, "hit_me");
    return q;
  }();
  return p;
}

std::unique_ptr<LinuxProcess> launch(bool with_signal) {
  LaunchOptions o = options_for(program().exe);
  if (with_signal) o.argv.push_back("signal");
  auto p = LinuxProcess::launch_process(o);
  INFO((p ? std::string() : p.error().message));
  REQUIRE(p.ok());
  return std::move(p.value());
}

// Busy-polls (the engine's internal stops need no sleeping).
StopEvent next_stop(Process& p) {
  for (long i = 0; i < 50'000'000; ++i)
    if (auto ev = p.poll_events()) return *ev;
  FAIL("no stop");
  return {};
}

uint64_t pc_of(Process& p, pid_t tid) {
  auto regs = p.read_registers(tid);
  REQUIRE(regs.ok());
  return regs->pc(p.register_layout());
}

BlockCache cache_for(Process& p) {
  return BlockCache([&p](uint64_t addr, std::span<uint8_t> out) -> size_t {
    auto n = p.read_memory(addr, out);
    return n ? *n : 0;
  });
}

void run_to_begin(LinuxProcess& p) {
  REQUIRE(p.insert_breakpoint(BreakpointKind::Software, program().begin, 1).ok());
  REQUIRE(p.resume(continue_all()).ok());
  auto ev = next_stop(p);
  REQUIRE(ev.kind == StopKind::Breakpoint);
  REQUIRE(pc_of(p, p.pid()) == program().begin);
}

struct Truth {
  std::vector<Branch> branches;  // taken, in order
  uint64_t flows = 0;            // control-flow instructions executed
};

// Single-steps from region_begin to region_end, collecting every pc transition that is not
// "the next instruction". A signal is delivered with the step that follows its stop; it is a
// branch from the last instruction executed to the handler.
Truth single_step_truth(bool with_signal) {
  auto p = launch(with_signal);
  run_to_begin(*p);
  auto cache = cache_for(*p);
  Truth truth;
  pid_t tid = p->pid();
  uint64_t last_executed = 0;
  int pending_signal = 0;
  for (int n = 0; n < 200000; ++n) {
    uint64_t pc = pc_of(*p, tid);
    if (pc == program().end) break;
    auto insn = cache.insn_at(pc);
    REQUIRE(insn.ok());
    ResumePlan plan;
    plan.threads[tid] = ResumeAction{ResumeKind::Step, pending_signal};
    bool delivering = pending_signal != 0;
    pending_signal = 0;
    REQUIRE(p->resume(plan).ok());
    auto ev = next_stop(*p);
    uint64_t now = pc_of(*p, tid);
    if (delivering) {  // stopped at the handler entry; nothing executed
      truth.branches.push_back(Branch{last_executed, now});
      continue;
    }
    if (ev.kind == StopKind::Signal && now == pc) {  // the signal stop came instead of the step
      pending_signal = ev.signo;
      continue;
    }
    if (now != pc + insn->first) truth.branches.push_back(Branch{pc, now});
    if (insn->second) truth.flows++;
    last_executed = pc;
    if (ev.kind == StopKind::Signal) pending_signal = ev.signo;
  }
  REQUIRE(pc_of(*p, tid) == program().end);
  return truth;
}

// Each block must be walkable: begin, begin + len, ... reaches end exactly.
void check_blocks_walkable(Process& p, const std::vector<TraceBlock>& blocks) {
  auto cache = cache_for(p);
  for (const auto& b : blocks) {
    if (b.begin == 0) continue;
    uint64_t at = b.begin;
    int n = 0;
    while (at < b.end && n++ < 100000) {
      auto insn = cache.insn_at(at);
      REQUIRE(insn.ok());
      at += insn->first;
    }
    INFO("block " << std::hex << b.begin << ".." << b.end);
    CHECK(at == b.end);
  }
}

bool same(const std::vector<Branch>& a, const std::vector<Branch>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].from != b[i].from || a[i].to != b[i].to) return false;
  return true;
}

// Where two branch lists first differ (for failure messages).
std::string first_difference(const std::vector<Branch>& a, const std::vector<Branch>& b) {
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    bool ia = i < a.size(), ib = i < b.size();
    if (ia && ib && a[i].from == b[i].from && a[i].to == b[i].to) continue;
    char buf[160];
    std::snprintf(buf, sizeof buf, "at %zu: recorded %llx->%llx truth %llx->%llx", i,
                  ia ? (unsigned long long)a[i].from : 0ull, ia ? (unsigned long long)a[i].to : 0ull,
                  ib ? (unsigned long long)b[i].from : 0ull, ib ? (unsigned long long)b[i].to : 0ull);
    return buf;
  }
  return "same";
}

}  // namespace

TEST_CASE("traced run records exactly the single-step truth, with few stops", "[branch_engine]") {
  REQUIRE(!program().exe.empty());
  Truth truth = single_step_truth(false);
  REQUIRE(truth.branches.size() > 100);

  auto p = launch(false);
  p->configure(software_tracing());
  run_to_begin(*p);
  REQUIRE(p->tracer().enable(p->pid()).ok());
  REQUIRE(p->insert_breakpoint(BreakpointKind::Software, program().end, 1).ok());
  uint64_t stops_before = p->ptrace_stops();
  REQUIRE(p->resume(continue_all()).ok());
  auto ev = next_stop(*p);
  REQUIRE(ev.kind == StopKind::Breakpoint);
  REQUIRE(pc_of(*p, p->pid()) == program().end);
  uint64_t stops = p->ptrace_stops() - stops_before;

  auto recorded = p->tracer().history(p->pid(), 1u << 20);
  INFO("recorded " << recorded.size() << " truth " << truth.branches.size());
  INFO(first_difference(recorded, truth.branches));
  CHECK(same(recorded, truth.branches));
  INFO("stops " << stops << " flows " << truth.flows << " emulated " << p->emulated_flows());
  CHECK(stops <= truth.flows);
  WARN("ptrace stops per control-flow instruction: " << double(stops) / double(truth.flows) << " (" << stops
                                                      << "/" << truth.flows << ")");

  auto blocks = p->tracer().read(p->pid(), TraceRead::All);
  REQUIRE(blocks.ok());
  REQUIRE(!blocks->empty());
  CHECK((*blocks)[0].end == program().end);
  check_blocks_walkable(*p, *blocks);
  REQUIRE(p->kill().ok());
}

TEST_CASE("traced run with a signal handler inside the region", "[branch_engine]") {
  Truth truth = single_step_truth(true);
  auto p = launch(true);
  p->configure(software_tracing());
  p->set_pass_signals({SIGUSR1});
  run_to_begin(*p);
  REQUIRE(p->tracer().enable(p->pid()).ok());
  REQUIRE(p->insert_breakpoint(BreakpointKind::Software, program().end, 1).ok());
  REQUIRE(p->resume(continue_all()).ok());
  auto ev = next_stop(*p);
  REQUIRE(ev.kind == StopKind::Breakpoint);
  auto recorded = p->tracer().history(p->pid(), 1u << 20);
  INFO("recorded " << recorded.size() << " truth " << truth.branches.size());
  INFO(first_difference(recorded, truth.branches));
  CHECK(same(recorded, truth.branches));
  auto blocks = p->tracer().read(p->pid(), TraceRead::All);
  REQUIRE(blocks.ok());
  check_blocks_walkable(*p, *blocks);
  REQUIRE(p->kill().ok());
}

TEST_CASE("a client breakpoint inside the traced region is hit every time", "[branch_engine]") {
  Truth truth = single_step_truth(false);
  auto p = launch(false);
  p->configure(software_tracing());
  run_to_begin(*p);
  REQUIRE(p->tracer().enable(p->pid()).ok());
  REQUIRE(p->insert_breakpoint(BreakpointKind::Software, program().end, 1).ok());
  REQUIRE(p->insert_breakpoint(BreakpointKind::Software, program().hit_me, 1).ok());
  int hits = 0;
  for (;;) {
    REQUIRE(p->resume(continue_all()).ok());
    auto ev = next_stop(*p);
    REQUIRE(ev.kind == StopKind::Breakpoint);
    uint64_t pc = pc_of(*p, p->pid());
    if (pc == program().end) break;
    REQUIRE(pc == program().hit_me);
    ++hits;
  }
  CHECK(hits == 6);  // i % 7 == 3 for i < 40
  auto recorded = p->tracer().history(p->pid(), 1u << 20);
  INFO(first_difference(recorded, truth.branches));
  CHECK(same(recorded, truth.branches));
  auto blocks = p->tracer().read(p->pid(), TraceRead::All);
  REQUIRE(blocks.ok());
  check_blocks_walkable(*p, *blocks);
  REQUIRE(p->kill().ok());
}

TEST_CASE("stepbranch 20 times visits the single-step truth", "[branch_engine]") {
  Truth truth = single_step_truth(false);
  REQUIRE(truth.branches.size() >= 20);
  auto p = launch(false);
  run_to_begin(*p);
  for (size_t i = 0; i < 20; ++i) {
    REQUIRE(p->step_branch(p->pid(), 1).ok());
    auto ev = next_stop(*p);
    INFO("step " << i);
    REQUIRE(ev.kind == StopKind::StepBranch);
    CHECK(ev.step_mechanism == "software");
    CHECK(ev.branch_from == truth.branches[i].from);
    CHECK(ev.branch_to == truth.branches[i].to);
    CHECK(pc_of(*p, p->pid()) == truth.branches[i].to);
  }
  // stepbranch:N lands where N single stepbranches would.
  REQUIRE(p->step_branch(p->pid(), 30).ok());
  auto ev = next_stop(*p);
  REQUIRE(ev.kind == StopKind::StepBranch);
  CHECK(ev.branch_from == truth.branches[49].from);
  CHECK(ev.branch_to == truth.branches[49].to);
  REQUIRE(p->kill().ok());
}

TEST_CASE("stepbranch stops at a breakpoint reached before any branch", "[branch_engine]") {
  auto p = launch(false);
  run_to_begin(*p);
  auto cache = cache_for(*p);
  auto first = cache.insn_at(program().begin);
  REQUIRE(first.ok());
  REQUIRE(!first->second);  // region_begin starts with an ordinary instruction
  uint64_t second = program().begin + first->first;
  REQUIRE(p->insert_breakpoint(BreakpointKind::Software, second, 1).ok());
  REQUIRE(p->step_branch(p->pid(), 1).ok());
  auto ev = next_stop(*p);
  CHECK(ev.kind == StopKind::Breakpoint);
  CHECK(pc_of(*p, p->pid()) == second);
  REQUIRE(p->kill().ok());
}
