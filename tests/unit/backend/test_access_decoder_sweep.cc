// AccessDecoder against the real CPU, form by form: every capstone-decodable form with a memory
// operand, run by the harness in access_decoder_cpu.h.
// Not run by default (about a minute): `unit_backend "[mem_access_sweep]"`. One encoding per
// distinct form (mnemonic, prefixes, operand kinds and sizes) with the memory operand at [rbx];
// every general register points into the scratch area, rcx = 2 (a small count). Forms the CPU
// refuses (#UD, #GP, #DE...) are skipped; every disagreement is listed.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/user.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <capstone/capstone.h>

#include "access_decoder_cpu.h"

using namespace access_cpu;

namespace {

std::string reg_class(csh h, x86_reg r) {
  std::string n = cs_reg_name(h, r) ? cs_reg_name(h, r) : "?";
  for (const char* p : {"xmm", "ymm", "zmm", "mm", "st", "k", "bnd", "cr", "dr"})
    if (n.rfind(p, 0) == 0) return p;
  return n.size() <= 3 ? n : "r";  // segment and legacy names stay; r8d... become "r"
}

// Distinct forms among encodings with a [rbx] memory operand (modrm mod=00 rm=011) or none.
std::vector<std::vector<uint8_t>> sweep_forms() {
  csh h = 0;
  REQUIRE(cs_open(CS_ARCH_X86, CS_MODE_64, &h) == CS_ERR_OK);
  cs_option(h, CS_OPT_DETAIL, CS_OPT_ON);
  cs_insn* insn = cs_malloc(h);
  std::set<std::string> seen;
  std::vector<std::vector<uint8_t>> forms;
  auto consider = [&](std::vector<uint8_t> b, uint8_t pad = 0x01) {
    b.insert(b.end(), 4, pad);  // immediates
    const uint8_t* p = b.data();
    size_t n = b.size();
    uint64_t at = kCode;
    if (!cs_disasm_iter(h, &p, &n, &at, insn)) return;
    const cs_x86& x = insn->detail->x86;
    std::string key = std::string(insn->mnemonic) + "/" + std::to_string(x.prefix[0]) + "/" +
                      std::to_string(x.prefix[2]) + "/" + std::to_string(x.addr_size);
    for (int i = 0; i < x.op_count; ++i) {
      const cs_x86_op& o = x.operands[i];
      key += "/" + std::to_string(o.type) + ":" + std::to_string(o.size) + ":" + std::to_string(o.avx_bcast);
      if (o.type == X86_OP_REG) key += reg_class(h, o.reg);
    }
    if (seen.insert(key).second) forms.emplace_back(insn->bytes, insn->bytes + insn->size);
  };
  const std::vector<std::vector<uint8_t>> prefixes = {{}, {0x66}, {0xf3}, {0xf2}, {0x48}, {0x66, 0x48},
                                                       {0xf3, 0x48}, {0xf2, 0x48}, {0xf0}, {0xf0, 0x48}};
  for (const auto& pre : prefixes)
    for (int op = 0; op < 256; ++op) {
      if ((op & 0xf0) == 0x40 || op == 0x0f || op == 0x62 || op == 0xc4 || op == 0xc5) continue;
      bool prefix = op == 0x26 || op == 0x2e || op == 0x36 || op == 0x3e || op == 0x64 || op == 0x65 ||
                    op == 0x66 || op == 0x67 || op == 0xf0 || op == 0xf2 || op == 0xf3;
      for (const std::vector<uint8_t>& esc : {std::vector<uint8_t>{}, {0x0f}, {0x0f, 0x38}, {0x0f, 0x3a}}) {
        if (prefix && esc.empty()) continue;
        std::vector<uint8_t> base = pre;
        base.insert(base.end(), esc.begin(), esc.end());
        base.push_back(static_cast<uint8_t>(op));
        consider(base, 0xc0);  // no ModRM, or a register one
        for (int reg = 0; reg < 8; ++reg) {
          std::vector<uint8_t> b = base;
          b.push_back(static_cast<uint8_t>(0x03 | reg << 3));
          consider(b);
        }
      }
    }
  for (int map = 1; map <= 3; ++map)
    for (int w = 0; w < 2; ++w)
      for (int l = 0; l < 2; ++l)
        for (int pp = 0; pp < 4; ++pp)
          for (int op = 0; op < 256; ++op)
            for (int reg = 0; reg < 8; ++reg)
              consider({0xc4, static_cast<uint8_t>(0xe0 | map), static_cast<uint8_t>(w << 7 | 0x78 | l << 2 | pp),
                        static_cast<uint8_t>(op), static_cast<uint8_t>(0x03 | reg << 3)});
  for (int map = 1; map <= 3; ++map)
    for (int w = 0; w < 2; ++w)
      for (int ll = 0; ll < 3; ++ll)
        for (int pp = 0; pp < 4; ++pp)
          for (int mask = 0; mask < 2; ++mask)
            for (int bc = 0; bc < 2; ++bc)
              for (int op = 0; op < 256; ++op)
                for (int reg = 0; reg < 8; ++reg)
                  consider({0x62, static_cast<uint8_t>(0xf0 | map), static_cast<uint8_t>(w << 7 | 0x7c | pp),
                            static_cast<uint8_t>(ll << 5 | bc << 4 | 0x08 | mask), static_cast<uint8_t>(op),
                            static_cast<uint8_t>(0x03 | reg << 3)});
  cs_free(insn, 1);
  cs_close(&h);
  return forms;
}

std::string hex_bytes(const std::vector<uint8_t>& b) {
  std::string s;
  for (uint8_t x : b) {
    char t[4];
    std::snprintf(t, sizeof t, "%02x ", x);
    s += t;
  }
  return s;
}

}  // namespace

TEST_CASE("mem_access: sweep of decodable forms against the CPU", "[.][mem_access_sweep]") {
  int level = vector_level();
  std::vector<std::vector<uint8_t>> forms = sweep_forms();
  csh h = 0;
  REQUIRE(cs_open(CS_ARCH_X86, CS_MODE_64, &h) == CS_ERR_OK);
  size_t inexact = 0, refused = 0, checked = 0;
  std::map<int, size_t> refused_by_signal;
  std::map<int, std::set<std::string>> refused_names;
  std::vector<std::string> report;
  AccessDecoder dec;
  for (const auto& bytes : forms) {
    cs_insn* insn = nullptr;
    std::string text;
    if (cs_disasm(h, bytes.data(), bytes.size(), kCode, 1, &insn) == 1) {
      text = std::string(insn->mnemonic) + " " + insn->op_str;
      cs_free(insn, 1);
    }
    if (text.rfind("enter", 0) == 0) continue;  // its write probe may land anywhere; see the table
    Entry e(text.c_str(), bytes, "", [](Setup& s) {
      for (auto* r : {&s.regs.rax, &s.regs.rbx, &s.regs.rdx, &s.regs.rsi, &s.regs.rdi, &s.regs.rbp, &s.regs.r8,
                      &s.regs.r9, &s.regs.r10, &s.regs.r11, &s.regs.r12, &s.regs.r13, &s.regs.r14, &s.regs.r15})
        *r = kP1 + 0x800;
      s.regs.rcx = 2;
      s.regs.rsp = kP2 + 0x800;
    });
    e.full_write = false;
    // Masked forms ({k}, vmaskmov, vpmaskmov) are computed as the whole operand on purpose.
    e.superset = text.find("{k") != std::string::npos || text.find("maskmov") != std::string::npos;
    std::vector<uint8_t> code = code_bytes(e);
    std::vector<bool> changed(kPages * kPage, false);
    InsnAccesses acc;
    bool ran = true;
    std::string issue;
    for (bool inverted : {false, true}) {
      Setup s = make_setup(e, inverted);
      Prot rw[kPages] = {Prot::RW, Prot::RW, Prot::RW};
      StepResult r = run_step(e, s, rw, true, level);
      acc = dec.decode(code, r.before);
      if (!acc.exact) break;
      if (r.signo != SIGTRAP) {
        bool computed = false;  // e.g. a bit string far outside the scratch area
        for (const MemAccess& m : acc.accesses) computed |= in_access(r.fault_addr, m);
        if (r.signo == SIGSEGV && r.fault_addr != 0 && !computed)
          issue = "faulted at " + hex(r.fault_addr) + " with the scratch area writable";
        else {
          ++refused_by_signal[r.signo];
          refused_names[r.signo].insert(text.substr(0, text.find(' ')));
        }
        ran = false;
        break;
      }
      for (const MemAccess& m : acc.accesses)
        if (m.addr < kScratch || m.addr + m.size > kScratchEnd) issue = "computed an access outside the scratch area";
      for (uint64_t i = 0; i < r.memory.size(); ++i)
        if (r.memory[i] != s.mem(kScratch + i)) changed[i] = true;
    }
    std::string line = hex_bytes(bytes) + "| " + text + " | " + describe(acc) + " | ";
    if (!acc.exact) {
      ++inexact;
      continue;
    }
    if (!issue.empty()) {
      report.push_back(line + issue);
      continue;
    }
    if (!ran) {
      ++refused;
      continue;
    }
    ++checked;
    std::vector<std::string> issues = cpu_disagreements(e, acc, changed, level);
    if (!issues.empty()) report.push_back(line + issues.front() + " (+" + std::to_string(issues.size() - 1) + ")");
  }
  cs_close(&h);
  std::string refusals;
  for (auto [sig, n] : refused_by_signal) refusals += " " + std::to_string(n) + "x signal " + std::to_string(sig);
  std::string summary = std::to_string(forms.size()) + " forms: " + std::to_string(checked) + " checked, " +
                        std::to_string(inexact) + " exact=false, " + std::to_string(refused) +
                        " refused by the CPU (" + refusals + " ), " + std::to_string(report.size()) + " disagree";
  // Printed, not logged through Catch, which would wrap the long lines.
  std::printf("%s\n", summary.c_str());
  for (const auto& [sig, names] : refused_names) {
    std::printf("refused with signal %d:", sig);
    for (const std::string& n : names) std::printf(" %s", n.c_str());
    std::printf("\n");
  }
  for (const std::string& l : report) std::printf("%s\n", l.c_str());
  CHECK(report.empty());
}
