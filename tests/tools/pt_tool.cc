// pt_tool: a real Intel PT stream for a known path, and the path back from a stream, with
// libipt (Debian's libipt-dev), for the PT tests (tests/integration/test_btrace_pt.py). No
// machine of ours has Intel PT, so the test makes the stream the CPU would have written for the
// single-step truth of a test inferior, the server serves it as if the intel_pt PMU had put it in
// its AUX ring, and this tool decodes what GDB would receive: the path must come back.
//
//   pt_tool encode MAPS PCS OUT [PSB_EVERY]   -> OUT (raw stream), OUT.psb (offset pc-index per PSB+)
//   pt_tool decode MAPS RAW FAMILY MODEL STEPPING -> one "insn 0x..." line per instruction
//
// MAPS is a copy of the inferior's /proc/PID/maps (its code comes from the files mapped there);
// PCS has one hex address per executed instruction, then "end ADDR" (where the thread stopped).
//
// The encoder emits what a CPU tracing user mode only writes (SDM vol. 3, ch. 33): PSB+ (PSB,
// MODE.Exec 64-bit, FUP with the next ip when tracing is on, PSBEND), TIP.PGE where tracing
// starts, one TNT bit per conditional branch, TIP for every indirect branch and return (no
// return compression), TIP.PGD/TIP.PGE around a syscall (the kernel is not traced), and FUP +
// TIP.PGD where the thread trapped into the kernel at its stop.
#include <intel-pt.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "backend/x86/block_cache.h"

namespace {

struct Region {
  uint64_t start = 0, end = 0, offset = 0;
  std::string path;
};

std::vector<Region> read_maps(const char* path) {
  std::vector<Region> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    std::istringstream w(line);
    std::string range, perms, offset, dev, inode, file;
    w >> range >> perms >> offset >> dev >> inode;
    std::getline(w >> std::ws, file);
    if (perms.size() < 3 || perms[2] != 'x' || file.empty() || file[0] != '/') continue;
    Region r;
    r.start = std::stoull(range.substr(0, range.find('-')), nullptr, 16);
    r.end = std::stoull(range.substr(range.find('-') + 1), nullptr, 16);
    r.offset = std::stoull(offset, nullptr, 16);
    r.path = file;
    out.push_back(r);
  }
  return out;
}

backend::CodeReader file_code(const std::vector<Region>& maps) {
  return [maps](uint64_t addr, std::span<uint8_t> out) -> size_t {
    for (const auto& r : maps) {
      if (addr < r.start || addr >= r.end) continue;
      std::ifstream f(r.path, std::ios::binary);
      f.seekg(static_cast<std::streamoff>(r.offset + (addr - r.start)));
      size_t n = std::min<size_t>(out.size(), r.end - addr);
      f.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(n));
      return static_cast<size_t>(f.gcount());
    }
    return 0;
  };
}

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "pt_tool: %s\n", why.c_str());
  std::exit(1);
}

class Encoder {
 public:
  explicit Encoder(size_t capacity) : buf_(capacity) {
    pt_config_init(&config_);
    config_.begin = buf_.data();
    config_.end = buf_.data() + buf_.size();
    enc_ = pt_alloc_encoder(&config_);
    if (!enc_) die("pt_alloc_encoder failed");
  }
  ~Encoder() { pt_free_encoder(enc_); }
  void put(const pt_packet& p) {
    int r = pt_enc_next(enc_, &p);
    if (r < 0) die(std::string("pt_enc_next: ") + pt_errstr(pt_errcode(r)));
  }
  void simple(pt_packet_type type) {
    pt_packet p{};
    p.type = type;
    put(p);
  }
  void ip(pt_packet_type type, uint64_t ip, pt_ip_compression ipc = pt_ipc_sext_48) {
    pt_packet p{};
    p.type = type;
    p.payload.ip.ipc = ipc;
    p.payload.ip.ip = ip;
    put(p);
  }
  void mode_exec64() {
    pt_packet p{};
    p.type = ppt_mode;
    p.payload.mode.leaf = pt_mol_exec;
    p.payload.mode.bits.exec = pt_set_exec_mode(ptem_64bit);
    put(p);
  }
  // Conditional branch outcomes, oldest first, flushed as TNT-64 packets (oldest bit highest).
  void bit(bool taken) {
    bits_.push_back(taken);
    if (bits_.size() == 47) flush();
  }
  void flush() {
    if (bits_.empty()) return;
    pt_packet p{};
    p.type = ppt_tnt_64;
    p.payload.tnt.bit_size = static_cast<uint8_t>(bits_.size());
    for (bool b : bits_) p.payload.tnt.payload = (p.payload.tnt.payload << 1) | (b ? 1 : 0);
    put(p);
    bits_.clear();
  }
  void psb_plus(std::optional<uint64_t> fup) {
    flush();
    simple(ppt_psb);
    mode_exec64();
    if (fup) ip(ppt_fup, *fup);
    simple(ppt_psbend);
  }
  uint64_t offset() {
    uint64_t off = 0;
    pt_enc_get_offset(enc_, &off);
    return off;
  }
  std::vector<uint8_t> bytes() {
    buf_.resize(offset());
    return buf_;
  }

 private:
  std::vector<uint8_t> buf_;
  pt_config config_{};
  pt_encoder* enc_ = nullptr;
  std::vector<bool> bits_;
};

int encode(const char* maps_path, const char* pcs_path, const char* out_path, int psb_every) {
  std::vector<uint64_t> pcs;
  uint64_t end = 0;
  {
    std::ifstream in(pcs_path);
    for (std::string w; in >> w;) {
      if (w == "end") {
        in >> w;
        end = std::stoull(w, nullptr, 16);
        break;
      }
      pcs.push_back(std::stoull(w, nullptr, 16));
    }
  }
  if (pcs.empty() || !end) die("no path in " + std::string(pcs_path));
  backend::BlockCache code(file_code(read_maps(maps_path)));
  Encoder e(64 * pcs.size() + 4096);
  std::vector<std::pair<uint64_t, size_t>> psbs;  // stream offset of each PSB+, pc index it starts at
  psbs.push_back({e.offset(), 0});
  e.psb_plus(std::nullopt);
  e.ip(ppt_tip_pge, pcs[0]);
  int since_psb = 0;
  for (size_t i = 0; i < pcs.size(); ++i) {
    uint64_t pc = pcs[i], next = i + 1 < pcs.size() ? pcs[i + 1] : end;
    if (psb_every && since_psb >= psb_every) {  // a place a decoder can start from
      e.flush();
      psbs.push_back({e.offset(), i});
      e.psb_plus(pc);
      since_psb = 0;
    }
    auto insn = code.insn_at(pc);
    if (!insn || insn->first == 0) die("cannot decode the instruction at " + std::to_string(pc));
    const auto& [len, flow] = *insn;
    if (!flow) {
      if (next != pc + len) die("a non-branch instruction that does not fall through");
      continue;
    }
    ++since_psb;
    switch (flow->kind) {
      case backend::FlowKind::CondJump:
      case backend::FlowKind::Loop:
        e.bit(next != pc + len);
        break;
      case backend::FlowKind::Jump:
      case backend::FlowKind::Call:
        if (!flow->direct_target || *flow->direct_target != next) die("a direct branch that goes elsewhere");
        break;
      case backend::FlowKind::Return:
      case backend::FlowKind::IndirectJump:
      case backend::FlowKind::IndirectCall:
        e.flush();
        e.ip(ppt_tip, next);
        break;
      case backend::FlowKind::Syscall:
        e.flush();
        e.ip(ppt_tip_pgd, 0, pt_ipc_suppressed);  // into the kernel: not traced
        e.ip(ppt_tip_pge, next);                  // back in user mode
        break;
      case backend::FlowKind::Trap:
        die("the path executes a trap instruction");
    }
  }
  e.flush();
  // The thread trapped there (int3 at the breakpoint): an asynchronous exit to the kernel,
  // FUP with the ip of the instruction not executed, then TIP.PGD.
  e.ip(ppt_fup, end);
  e.ip(ppt_tip_pgd, 0, pt_ipc_suppressed);
  auto bytes = e.bytes();
  std::ofstream(out_path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                  static_cast<std::streamsize>(bytes.size()));
  std::ofstream psb(std::string(out_path) + ".psb");
  for (const auto& [off, index] : psbs) psb << off << " " << index << "\n";
  return 0;
}

int decode(const char* maps_path, const char* raw_path, int family, int model, int stepping) {
  std::ifstream in(raw_path, std::ios::binary);
  std::vector<uint8_t> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (raw.empty()) die("empty trace");
  pt_config config;
  pt_config_init(&config);
  config.begin = raw.data();
  config.end = raw.data() + raw.size();
  // Family 0: the trace named no CPU (a server on a non-Intel host sends none, as gdbserver
  // does); decode as GDB then does, for an unknown CPU with no errata workarounds.
  if (family != 0) {
    config.cpu.vendor = pcv_intel;
    config.cpu.family = static_cast<uint16_t>(family);
    config.cpu.model = static_cast<uint8_t>(model);
    config.cpu.stepping = static_cast<uint8_t>(stepping);
    pt_cpu_errata(&config.errata, &config.cpu);
  }
  pt_insn_decoder* dec = pt_insn_alloc_decoder(&config);
  if (!dec) die("pt_insn_alloc_decoder failed");
  pt_image* image = pt_insn_get_image(dec);
  for (const auto& r : read_maps(maps_path)) {
    int e = pt_image_add_file(image, r.path.c_str(), r.offset, r.end - r.start, nullptr, r.start);
    if (e < 0) die("pt_image_add_file " + r.path + ": " + pt_errstr(pt_errcode(e)));
  }
  int errors = 0;
  for (;;) {
    int status = pt_insn_sync_forward(dec);
    if (status < 0) {
      if (status != -pte_eos) die(std::string("sync: ") + pt_errstr(pt_errcode(status)));
      break;
    }
    for (;;) {
      while (status & pts_event_pending) {
        pt_event ev;
        status = pt_insn_event(dec, &ev, sizeof ev);
        if (status < 0) break;
        std::printf("event %d\n", static_cast<int>(ev.type));
      }
      if (status < 0 || (status & pts_eos)) break;
      pt_insn insn;
      status = pt_insn_next(dec, &insn, sizeof insn);
      if (insn.iclass != ptic_error) std::printf("insn 0x%" PRIx64 "\n", insn.ip);
      if (status < 0) break;
    }
    if (status < 0 && status != -pte_eos) {
      ++errors;
      std::printf("error %s\n", pt_errstr(pt_errcode(status)));
    }
  }
  pt_insn_free_decoder(dec);
  return errors ? 2 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "encode" && (argc == 5 || argc == 6)) return encode(argv[2], argv[3], argv[4], argc == 6 ? std::atoi(argv[5]) : 0);
  if (cmd == "decode" && argc == 7) return decode(argv[2], argv[3], std::atoi(argv[4]), std::atoi(argv[5]), std::atoi(argv[6]));
  std::fprintf(stderr, "usage: pt_tool encode MAPS PCS OUT [PSB_EVERY] | decode MAPS RAW FAMILY MODEL STEPPING\n");
  return 2;
}
