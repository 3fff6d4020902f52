// SPDX-License-Identifier: GPL-2.0
/*
 * msr_helper self-test (userspace, static, run as root).
 *
 *   selftest                  full test against a loaded msr_helper (real or simulate_lbr=1)
 *   selftest --expect-absent  passes when /dev/msr_helper does not exist (module refused)
 *
 * Prints one "selftest: ok|FAIL|info ..." line per check and ends with
 * "selftest: PASS" (exit 0) or "selftest: FAIL (n failures)" (exit 1).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/capability.h>

#include "../include/uapi/msr_helper.h"

/* The ABI layout, checked at compile time (C11). */
_Static_assert(sizeof(struct msrh_info) == MSRH_INFO_SIZE, "msrh_info size");
_Static_assert(sizeof(struct msrh_lbr_target) == MSRH_LBR_TARGET_SIZE, "msrh_lbr_target size");
_Static_assert(sizeof(struct msrh_lbr_entry) == MSRH_LBR_ENTRY_SIZE, "msrh_lbr_entry size");
_Static_assert(sizeof(struct msrh_lbr_snapshot) == MSRH_LBR_SNAPSHOT_SIZE, "snapshot size");
_Static_assert(offsetof(struct msrh_lbr_snapshot, entries) == 56, "snapshot header size");
_Static_assert(sizeof(struct msrh_rdmsr) == MSRH_RDMSR_SIZE, "msrh_rdmsr size");

static int failures;
static int simulated;

#define CHECK(cond, ...)                                    \
	do {                                                \
		if (cond) {                                 \
			printf("selftest: ok   ");          \
		} else {                                    \
			printf("selftest: FAIL ");          \
			failures++;                         \
		}                                           \
		printf(__VA_ARGS__);                        \
		printf("\n");                               \
		fflush(stdout);                             \
	} while (0)

/* ioctl returning 0 or -errno */
static int xioctl(int fd, unsigned long req, void *arg)
{
	return ioctl(fd, req, arg) == 0 ? 0 : -errno;
}

static int info(int fd, struct msrh_info *i)
{
	memset(i, 0, sizeof(*i));
	i->size = sizeof(*i);
	return xioctl(fd, MSRH_IOC_INFO, i);
}

static int target_op(int fd, unsigned long req, pid_t pid)
{
	struct msrh_lbr_target t = { .size = sizeof(t), .pid = pid };

	return xioctl(fd, req, &t);
}

static int snapshot(int fd, pid_t pid, struct msrh_lbr_snapshot *s)
{
	memset(s, 0, sizeof(*s));
	s->size = sizeof(*s);
	s->pid = pid;
	return xioctl(fd, MSRH_IOC_LBR_SNAPSHOT, s);
}

static int rdmsr(int fd, uint32_t msr, uint64_t *v)
{
	struct msrh_rdmsr r = { .size = sizeof(r), .msr = msr };
	int rc = xioctl(fd, MSRH_IOC_RDMSR, &r);

	*v = r.value;
	return rc;
}

/* ---- the traced child -------------------------------------------------------------------- */

extern char st_jmp1[], st_int3[], st_jmp2[], st_after2[];

static void __attribute__((noinline)) child_body(void)
{
	__asm__ volatile(
		".globl st_jmp1\n st_jmp1: jmp st_int3\n ud2\n"
		".globl st_int3\n st_int3: int3\n"
		".globl st_jmp2\n st_jmp2: jmp st_after2\n ud2\n"
		".globl st_after2\n st_after2: nop\n"
		"mov $200, %%ecx\n"
		"1: nop\n dec %%ecx\n jnz 1b\n"
		::: "rcx", "memory", "cc");
}

/* fork a child that is ptrace-stopped (SIGSTOP) before child_body() */
static pid_t spawn_traced(void)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		int fd;

		for (fd = 3; fd < 256; fd++) /* hold no reference to the device's open file */
			close(fd);
		if (ptrace(PTRACE_TRACEME, 0, 0, 0))
			_exit(90);
		raise(SIGSTOP);
		child_body();
		_exit(7);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status) ||
	    WSTOPSIG(status) != SIGSTOP) {
		printf("selftest: FAIL could not start a traced child\n");
		exit(1);
	}
	return pid;
}

/* resume with `req`, wait for the next stop; returns rip, or 0 if it did not stop with SIGTRAP */
static uint64_t resume(pid_t pid, int req)
{
	struct user_regs_struct regs;
	int status;

	if (ptrace(req, pid, 0, 0) || waitpid(pid, &status, 0) != pid)
		return 0;
	if (!WIFSTOPPED(status) || WSTOPSIG(status) != SIGTRAP)
		return 0;
	if (ptrace(PTRACE_GETREGS, pid, 0, &regs))
		return 0;
	return regs.rip;
}

static int check_sim_entries(const struct msrh_lbr_snapshot *s, uint64_t a)
{
	unsigned k;

	if (s->count != MSRH_SIM_COUNT)
		return 0;
	for (k = 0; k < MSRH_SIM_COUNT; k++)
		if (s->entries[k].to != a - 0x10ull * k || s->entries[k].from != a - 0x10ull * k - 0x20 ||
		    s->entries[k].info != MSRH_SIM_INFO(k))
			return 0;
	return 1;
}

static int all_user(const struct msrh_lbr_snapshot *s)
{
	unsigned k;

	for (k = 0; k < s->count && k < MSRH_LBR_MAX; k++)
		if (s->entries[k].from >= (1ull << 47) || s->entries[k].to >= (1ull << 47))
			return 0;
	return 1;
}

static void print_snapshot(const char *what, const struct msrh_lbr_snapshot *s)
{
	unsigned k;

	printf("selftest: info %s: seq %llu count %u flags %#x ip %#llx cpu %u\n", what,
	       (unsigned long long)s->seq, s->count, s->flags, (unsigned long long)s->ip, s->cpu);
	for (k = 0; k < s->count && k < 4; k++)
		printf("selftest: info   [%u] %#llx -> %#llx info %#llx\n", k,
		       (unsigned long long)s->entries[k].from, (unsigned long long)s->entries[k].to,
		       (unsigned long long)s->entries[k].info);
}

/* run `fn` in a forked process, return its exit status (0 = its checks passed) */
static int in_child(int (*fn)(int, pid_t), int fd, pid_t target)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		fflush(stdout);
		_exit(fn(fd, target));
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

/* another root process (CAP_SYS_RAWIO) that is not the ptracer */
static int not_tracer(int inherited_fd, pid_t target)
{
	struct msrh_lbr_snapshot s;
	int bad = 0, fd;

	bad |= snapshot(inherited_fd, target, &s) != -EPERM;
	bad |= target_op(inherited_fd, MSRH_IOC_LBR_ATTACH, target) != -EPERM;
	bad |= target_op(inherited_fd, MSRH_IOC_LBR_DETACH, target) != -EPERM;
	fd = open(MSRH_DEVICE_PATH, O_RDWR);
	if (fd < 0)
		return 2;
	bad |= snapshot(fd, target, &s) != -EPERM;
	bad |= target_op(fd, MSRH_IOC_LBR_ATTACH, target) != -EPERM;
	close(fd);
	return bad;
}

/* uid 0 without CAP_SYS_RAWIO: the file mode lets it in, the module's check must not */
static int root_without_rawio(int unused_fd, pid_t unused)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2];
	int fd;

	(void)unused_fd;
	(void)unused;
	if (syscall(SYS_capget, &hdr, data))
		return 3;
	data[CAP_SYS_RAWIO / 32].effective &= ~(1u << (CAP_SYS_RAWIO % 32));
	data[CAP_SYS_RAWIO / 32].permitted &= ~(1u << (CAP_SYS_RAWIO % 32));
	data[CAP_SYS_RAWIO / 32].inheritable &= ~(1u << (CAP_SYS_RAWIO % 32));
	if (syscall(SYS_capset, &hdr, data))
		return 4;
	fd = open(MSRH_DEVICE_PATH, O_RDWR);
	if (fd >= 0)
		return 5;
	return errno == EPERM ? 0 : 6;
}

/* uid/gid 1000: no capabilities, and the 0600 root-owned node already refuses (EACCES) */
static int unprivileged(int inherited_fd, pid_t target)
{
	struct msrh_lbr_snapshot s;
	int fd;

	if (setgroups(0, NULL) || setresgid(1000, 1000, 1000) || setresuid(1000, 1000, 1000))
		return 3;
	fd = open(MSRH_DEVICE_PATH, O_RDWR);
	if (fd >= 0)
		return 4;
	if (errno != EACCES && errno != EPERM)
		return 5;
	/* an fd inherited from root still only works for the target's own tracer */
	return snapshot(inherited_fd, target, &s) == -EPERM ? 0 : 6;
}

static const char *vendor_name(uint32_t v)
{
	switch (v) {
	case MSRH_VENDOR_INTEL: return "Intel";
	case MSRH_VENDOR_AMD: return "AMD";
	case MSRH_VENDOR_HYGON: return "Hygon";
	default: return "unknown";
	}
}

/* ---- TEST ONLY checks of the LBR logic over simulated MSRs (simulate_lbr=1) ----------------- */

static int sim_set(int fd, uint32_t msr, uint64_t value)
{
	struct msrh_rdmsr r = { .size = sizeof(r), .msr = msr, .value = value };

	return xioctl(fd, MSRH_IOC_SIM_SET, &r);
}

static int has_foreign(const struct msrh_lbr_snapshot *s)
{
	unsigned k;

	for (k = 0; k < s->count && k < MSRH_LBR_MAX; k++)
		if (s->entries[k].from >= MSRH_SIM_FOREIGN && s->entries[k].from < MSRH_SIM_FOREIGN + 0x10000)
			return 1;
	return 0;
}

/* a traced child that sleeps (switch-outs without a trap), then stops itself */
static pid_t spawn_sleeper(void)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		int fd;

		for (fd = 3; fd < 256; fd++)
			close(fd);
		if (ptrace(PTRACE_TRACEME, 0, 0, 0))
			_exit(90);
		raise(SIGSTOP);
		usleep(20000);
		raise(SIGSTOP);
		_exit(8);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status)) {
		printf("selftest: FAIL could not start a traced sleeper\n");
		exit(1);
	}
	return pid;
}

static int cont_to_sigstop(pid_t pid)
{
	int status;

	return ptrace(PTRACE_CONT, pid, 0, 0) == 0 && waitpid(pid, &status, 0) == pid &&
	       WIFSTOPPED(status) && WSTOPSIG(status) == SIGSTOP;
}

static void reap(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static unsigned long module_counter(const char *name)
{
	char path[128];
	unsigned long v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/module/msr_helper/parameters/%s", name);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fscanf(f, "%lu", &v) != 1)
		v = 0;
	fclose(f);
	return v;
}

static void sim_checks(int fd)
{
	struct msrh_lbr_snapshot s;
	struct msrh_info in;
	uint64_t v;
	pid_t p, many[40];
	int rc, i, n;
	unsigned long lookups, visits;

	/* the first switch-in clears what others left in the stack */
	p = spawn_sleeper();
	rc = target_op(fd, MSRH_IOC_LBR_ATTACH, p);
	CHECK(rc == 0, "sim: ATTACH a sleeper: %s", rc ? strerror(-rc) : "ok");
	CHECK(cont_to_sigstop(p), "sim: the sleeper ran, slept and stopped itself");
	rc = snapshot(fd, p, &s);
	print_snapshot("sim: switch-out snapshot of the sleeper", &s);
	CHECK(rc == 0 && s.seq > 0 && (s.flags & MSRH_SNAP_SWITCH) && !has_foreign(&s) && s.count == 0,
	      "sim: first switch-in cleared the stack: no branch of another task in the snapshot (count %u)",
	      s.count);
	target_op(fd, MSRH_IOC_LBR_DETACH, p);
	reap(p);

	/* busy rules: a stale LBR_SELECT is nobody; DEBUGCTL.LBR, BTS are someone */
	CHECK(sim_set(fd, MSRH_MSR_LBR_SELECT, 0x1c4) == 0, "sim: LBR_SELECT left at 0x1c4 (as perf -j any,u leaves it)");
	p = spawn_traced();
	rc = target_op(fd, MSRH_IOC_LBR_ATTACH, p);
	CHECK(rc == 0, "sim: ATTACH with a stale LBR_SELECT: %s", rc ? strerror(-rc) : "ok");
	CHECK(resume(p, PTRACE_CONT) == (uint64_t)(uintptr_t)st_int3 + 1 && snapshot(fd, p, &s) == 0 &&
	      (s.flags & MSRH_SNAP_INT3) && !(s.flags & MSRH_SNAP_CONFLICT) && s.count == MSRH_SIM_COUNT,
	      "sim: ... and the LBR recorded (flags %#x count %u)", s.flags, s.count);
	rc = rdmsr(fd, MSRH_MSR_LBR_SELECT, &v);
	if (rc == 0)
		CHECK(v == 0x1c4, "sim: the foreign LBR_SELECT is back after the thread switched out (%#llx)",
		      (unsigned long long)v);
	else
		printf("selftest: info LBR_SELECT not readable on this CPU model (%s)\n", strerror(-rc));
	target_op(fd, MSRH_IOC_LBR_DETACH, p);
	reap(p);
	sim_set(fd, MSRH_MSR_LBR_SELECT, 0);

	p = spawn_traced();
	sim_set(fd, MSRH_MSR_DEBUGCTL, 1); /* another LBR user */
	rc = target_op(fd, MSRH_IOC_LBR_ATTACH, p);
	CHECK(rc == -EBUSY, "sim: DEBUGCTL.LBR on: ATTACH EBUSY (%s)", strerror(-rc));
	sim_set(fd, MSRH_MSR_DEBUGCTL, 0xc0); /* perf's BTS: TR|BTS */
	rc = target_op(fd, MSRH_IOC_LBR_ATTACH, p);
	CHECK(rc == -EBUSY, "sim: a BTS user (DEBUGCTL.TR|BTS): ATTACH EBUSY (%s)", strerror(-rc));
	sim_set(fd, MSRH_MSR_DEBUGCTL, 0);
	sim_set(fd, MSRH_MSR_RTIT_CTL, 1); /* PT tracing; this (Skylake-like) model lets LBR and PT coexist */
	rc = target_op(fd, MSRH_IOC_LBR_ATTACH, p);
	CHECK(rc == 0, "sim: PT tracing on a model where LBR and PT coexist: ATTACH ok (%s)",
	      rc ? strerror(-rc) : "ok");
	sim_set(fd, MSRH_MSR_RTIT_CTL, 0);
	/* another user appears after ATTACH: the module keeps off and says so */
	sim_set(fd, MSRH_MSR_DEBUGCTL, 1);
	CHECK(resume(p, PTRACE_CONT) == (uint64_t)(uintptr_t)st_int3 + 1 && snapshot(fd, p, &s) == 0 &&
	      (s.flags & MSRH_SNAP_CONFLICT) && s.count == 0,
	      "sim: LBR taken by another user after ATTACH: snapshot flagged CONFLICT, no entries (flags %#x count %u)",
	      s.flags, s.count);
	sim_set(fd, MSRH_MSR_DEBUGCTL, 0);
	target_op(fd, MSRH_IOC_LBR_DETACH, p);
	reap(p);

	/* a context switch costs a hash lookup, not a walk over every attached thread */
	n = (int)(sizeof(many) / sizeof(many[0]));
	for (i = 0; i < n; i++) {
		many[i] = spawn_traced();
		target_op(fd, MSRH_IOC_LBR_ATTACH, many[i]);
	}
	info(fd, &in);
	lookups = module_counter("sim_switch_lookups");
	visits = module_counter("sim_switch_visits");
	for (i = 0; i < 500; i++)
		usleep(50); /* each sleep is two context switches (to idle and back) */
	lookups = module_counter("sim_switch_lookups") - lookups;
	visits = module_counter("sim_switch_visits") - visits;
	printf("selftest: info %u targets attached; %lu lookups in sched_switch visited %lu entries\n",
	       in.live_targets, lookups, visits);
	CHECK(in.live_targets >= (unsigned)n && lookups > 0 && visits * 2 <= lookups * 3,
	      "sim: sched_switch looks a task up in O(1): %.2f entries visited per lookup with %d targets",
	      lookups ? (double)visits / lookups : 0.0, n);
	for (i = 0; i < n; i++) {
		target_op(fd, MSRH_IOC_LBR_DETACH, many[i]);
		reap(many[i]);
	}
}

/* 5-level paging: user code above 128 TiB gets its own addresses back, not kernel-looking ones */
static void la57_check(int fd)
{
	struct msrh_lbr_snapshot s;
	int pipefd[2], status, rc;
	uint64_t code = 0, rip;
	pid_t pid;

	if (pipe(pipefd))
		return;
	pid = fork();
	if (pid == 0) {
		unsigned char *p = mmap((void *)0x0000900000000000ull, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
					MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		uint64_t at = p == MAP_FAILED ? 0 : (uint64_t)(uintptr_t)p;

		if (at) {
			p[0] = 0xcc; /* int3 */
			p[1] = 0xeb; /* jmp . */
			p[2] = 0xfe;
		}
		if (write(pipefd[1], &at, sizeof(at)) != sizeof(at))
			_exit(91);
		if (!at || at < (1ull << 47))
			_exit(0);
		ptrace(PTRACE_TRACEME, 0, 0, 0);
		raise(SIGSTOP);
		((void (*)(void))p)();
		_exit(9);
	}
	if (read(pipefd[0], &code, sizeof(code)) != sizeof(code))
		code = 0;
	close(pipefd[0]);
	close(pipefd[1]);
	if (code < (1ull << 47)) {
		printf("selftest: info no 5-level paging in this guest (mmap above 128 TiB gave %#llx): LA57 check skipped\n",
		       (unsigned long long)code);
		waitpid(pid, &status, 0);
		return;
	}
	waitpid(pid, &status, 0); /* SIGSTOP */
	rc = target_op(fd, MSRH_IOC_LBR_ATTACH, pid);
	rip = resume(pid, PTRACE_CONT);
	rc |= snapshot(fd, pid, &s);
	print_snapshot("sim: snapshot at an int3 above 128 TiB", &s);
	CHECK(rc == 0 && rip == code + 1 && s.count == MSRH_SIM_COUNT && check_sim_entries(&s, code),
	      "sim: 5-level paging: entries at %#llx stay user addresses (newest to %#llx)",
	      (unsigned long long)code, (unsigned long long)s.entries[0].to);
	target_op(fd, MSRH_IOC_LBR_DETACH, pid);
	reap(pid);
}

static int finish(void)
{
	if (failures) {
		printf("selftest: FAIL (%d failures)\n", failures);
		return 1;
	}
	printf("selftest: PASS\n");
	return 0;
}

int main(int argc, char **argv)
{
	struct msrh_info in;
	struct msrh_lbr_snapshot s0, s1, s2, s;
	struct stat st;
	uint64_t v, rip, prev_seq;
	pid_t a, d;
	int fd, rc, i, ok;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && !strcmp(argv[1], "--expect-absent")) {
		fd = open(MSRH_DEVICE_PATH, O_RDWR);
		CHECK(fd < 0 && errno == ENOENT, "%s absent (open: %s)", MSRH_DEVICE_PATH,
		      fd < 0 ? strerror(errno) : "succeeded");
		return finish();
	}

	/* ---- device node and INFO ---- */
	CHECK(stat(MSRH_DEVICE_PATH, &st) == 0 && S_ISCHR(st.st_mode) &&
	      (st.st_mode & 07777) == 0600, "%s is a char device with mode 0600 (mode %o)",
	      MSRH_DEVICE_PATH, (unsigned)(st.st_mode & 07777));
	fd = open(MSRH_DEVICE_PATH, O_RDWR);
	if (fd < 0) {
		printf("selftest: FAIL open %s: %s\n", MSRH_DEVICE_PATH, strerror(errno));
		return 1;
	}
	rc = info(fd, &in);
	CHECK(rc == 0 && in.size == MSRH_INFO_SIZE && in.abi_version == MSRH_ABI_VERSION,
	      "INFO: rc %d abi_version %u", rc, in.abi_version);
	simulated = !!(in.features & MSRH_FEAT_SIMULATED);
	printf("selftest: info INFO vendor %s family %#x model %#x stepping %u lbr_format %u "
	       "lbr_depth %u from %#x to %#x info %#x features %#x%s live_targets %u live_objects %u\n",
	       vendor_name(in.vendor), in.family, in.model, in.stepping, in.lbr_format, in.lbr_depth,
	       in.lbr_from_msr, in.lbr_to_msr, in.lbr_info_msr, in.features,
	       simulated ? " (SIMULATED, TEST ONLY)" : "", in.live_targets, in.live_objects);
	if (simulated)
		CHECK(in.lbr_depth == MSRH_SIM_COUNT && in.lbr_from_msr == 0x680 && in.lbr_to_msr == 0x6c0,
		      "simulated LBR: %u entries at FROM 0x680 TO 0x6c0 (depth %u)", MSRH_SIM_COUNT, in.lbr_depth);
	else
		CHECK((in.features & MSRH_FEAT_LBR) && in.lbr_depth > 0 && in.lbr_depth <= MSRH_LBR_MAX,
		      "real LBR: probe passed, depth %u", in.lbr_depth);
	CHECK(in.live_targets == 0 && in.live_objects == 1, "fresh module: 0 targets, 1 object");
	{
		struct msrh_info bad = { .size = 12 };

		CHECK(xioctl(fd, MSRH_IOC_INFO, &bad) == -EINVAL, "INFO with a wrong size: EINVAL");
	}
	CHECK(xioctl(fd, _IO(MSRH_IOC_MAGIC, 0x7f), NULL) == -ENOTTY, "unknown ioctl: ENOTTY");

	/* ---- RDMSR whitelist ---- */
	rc = rdmsr(fd, MSRH_MSR_DEBUGCTL, &v);
	CHECK(rc == 0, "RDMSR DEBUGCTL: rc %d value %#llx", rc, (unsigned long long)v);
	rc = rdmsr(fd, 0xc0000082u, &v); /* LSTAR: never readable through us */
	CHECK(rc == -EPERM, "RDMSR LSTAR (not whitelisted): %s", strerror(-rc));
	rc = rdmsr(fd, 0x10u, &v); /* TSC */
	CHECK(rc == -EPERM, "RDMSR TSC (not whitelisted): %s", strerror(-rc));
	{
		struct msrh_rdmsr r = { .size = sizeof(r), .msr = MSRH_MSR_DEBUGCTL, .reserved = 1 };

		CHECK(xioctl(fd, MSRH_IOC_RDMSR, &r) == -EINVAL, "RDMSR with reserved != 0: EINVAL");
	}

	/* ---- attach, stops, snapshots ---- */
	a = spawn_traced();
	printf("selftest: info traced child %d stopped (SIGSTOP)\n", (int)a);
	CHECK(snapshot(fd, a, &s) == -ENOENT, "SNAPSHOT before ATTACH: ENOENT");
	rc = target_op(fd, MSRH_IOC_LBR_ATTACH, a);
	CHECK(rc == 0, "ATTACH %d: %s", (int)a, rc ? strerror(-rc) : "ok");
	rc = target_op(fd, MSRH_IOC_LBR_ATTACH, a);
	CHECK(rc == -EEXIST, "second ATTACH: EEXIST (%s)", strerror(-rc));
	info(fd, &in);
	CHECK(in.live_targets == 1 && in.live_objects == 2, "after ATTACH: 1 target, 2 objects (%u, %u)",
	      in.live_targets, in.live_objects);
	rc = snapshot(fd, a, &s0);
	CHECK(rc == 0, "SNAPSHOT right after ATTACH: rc %d seq %llu count %u", rc,
	      (unsigned long long)s0.seq, s0.count);

	rip = resume(a, PTRACE_CONT);
	CHECK(rip == (uint64_t)(uintptr_t)st_int3 + 1, "child stopped at its int3 (rip %#llx)",
	      (unsigned long long)rip);
	rc = snapshot(fd, a, &s1);
	print_snapshot("snapshot at int3", &s1);
	CHECK(rc == 0 && s1.seq > s0.seq, "int3 stop: seq increased (%llu -> %llu)",
	      (unsigned long long)s0.seq, (unsigned long long)s1.seq);
	CHECK(s1.flags & MSRH_SNAP_INT3, "int3 stop: taken in the int3 trap path (flags %#x)", s1.flags);
	CHECK(s1.count > 0 && s1.entries[0].to == (uint64_t)(uintptr_t)st_int3,
	      "int3 stop: newest entry ends at the int3 (%#llx)", (unsigned long long)s1.entries[0].to);
	if (simulated) {
		CHECK(check_sim_entries(&s1, rip - 1), "int3 stop: %u synthetic entries as specified",
		      MSRH_SIM_COUNT);
	} else {
		CHECK(s1.entries[0].from == (uint64_t)(uintptr_t)st_jmp1,
		      "int3 stop: newest entry is the jmp before it (%#llx)",
		      (unsigned long long)s1.entries[0].from);
		CHECK(all_user(&s1), "int3 stop: user addresses only (CPL0 filtered)");
	}

	rip = resume(a, PTRACE_SINGLESTEP);
	CHECK(rip == (uint64_t)(uintptr_t)st_after2, "single step over the jmp (rip %#llx)",
	      (unsigned long long)rip);
	rc = snapshot(fd, a, &s2);
	print_snapshot("snapshot at single step", &s2);
	CHECK(rc == 0 && s2.seq > s1.seq && (s2.flags & MSRH_SNAP_DEBUG),
	      "step stop: seq increased (%llu -> %llu), taken in the #DB path (flags %#x)",
	      (unsigned long long)s1.seq, (unsigned long long)s2.seq, s2.flags);
	CHECK(s2.count > 0 && s2.entries[0].to == (uint64_t)(uintptr_t)st_after2,
	      "step stop: newest entry ends at the jmp target (%#llx)",
	      (unsigned long long)s2.entries[0].to);
	if (simulated)
		CHECK(check_sim_entries(&s2, rip), "step stop: synthetic entries as specified");
	else
		CHECK(s2.entries[0].from == (uint64_t)(uintptr_t)st_jmp2 && all_user(&s2),
		      "step stop: newest entry is the stepped jmp, user addresses only");

	prev_seq = s2.seq;
	ok = 1;
	for (i = 0; i < 20; i++) {
		rip = resume(a, PTRACE_SINGLESTEP);
		if (!rip || snapshot(fd, a, &s) || s.seq <= prev_seq || !s.count ||
		    (simulated && s.entries[0].to != rip)) {
			ok = 0;
			break;
		}
		prev_seq = s.seq;
	}
	CHECK(ok, "20 more single steps: every stop has a fresh snapshot (last seq %llu)",
	      (unsigned long long)prev_seq);

	if (simulated) {
		sim_checks(fd);
		la57_check(fd);
	}

	/* ---- permission checks ---- */
	rc = in_child(not_tracer, fd, a);
	CHECK(rc == 0, "another root process that is not the tracer: EPERM for SNAPSHOT/ATTACH/DETACH "
	      "(child status %d)", rc);
	rc = in_child(root_without_rawio, fd, a);
	CHECK(rc == 0, "uid 0 without CAP_SYS_RAWIO: open fails with EPERM (child status %d)", rc);
	rc = in_child(unprivileged, fd, a);
	CHECK(rc == 0, "uid 1000 (no capabilities): open refused (EACCES by mode 0600), inherited fd "
	      "gets EPERM on SNAPSHOT (child status %d)", rc);
	rc = snapshot(fd, 0x3ffffff, &s);
	CHECK(rc == -ESRCH, "SNAPSHOT of a pid that does not exist: ESRCH (%s)", strerror(-rc));
	rc = target_op(fd, MSRH_IOC_LBR_ATTACH, 1);
	CHECK(rc == -EPERM, "ATTACH to init (not traced by us): EPERM (%s)", strerror(-rc));
	rc = target_op(fd, MSRH_IOC_LBR_ATTACH, getpid());
	CHECK(rc == -EPERM, "ATTACH to ourselves: EPERM (%s)", strerror(-rc));
	rc = target_op(fd, MSRH_IOC_LBR_ATTACH, -5);
	CHECK(rc == -EINVAL, "ATTACH to pid -5: EINVAL (%s)", strerror(-rc));
	{
		struct msrh_lbr_target t = { .size = sizeof(t), .pid = a, .flags = 1 };

		CHECK(xioctl(fd, MSRH_IOC_LBR_ATTACH, &t) == -EINVAL, "ATTACH with unknown flags: EINVAL");
	}

	/* ---- detach ---- */
	rc = target_op(fd, MSRH_IOC_LBR_DETACH, a);
	CHECK(rc == 0, "DETACH: %s", rc ? strerror(-rc) : "ok");
	CHECK(snapshot(fd, a, &s) == -ENOENT, "SNAPSHOT after DETACH: ENOENT");
	CHECK(target_op(fd, MSRH_IOC_LBR_DETACH, a) == -ENOENT, "second DETACH: ENOENT");
	info(fd, &in);
	CHECK(in.live_targets == 0 && in.live_objects == 1, "after DETACH: 0 targets, 1 object (%u, %u)",
	      in.live_targets, in.live_objects);

	/* ---- thread exit frees the state ---- */
	rc = target_op(fd, MSRH_IOC_LBR_ATTACH, a);
	CHECK(rc == 0, "re-ATTACH: %s", rc ? strerror(-rc) : "ok");
	{
		int status = 0;

		ptrace(PTRACE_CONT, a, 0, 0);
		CHECK(waitpid(a, &status, 0) == a && WIFEXITED(status) && WEXITSTATUS(status) == 7,
		      "traced child ran to its exit (status %#x)", status);
	}
	info(fd, &in);
	CHECK(in.live_targets == 0 && in.live_objects == 1,
	      "after the thread exited: state freed (%u targets, %u objects)", in.live_targets,
	      in.live_objects);
	rc = snapshot(fd, a, &s);
	CHECK(rc == -ESRCH, "SNAPSHOT of the exited thread: ESRCH (%s)", strerror(-rc));

	/* ---- close frees ---- */
	d = spawn_traced();
	rc = target_op(fd, MSRH_IOC_LBR_ATTACH, d);
	info(fd, &in);
	CHECK(rc == 0 && in.live_targets == 1 && in.live_objects == 2,
	      "ATTACH a second child: %u targets, %u objects", in.live_targets, in.live_objects);
	close(fd);
	fd = open(MSRH_DEVICE_PATH, O_RDWR);
	info(fd, &in);
	CHECK(fd >= 0 && in.live_targets == 0 && in.live_objects == 1,
	      "close() of the fd freed its targets (%u targets, %u objects)", in.live_targets,
	      in.live_objects);
	CHECK(snapshot(fd, d, &s) == -ENOENT, "SNAPSHOT through a new fd: ENOENT (not attached there)");
	kill(d, SIGKILL);
	waitpid(d, NULL, 0);
	close(fd);
	return finish();
}
