// Machine code for the block-patching trace source (--btrace-source=patch): decoding the
// instructions a patch displaces, relocating them, and building the stub a patched block end
// jumps to. Pure functions over bytes (no ptrace), so every encoder is unit-tested.
//
// A stub keeps every register and the flags, never writes into the red zone (a direct branch's
// stub keeps rax in the thread's word gs:[16]; the others move rsp 128 bytes down first; a
// call's stub only below the return address slot), appends the branch to the ring in the
// inferior and then does what the original control-flow instruction does. Each thread has a
// ring of its own: the stub finds its head (a u64 pointer to the next free entry) at gs:[0],
// the server setting every thread's gs base to its ring's head word; gs:[8] is the thread's
// scratch word (a table hit's destination). Ring entries: a 32-bit word, the edge id (an index
// into the server's table of (from, to) edges); bit 31 set means a 64-bit target follows (ret
// and indirect branches). The ring ends at a PROT_NONE guard page: a full ring faults on the
// entry's first store, the server drains it and restarts that instruction, so nothing is lost.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/x86/block_cache.h"
#include "backend/error.h"

namespace backend::patch {

constexpr uint32_t kDynamicEntry = 0x80000000u;  // entry word flag: a u64 target follows
constexpr uint64_t kRedZone = 128;
constexpr size_t kJmpLen = 5;  // e9 rel32: what a patched site starts with
// Hash of a block start for the table of instrumented targets that ret/indirect stubs probe
// (open addressing, linear probing, 0 = empty). The stub computes the same with imul/shr/and.
constexpr int32_t kHashMul = 0x2545f491;
inline uint32_t hash_slot(uint64_t target, uint32_t mask) {
  return static_cast<uint32_t>((target * static_cast<uint64_t>(static_cast<int64_t>(kHashMul))) >> 16) & mask;
}

// A register operand or a memory operand [base + index*scale + disp] (rip-relative: disp is
// already resolved into `rip_target`). Register numbers are the hardware ones (rax=0 .. r15=15),
// -1 = none.
struct Operand {
  bool is_reg = false;
  int reg = -1;
  int base = -1, index = -1;
  uint8_t scale = 1;
  int64_t disp = 0;
  bool rip = false;
  uint64_t rip_target = 0;
  uint8_t segment = 0;  // 0x64 (fs) / 0x65 (gs) prefix, 0 = none
};

struct Insn {
  uint64_t addr = 0;
  uint8_t len = 0;
  uint8_t bytes[16] = {};
  bool rip_relative = false;  // has a [rip+disp32] operand at disp_offset
  uint8_t disp_offset = 0;
  bool flow = false;          // ends a block (jump, call, ret, syscall, trap...)
  std::optional<Operand> operand;  // indirect jmp/call: its single operand
  bool operand_size_16 = false;    // 66 prefix (16-bit branch forms are not patched)
  // What it does to rax: `mov $imm, %eax/%rax` or `xor %eax,%eax` leave a known value
  // (rax_known); any other write (explicit or implicit) makes rax unknown (writes_rax).
  // decode_all() fills these only when the code it decodes ends in `syscall`.
  bool writes_rax = false;
  std::optional<uint64_t> rax_known;
};

// A capstone handle (detail on) kept across decodes: opening one builds capstone's tables
// anew, which costs more than decoding a block.
class Disassembler {
 public:
  Disassembler();
  ~Disassembler();
  Disassembler(const Disassembler&) = delete;
  Disassembler& operator=(const Disassembler&) = delete;
  size_t handle() const { return handle_; }
  // One instruction buffer (with its detail) for every decode, instead of a cs_malloc and
  // cs_free per call.
  void* insn() const { return insn_; }

 private:
  size_t handle_ = 0;     // capstone's csh
  void* insn_ = nullptr;  // capstone's cs_insn
};

// Decodes every instruction in `code` (at address addr) with capstone (and extended_insn_length
// for what capstone 4 lacks); stops at the first undecodable byte. An error only if capstone cannot be opened.
Result<std::vector<Insn>> decode_all(const Disassembler& dis, std::span<const uint8_t> code, uint64_t addr);
Result<std::vector<Insn>> decode_all(std::span<const uint8_t> code, uint64_t addr);  // a handle of its own

// The bytes of `in` moved to new_addr (a [rip+disp32] operand re-targeted); nullopt when the
// displacement no longer fits in 32 bits, or the instruction is a relative branch (never moved).
std::optional<std::vector<uint8_t>> relocate(const Insn& in, uint64_t new_addr);

// The system call number of a block ending in `syscall` (the last instruction of insns), when
// the block itself sets rax to a constant before it (glibc's wrappers: `mov $N,%eax` or
// `xor %eax,%eax`); nullopt when rax comes from elsewhere.
std::optional<uint64_t> syscall_number(std::span<const Insn> insns);

// e9 rel32 from `from` to `to`; nullopt if out of range.
std::optional<std::vector<uint8_t>> jmp_rel32(uint64_t from, uint64_t to);

// Emits `opcode /reg_field op` with REX.W (mov r64, r/m64 = 8b /r; jmp r/m64 = ff /4 ...),
// encoded at `at` (rip-relative operands are re-targeted from there). false if unencodable.
bool emit_modrm(std::vector<uint8_t>& out, uint64_t at, uint8_t opcode, int reg_field, const Operand& op,
                bool rex_w = true);

// Chooses the instructions a patch at the end of a block displaces: the last instructions of
// `insns` (straight-line code, the control-flow one last, none before `earliest`) whose bytes
// cover at least kJmpLen. Returns the index of the first displaced instruction, or nullopt when
// the block is too short.
std::optional<size_t> choose_displacement(std::span<const Insn> insns, uint64_t earliest);

// Where the stub for one block end lives and what it must record.
struct StubSpec {
  FlowKind kind = FlowKind::Trap;  // CondJump, Loop, Jump, Call, Return, IndirectJump, IndirectCall
  std::vector<Insn> displaced;     // moved before the control-flow instruction, in order
  Insn flow;                       // the control-flow instruction itself
  uint64_t target = 0;             // direct kinds
  uint32_t edge_id = 0;
  bool record = true;              // false: a branch to the next instruction (not a branch in a trace)
  // Dynamic kinds: the hash table of instrumented targets, table_mask+1 u64 slots (its
  // capacity), followed by as many u64 destinations (where a hit goes: the target or the
  // translation of its block). The mask in use is the u32 at table_addr - 8, read at every
  // probe: the table starts small and grows (a big one scattered over 2 MB touched every page).
  uint64_t table_addr = 0;
  uint32_t table_mask = 0;
};

struct Stub {
  std::vector<uint8_t> code;
  // Stub offsets at which nothing of the original control-flow instruction has happened yet,
  // with the original address the thread is really at there (displaced instructions, then the
  // control-flow instruction itself). Anywhere else inside the stub the thread must be stepped
  // out (its branch may already be recorded).
  std::vector<std::pair<uint32_t, uint64_t>> exact;
  std::optional<uint32_t> miss_int3;  // dynamic kinds: the int3 a target outside the table hits
  std::vector<uint32_t> ring_stores;  // offsets of the instructions that write a new entry first
  // Dynamic kinds: offset of the stub's inline cache (kCacheBytes; zero: empty), which the
  // server fills with a recent target (an instrumented block start), the id of the edge (this
  // site, that target) and where to go. A hit records 4 bytes and jumps there without a probe.
  std::optional<uint32_t> cache;
  // The rel32 fields of its direct exits (offset in the stub, original target).
  std::vector<std::pair<uint32_t, uint64_t>> exits;
};
// {u64 target, u32 edge id, u32 0, u64 destination}: the destination is the target or the
// translation of the block there.
constexpr size_t kCacheBytes = 24;

// Builds the stub for `spec` at stub_addr; an error names what cannot be encoded.
Result<Stub> build_stub(const StubSpec& spec, uint64_t stub_addr);

// --- The system-call buffer (docs/record-replay.md, "The system-call buffer") -------------
// `branchstub record` runs the calls that neither block nor make descriptors or mappings
// without a ptrace stop: the block that sets the number is patched before its `syscall`; the
// stub makes the call itself and appends a record of it to the thread's buffer, which the
// server turns into trace events at the next stop (at the ring position the record names, so
// each gets its exact branch count). The thread's words beside its ring head (gs block):
constexpr int32_t kGsSyscallBufNext = 64;  // u64: where the next record goes
constexpr int32_t kGsSyscallBufEnd = 72;   // u64: the buffer's end (0, or no room: the call stops)
// A record: u64 words {nr, args[6], result, ring head at the call, data length, pc after the
// original `syscall`, 0}, then the bytes the call wrote, padded to 8.
constexpr uint64_t kSyscallRecordHeader = 96;
enum SyscallRecordWord : uint8_t { kRecordNr = 0, kRecordArgs = 1, kRecordResult = 7, kRecordHead = 8, kRecordLength = 9, kRecordPc = 10 };
constexpr uint64_t kSyscallRecordMaxData = 4096;  // a larger size argument: the call stops

// What a buffered call writes: `fixed` bytes at argument `ptr_arg` when it returns 0 (stat),
// or, with fixed == 0, as many bytes as it returns (readlink, getxattr), at most argument
// `size_arg` (which must be <= kSyscallRecordMaxData). ptr_arg -1: nothing.
struct SyscallOutput {
  int ptr_arg = -1;
  uint32_t fixed = 0;
  int size_arg = -1;
};
// The calls the buffer takes (x86-64 numbers), with what each writes; nullopt for any other.
std::optional<SyscallOutput> buffered_syscall_output(uint64_t nr);

struct SyscallStubSpec {
  std::vector<Insn> displaced;  // the instructions before the `syscall` (>= kJmpLen bytes)
  uint64_t syscall_addr = 0;    // the original `syscall`
  uint64_t nr = 0;
  SyscallOutput out;
  // A call the buffer does not take: the stub is the displaced instructions and the int3 (a
  // patch costs less to put in than an int3 over the `syscall`, at each of a run's installs).
  bool stop_only = false;
};
// The stub: the displaced instructions, the call and its record, then a jmp to the instruction
// after the original `syscall` (an exit, linked as other stubs') with rcx and r11 as the
// kernel leaves them there. Without room (or a size argument too large) it restores
// everything and stops at its int3 (miss_int3), which stands for the original `syscall`: the
// call is then made as any other, with its stops. exact: the displaced instructions and, after
// them, the original `syscall` (nothing of the call done yet).
Result<Stub> build_syscall_stub(const SyscallStubSpec& spec, uint64_t stub_addr);

// A dynamic stub can compute this instruction's target (ret, or an indirect jmp/call whose
// operand does not involve rsp and is not 16-bit).
bool dynamic_supported(const Insn& flow, FlowKind kind);

}  // namespace backend::patch
